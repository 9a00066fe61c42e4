"""The dashboard over HTTP (Starlette's TestClient): every page and endpoint, the token and host rules, CSRF,
run ids with any characters, and 404s."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the dashboard needs the `ui` extra")

from starlette.testclient import TestClient

from telo import paths
from telo.errors import TeloError
from telo.journal import eventlog
from telo.journal.model import Admission, Entry, Outcome, Parked
from telo.journal.sqlite import SqliteStore
from telo.server.app import create_app, run_url
from telo.server.security import check_bind, is_loopback
from tests.process import telo
from tests.server.support import GREET, parked_run

BASE = "http://127.0.0.1:8765"
ORIGIN = {"origin": BASE}
WEIRD = ["a/b", "x/journal", "100% sure?#frag", "spaced out & <b>bold</b>", "é/ü/日本", "%2F", "run:1"]


def settled(store: SqliteStore, run: str, outcome: Outcome, workflow: str = "other") -> None:
    store.admit(Admission.of(run, workflow=workflow, inputs={"n": 1}))
    store.complete(run, outcome)


# --- lists -----------------------------------------------------------------------------------------------


def test_a_damaged_run_is_listed_and_shown_as_corrupt_and_the_others_too(store: SqliteStore, client: TestClient,
                                                                          tmp_path: Path) -> None:
    """Observed (issue 12, case 7): one run with a damaged `collapse_reasons` column made the list fail (500)."""
    import sqlite3

    settled(store, "done:1", Outcome.completed({"ok": True}))
    settled(store, "bad:1", Outcome.completed({"ok": True}))
    conn = sqlite3.connect(tmp_path / "journal.db")
    with conn:
        conn.execute("UPDATE telo_durable_runs SET collapse_reasons = '[oops' WHERE run = 'bad:1'")
    conn.close()
    page = client.get("/runs")
    assert page.status_code == 200 and f'href="{run_url("done:1")}"' in page.text
    assert "ERR_DURABLE_JOURNAL_CORRUPT" in page.text
    listed = {r["run"]: r for r in client.get("/api/runs").json()["runs"]}
    assert "corrupt" not in listed["done:1"] and "collapse_reasons" in listed["bad:1"]["corrupt"]["message"]
    shown = client.get(run_url("bad:1"))
    assert shown.status_code == 200 and "collapse_reasons column is not JSON" in shown.text


def test_the_runs_page_lists_runs_with_counts_per_status(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "flow:a1", "go:a1")
    settled(store, "done:1", Outcome.completed({"ok": True}))
    settled(store, "bad:1", Outcome.failed("ERR_X", "boom"))
    page = client.get("/runs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for run in ("flow:a1", "done:1", "bad:1"):
        assert f'href="{run_url(run)}"' in page.text
    assert re.search(r'data-status="all">all <span class="count">3</span>', page.text)
    assert re.search(r'data-status="parked">parked <span class="count">1</span>', page.text)
    assert re.search(r'data-status="running">running <span class="count">0</span>', page.text)
    only = client.get("/runs?status=failed")
    assert "bad:1" in only.text and "flow:a1" not in only.text
    by_workflow = client.get("/runs?workflow=other")
    assert "done:1" in by_workflow.text and "flow:a1" not in by_workflow.text
    assert client.get("/").headers.get("location") is None  # followed: / redirects to /runs
    assert client.get("/", follow_redirects=False).headers["location"] == "/runs"


def test_the_runs_api_pages_and_counts(store: SqliteStore, client: TestClient) -> None:
    for i in range(5):
        settled(store, f"r{i}", Outcome.completed(i))
    parked_run(store, "flow:p", "go:p")
    first = client.get("/api/runs?limit=2").json()
    assert len(first["runs"]) == 2 and first["next"]
    assert first["counts"]["completed"] == 5 and first["counts"]["parked"] == 1 and first["total"] == 6
    assert first["complete"] is True
    seen = [r["run"] for r in first["runs"]]
    after = first["next"]
    while after:
        page = client.get("/api/runs", params={"limit": 2, "after": after}).json()
        seen += [r["run"] for r in page["runs"]]
        after = page["next"]
    assert sorted(seen) == sorted([f"r{i}" for i in range(5)] + ["flow:p"])
    parked = client.get("/api/runs?status=parked").json()
    assert [r["run"] for r in parked["runs"]] == ["flow:p"]
    assert parked["runs"][0]["parked"] == {"path": "steps/wait", "resource": "approval", "token": "go:p"}
    html = client.get("/runs?limit=2")
    assert 'rel="next"' in html.text


def test_a_bad_status_or_limit_is_a_400(client: TestClient) -> None:
    bad = client.get("/api/runs?status=sleeping")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "ERR_INVALID_VALUE"
    assert client.get("/api/runs?limit=many").status_code == 400
    assert client.get("/runs?status=sleeping").status_code == 400


# --- one run ---------------------------------------------------------------------------------------------


def test_a_run_in_the_api_and_on_its_page(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "flow:a1", "go:a1")
    detail = client.get(run_url("flow:a1", api=True)).json()
    assert detail["status"] == "parked" and detail["workflow"] == "flow"
    assert detail["inputs"] == {"value": {"id": "flow:a1"}}
    assert detail["actions"] == {"deliver": "go:a1", "deliverSchema": None, "cancel": True, "resume": True,
                                 "resumeForce": False, "resolve": [], "send": True, "sendTopic": None}
    assert "result" not in detail and detail["held"] is False
    page = client.get(run_url("flow:a1"))
    assert page.status_code == 200
    assert 'id="deliver-form"' in page.text and 'value="go:a1"' in page.text
    assert 'id="resume"' in page.text and 'id="cancel"' in page.text and 'id="resume-force"' not in page.text
    assert "hello ada" in page.text
    settled(store, "done:1", Outcome.completed({"n": 2}, replayed_steps=3, collapsed_regions=1,
                                               collapse_reasons=("Durable.Idempotent (idempotent): why",)))
    done = client.get(run_url("done:1", api=True)).json()
    assert done["result"] == {"value": {"n": 2}} and done["replayedSteps"] == 3
    assert done["collapsedRegions"] == 1 and done["collapseReasons"] == ["Durable.Idempotent (idempotent): why"]
    assert done["actions"] == {"deliver": None, "deliverSchema": None, "cancel": False, "resume": False,
                               "resumeForce": False, "resolve": [], "send": False, "sendTopic": None}
    done_page = client.get(run_url("done:1")).text
    assert "Durable.Idempotent (idempotent): why" in done_page and 'id="deliver-form"' not in done_page


def test_values_are_shown_in_the_plain_encoding_and_escaped(store: SqliteStore, client: TestClient) -> None:
    store.admit(Admission.of("v", workflow="flow", inputs={"html": "<script>alert(1)</script>", "big": 2**62}))
    detail = client.get(run_url("v", api=True)).json()
    assert detail["inputs"]["value"] == {"html": "<script>alert(1)</script>", "big": 2**62}
    page = client.get(run_url("v")).text
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_journal_reads_as_a_timeline(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "flow:t", "go:t")
    step = "steps/pay"
    store.append("flow:t", Entry.decided(paths.retry_path(step, 1), "retry", {"attempt": 1}))
    store.append("flow:t", Entry.decided(paths.retry_verdict_path(step, 0), "retry", {"code": "ERR_X"}))
    store.append("flow:t", Entry.decided(paths.attempt_path(step, 1), "attempt", {"attempt": 1}))
    store.append("flow:t", Entry.decided(paths.unconfirmed_path(step, 0), "unconfirmed",
                                         {"action": "redrive", "by": "policy"}))
    store.append("flow:t", Entry.decided(paths.redrive_path(step, 0), "redrive", {"resolution": 0}))
    store.append("flow:t", Entry.decided(paths.resume_override_path(1_700_000_000_000), "value", {"reason": "op"}))
    store.append("flow:t", Entry.decided("@digest", "digest", {"digest": "sha256-x"}))
    events = client.get(run_url("flow:t", "/journal", api=True)).json()["events"]
    by_path = {e["path"]: e for e in events}
    assert by_path["inputs"]["category"] == "inputs"
    assert by_path["steps/first/inputs"]["category"] == "intent"
    assert by_path["steps/first/inputs"]["idempotencyKey"] == "flow:t/steps/first"
    assert by_path["steps/first"] | {} == {**by_path["steps/first"], "category": "step", "value": "hello ada",
                                           "target": GREET, "event": "effect_receipt"}
    assert by_path["steps/wait/token"]["category"] == "wait"
    assert by_path["steps/pay/retry[1]"]["category"] == "retry"
    assert by_path["steps/pay/@retry[0]"]["category"] == "retry"
    assert by_path["steps/pay/@attempt[1]"]["category"] == "retry"
    assert by_path["steps/pay/@unconfirmed[0]"]["category"] == "resolution"
    assert by_path["steps/pay/@redrive[0]"]["category"] == "redrive"
    assert by_path["override/resume/1700000000000"]["category"] == "resume"
    assert by_path["@digest"]["category"] == "digest"
    park = events[-1]
    assert park["category"] == "park" and park["seq"] is None and park["parked"]["token"] == "go:t"
    seqs = [e["seq"] for e in events[:-1]]
    assert seqs == sorted(seqs)
    # a delivery, then a restore to the first step and a fork from it
    from telo.durable.waits import deliver

    assert deliver(store, "go:t", {"by": "eve"})["delivered"]
    first = next(c.seq for c in eventlog.checkpoints(store, "flow:t") if c.path == "steps/first")
    eventlog.restore(store, "flow:t", first)
    eventlog.fork(store, "flow:t", first, "flow:t-copy")
    after = client.get(run_url("flow:t", "/journal", api=True)).json()["events"]
    cats = [e["category"] for e in after]
    assert "delivery" in cats and "restore" in cats
    delivered = next(e for e in after if e["category"] == "delivery")
    assert delivered["path"] == "steps/wait" and delivered["value"] == {"by": "eve"}
    assert client.get(run_url("flow:t", api=True)).json()["epoch"] == 1
    forked = client.get(run_url("flow:t-copy", "/journal", api=True)).json()["events"]
    assert [e["category"] for e in forked][-1] == "fork"
    page = client.get(run_url("flow:t")).text
    for cat in ("intent", "step", "retry", "resolution", "redrive", "resume", "delivery", "restore"):
        assert f'data-category="{cat}"' in page


def test_an_undecodable_value_is_shown_not_fatal(store: SqliteStore, client: TestClient) -> None:
    store.admit(Admission("odd", "running", None, "not a frame", 2, "flow"))
    store.append("odd", Entry("steps/x", "step", "also not a frame", 2, None, GREET))
    detail = client.get(run_url("odd", api=True)).json()
    assert detail["inputs"]["error"]["code"] == "ERR_DURABLE_JOURNAL_CORRUPT"
    events = client.get(run_url("odd", "/journal", api=True)).json()["events"]
    assert events[0]["error"]["code"] == "ERR_DURABLE_JOURNAL_CORRUPT"
    assert client.get(run_url("odd")).status_code == 200


@pytest.mark.parametrize("run", WEIRD)
def test_run_ids_with_any_characters(store: SqliteStore, client: TestClient, run: str) -> None:
    parked_run(store, run, f"tok:{run}")
    parked_run(store, "x", "tok:x")  # the prefix of "x/journal": must not answer for it
    assert client.get(run_url(run, api=True)).json()["run"] == run
    assert client.get(run_url(run, "/journal", api=True)).json()["run"] == run
    page = client.get(run_url(run))
    assert page.status_code == 200
    assert f'href="{run_url(run)}"' in client.get("/runs").text
    cancelled = client.post(run_url(run, "/cancel", api=True), json={}, headers=ORIGIN)
    assert cancelled.status_code == 200 and cancelled.json()["run"] == run
    assert store.read_run(run).status == "cancelled"  # type: ignore[union-attr]
    assert store.read_run("x").status == "parked"  # type: ignore[union-attr]


def test_unknown_runs_and_routes_are_404(client: TestClient) -> None:
    for url in (run_url("nope", api=True), run_url("nope", "/journal", api=True)):
        r = client.get(url)
        assert r.status_code == 404 and r.json()["error"]["code"] == "ERR_DURABLE_RUN_NOT_FOUND"
    page = client.get(run_url("nope"))
    assert page.status_code == 404 and "ERR_DURABLE_RUN_NOT_FOUND" in page.text and "<html" in page.text
    for url in (run_url("nope", "/cancel", api=True), run_url("nope", "/resume", api=True)):
        assert client.post(url, json={}, headers=ORIGIN).status_code == 404
    missing = client.get("/api/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "ERR_UI_NOT_FOUND"
    assert client.get("/nothing").status_code == 404
    assert client.get(run_url("a", "/b/c")).status_code == 404
    assert client.get("/api/deliver").status_code == 405


# --- actions ---------------------------------------------------------------------------------------------


def test_deliver_as_json(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "flow:d", "go:d")
    r = client.post("/api/deliver", json={"token": "go:d", "payload": {"by": "eve", "n": 3}}, headers=ORIGIN)
    assert r.status_code == 200 and r.json() == {"delivered": True, "run": "flow:d"}
    record = store.read_run("flow:d")
    assert record is not None and record.status == "running"
    entry = next(e for e in store.read_entries("flow:d") if e.path == "steps/wait")
    assert entry.target is None and entry.decode("flow:d") == {"by": "eve", "n": 3}
    again = client.post("/api/deliver", json={"token": "go:d", "payload": 1}, headers=ORIGIN)
    assert again.status_code == 409 and again.json() == {"delivered": False}
    assert client.post("/api/deliver", json={"payload": 1}, headers=ORIGIN).status_code == 400
    assert client.post("/api/deliver", content=b"[1]", headers=ORIGIN).status_code == 400
    assert client.post("/api/deliver", content=b"{nope", headers=ORIGIN).status_code == 400


def test_deliver_from_the_run_pages_form(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "a/b", "go:ab")
    page = client.get(run_url("a/b")).text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    form = {"csrf": csrf.group(1), "next": run_url("a/b"), "token": "go:ab", "payload": '{"by": "eve"}'}
    r = client.post("/api/deliver", data=form, follow_redirects=False)  # no Origin: the form's token counts
    assert r.status_code == 303 and r.headers["location"].startswith(run_url("a/b") + "?notice=delivered")
    shown = client.get(r.headers["location"]).text
    assert "delivered to go:ab" in shown and 'id="run-status">running' in shown
    bad = client.post("/api/deliver", data={**form, "payload": "{not json"}, follow_redirects=False)
    assert bad.status_code == 303 and "ERR_DURABLE_PAYLOAD_INVALID" in client.get(bad.headers["location"]).text
    spent = client.post("/api/deliver", data=form, follow_redirects=False)
    assert "level=error" in spent.headers["location"]
    foreign = client.post("/api/deliver", data={**form, "next": "//evil.example/"}, follow_redirects=False)
    assert foreign.headers["location"].startswith("/runs")  # never an open redirect


def test_cancel(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "flow:c", "go:c")
    r = client.post(run_url("flow:c", "/cancel", api=True), json={"reason": "no longer needed"}, headers=ORIGIN)
    assert r.status_code == 200 and r.json() == {"run": "flow:c", "cancelled": True, "status": "cancelled"}
    record = store.read_run("flow:c")
    assert record is not None and record.error == {"code": "ERR_DURABLE_RUN_CANCELLED", "message": "no longer needed"}
    again = client.post(run_url("flow:c", "/cancel", api=True), json={}, headers=ORIGIN)
    assert again.status_code == 409 and again.json()["status"] == "cancelled"


def test_resume_and_resume_force_for_a_held_run(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "flow:r", "go:r")
    # parked on its Await with nothing delivered: a resume would not move it, and says what would (issue 15)
    stuck = client.post(run_url("flow:r", "/resume", api=True), json={}, headers=ORIGIN)
    assert stuck.status_code == 409 and stuck.json()["resumed"] is False and "telo deliver go:r" in stuck.json()["hint"]
    assert store.read_run("flow:r").status == "parked"  # type: ignore[union-attr]
    store.park("flow:r", Parked("steps/wait", "approval", "go:r", 1))  # its deadline has passed: it moves
    r = client.post(run_url("flow:r", "/resume", api=True), json={}, headers=ORIGIN)
    assert r.status_code == 200 and r.json()["resumed"] is True
    assert store.read_run("flow:r").status == "running"  # type: ignore[union-attr]
    assert any(e.path.startswith("override/resume/") for e in store.read_entries("flow:r"))
    # held because its manifest changed: only --force continues it, and the acceptance is recorded
    store.admit(Admission.of("flow:h", workflow="flow"))
    store.park("flow:h", Parked("@manifest[0]", "flow", None, None, "ERR_DURABLE_MANIFEST_CHANGED: changed: greet"))
    detail = client.get(run_url("flow:h", api=True)).json()
    assert detail["held"] and detail["actions"]["resumeForce"] and not detail["actions"]["resume"]
    assert 'id="resume-force"' in client.get(run_url("flow:h")).text
    refused = client.post(run_url("flow:h", "/resume", api=True), json={}, headers=ORIGIN)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "ERR_DURABLE_MANIFEST_CHANGED"
    forced = client.post(run_url("flow:h", "/resume", api=True), json={"force": True}, headers=ORIGIN)
    assert forced.status_code == 200 and forced.json()["forced"] is True
    assert any(e.path == "@manifest[0]" for e in store.read_entries("flow:h"))
    settled(store, "done", Outcome.completed(1))
    assert client.post(run_url("done", "/resume", api=True), json={}, headers=ORIGIN).status_code == 409


# --- security --------------------------------------------------------------------------------------------


def test_posts_need_the_same_origin_or_the_session_token(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "flow:x", "go:x")
    url = run_url("flow:x", "/cancel", api=True)
    bare = client.post(url, json={})
    assert bare.status_code == 403 and bare.json()["error"]["code"] == "ERR_UI_CSRF"
    assert client.post(url, json={}, headers={"origin": "http://evil.example"}).status_code == 403
    assert client.post(url, json={}, headers={"origin": "null"}).status_code == 403
    page = client.get(run_url("flow:x")).text  # issues the session's CSRF cookie, and the token bound to it
    wrong = client.post(url, json={"csrf": "guess"})
    assert wrong.status_code == 403
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    token = found.group(1)
    assert token != client.cookies.get("telo_ui_csrf")  # the cookie holds the session id, not the token
    for origin in ("http://evil.example", "null"):  # a foreign or masked origin is refused even with the token
        assert client.post(url, json={}, headers={"origin": origin, "x-csrf-token": token}).status_code == 403
    assert client.post(url, json={}, headers={"x-csrf-token": token}).status_code == 200  # no Origin: the token
    parked_run(store, "flow:y", "go:y")
    ok = client.post(run_url("flow:y", "/cancel", api=True), json={}, headers={"sec-fetch-site": "same-origin"})
    assert ok.status_code == 200
    assert store.read_run("flow:x").status == "cancelled"  # type: ignore[union-attr]


def test_without_a_token_only_loopback_host_names_are_answered(store: SqliteStore) -> None:
    app = create_app(store)
    for base in ("http://127.0.0.1:8765", "http://localhost:8765", "http://[::1]:8765", "http://127.0.0.2"):
        with TestClient(app, base_url=base) as c:
            assert c.get("/api/runs").status_code == 200, base
    with TestClient(app, base_url="http://rebound.example:8765") as c:  # DNS rebinding to 127.0.0.1
        r = c.get("/api/runs")
        assert r.status_code == 421 and r.json()["error"]["code"] == "ERR_UI_HOST_REFUSED"


def test_with_a_token_every_request_needs_it(store: SqliteStore) -> None:
    parked_run(store, "flow:s", "go:s")
    app = create_app(store, token="s3cret")
    with TestClient(app, base_url="http://dash.example:8765") as c:  # any host name once a token is set
        denied = c.get("/api/runs")
        assert denied.status_code == 401 and denied.json()["error"]["code"] == "ERR_UI_TOKEN_REQUIRED"
        assert denied.headers["www-authenticate"].startswith("Bearer")
        assert c.get("/runs").status_code == 401 and "ERR_UI_TOKEN_REQUIRED" in c.get("/runs").text
        assert c.get("/static/app.css").status_code == 401
        assert c.get("/api/runs", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/api/runs?token=wrong").status_code == 401
        bearer = {"authorization": "Bearer s3cret"}
        assert c.get("/api/runs", headers=bearer).status_code == 200
        # a bearer client is no browser: its POSTs need no Origin
        assert c.post(run_url("flow:s", "/cancel", api=True), json={}, headers=bearer).status_code == 200
        # ?token= once: a redirect that drops it, and a session cookie from then on
        first = c.get("/runs?status=parked&token=s3cret", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/runs?status=parked"
        assert "s3cret" not in first.headers["set-cookie"]
        assert "HttpOnly" in first.headers["set-cookie"] and "SameSite=Strict" in first.headers["set-cookie"]
        assert c.get("/runs?status=parked").status_code == 200
        assert c.get("/api/runs").status_code == 200
    with TestClient(app, base_url="http://dash.example:8765") as fresh:
        fresh.cookies.set("telo_ui_session", "forged")
        assert fresh.get("/runs").status_code == 401


def test_pages_carry_security_headers_and_load_their_assets(client: TestClient) -> None:
    r = client.get("/runs")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert r.headers["x-frame-options"] == "DENY" and r.headers["referrer-policy"] == "same-origin"
    assert "<script>" not in r.text  # no inline code: the CSP would refuse it
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/static/app.css").status_code == 200


def test_binding_beyond_loopback_requires_a_token(tmp_path: Path) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.1") and not is_loopback("example.com")
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", "t")
    with pytest.raises(TeloError) as refused:
        check_bind("0.0.0.0", None)
    assert refused.value.code == "ERR_UI_TOKEN_REQUIRED"
    out = telo("ui", "--journal", str(tmp_path / "j.db"), "--host", "0.0.0.0", cwd=tmp_path, timeout=30)
    assert out.returncode == 3 and "ERR_UI_TOKEN_REQUIRED" in out.stderr and "--token" in out.stderr
    assert not (tmp_path / "j.db").exists()  # refused before opening anything

