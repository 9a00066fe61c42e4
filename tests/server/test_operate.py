"""The operator console's actions over HTTP (issue 15): resolve an unconfirmed effect, restore and fork from a
checkpoint, cancel and resume runs in bulk — each from the pages' forms and as JSON, each through the CSRF guard."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the dashboard needs the `ui` extra")

from starlette.testclient import TestClient

from telo import paths
from telo.journal import eventlog
from telo.journal.model import Admission, Entry, Outcome, Parked
from telo.journal.sqlite import SqliteStore
from telo.server.app import run_url
from tests.server.support import parked_run

BASE = "http://127.0.0.1:8765"
ORIGIN = {"origin": BASE}


def unconfirmed_run(store: SqliteStore, run: str) -> None:
    """A run as the engine leaves one that crashed inside `steps/pay` (an intent, no receipt) and whose
    policy is to ask: parked at `steps/pay/@unconfirmed[0]`."""
    store.admit(Admission.of(run, workflow="pay", inputs={"id": run}))
    store.append(run, Entry.decided("inputs", "inputs", {"id": run}))
    store.append(run, Entry.decided("steps/pay/inputs", "inputs", {"amount": 5}))
    store.park(run, Parked(paths.unconfirmed_path("steps/pay", 0), "charge", None, None,
                           "unconfirmed effect: 'charge' at steps/pay may or may not have happened"))


def csrf_of(client: TestClient, url: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', client.get(url).text)
    assert found is not None
    return found.group(1)


def status_of(store: SqliteStore, run: str) -> str:
    record = store.read_run(run)
    assert record is not None
    return record.status


def checkpoint_at(store: SqliteStore, run: str, path: str) -> int:
    return next(c.seq for c in eventlog.checkpoints(store, run) if c.path == path)


# --- resolve ---------------------------------------------------------------------------------------------


def test_resolve_an_unconfirmed_effect_as_json(store: SqliteStore, client: TestClient) -> None:
    unconfirmed_run(store, "pay:1")
    detail = client.get(run_url("pay:1", api=True)).json()
    assert [r["step"] for r in detail["actions"]["resolve"]] == ["steps/pay"]
    url = run_url("pay:1", "/resolve", api=True)
    r = client.post(url, json={"path": "steps/pay", "action": "skip", "value": {"charged": True, "n": 2}},
                    headers=ORIGIN)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["run"] == "pay:1" and body["path"] == "steps/pay"
    assert body["resolution"]["action"] == "skip" and body["resolution"]["value"] == {"charged": True, "n": 2}
    assert body["resolution"]["by"] == "operator"
    assert status_of(store, "pay:1") == "running"
    entry = next(e for e in store.read_entries("pay:1") if e.path == "steps/pay/@unconfirmed[0]")
    assert entry.decode("pay:1")["value"] == {"charged": True, "n": 2}
    # refusals: a step with no unknown outcome, an unknown answer, a settled run
    nothing = client.post(url, json={"path": "steps/other", "action": "redrive"}, headers=ORIGIN)
    assert nothing.status_code == 409 and nothing.json()["error"]["code"] == "ERR_DURABLE_EFFECT_NOT_UNCONFIRMED"
    bad = client.post(url, json={"path": "steps/pay", "action": "maybe"}, headers=ORIGIN)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "ERR_INVALID_VALUE"
    store.complete("pay:1", Outcome.failed("ERR_X", "boom"))
    settled = client.post(url, json={"path": "steps/pay", "action": "fail"}, headers=ORIGIN)
    assert settled.status_code == 409 and settled.json()["error"]["code"] == "ERR_DURABLE_RUN_SETTLED"
    assert client.post(run_url("nope", "/resolve", api=True), json={"path": "steps/pay", "action": "fail"},
                       headers=ORIGIN).status_code == 404


def test_resolve_from_the_run_pages_form(store: SqliteStore, client: TestClient) -> None:
    unconfirmed_run(store, "pay/2")
    page = client.get(run_url("pay/2")).text
    assert 'id="resolve-form-0"' in page and 'value="steps/pay"' in page
    assert all(f'value="{a}"' in page for a in ("redrive", "skip", "fail"))
    form = {"csrf": csrf_of(client, run_url("pay/2")), "path": "steps/pay", "action": "skip", "value": "{not json"}
    url = run_url("pay/2", "/resolve", api=True)
    bad = client.post(url, data=form, follow_redirects=False)  # no Origin: the form's token counts
    assert bad.status_code == 303 and "level=error" in bad.headers["location"]
    assert "ERR_DURABLE_PAYLOAD_INVALID" in client.get(bad.headers["location"]).text
    assert status_of(store, "pay/2") == "parked"
    r = client.post(url, data={**form, "action": "redrive", "value": ""}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith(run_url("pay/2") + "?notice=resolved")
    shown = client.get(r.headers["location"]).text
    assert "resolved steps/pay: redrive" in shown and 'id="run-status">running' in shown
    assert 'id="resolve-form-0"' not in shown  # no longer waiting for an answer


# --- checkpoints: restore, fork --------------------------------------------------------------------------


def test_the_run_page_lists_its_checkpoints(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "flow:k", "go:k")
    listed = client.get(run_url("flow:k", "/checkpoints", api=True)).json()
    assert [(c["path"], c["kind"]) for c in listed["checkpoints"]] == [("(start)", "start"), ("steps/first", "step")]
    page = client.get(run_url("flow:k")).text
    first = checkpoint_at(store, "flow:k", "steps/first")
    assert f'id="restore-{first}"' in page and f'id="fork-{first}"' in page and 'id="restore-0"' in page
    assert "under the new run&#39;s idempotency keys" in page  # the fork's note is shown before forking


def test_restore_to_a_checkpoint(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "flow:r", "go:r")
    first = checkpoint_at(store, "flow:r", "steps/first")
    url = run_url("flow:r", "/restore", api=True)
    r = client.post(url, json={"checkpoint": first, "reason": "redo the wait"}, headers=ORIGIN)
    assert r.status_code == 200, r.text
    assert r.json() == {"run": "flow:r", "restored": True, "checkpoint": first, "epoch": 1, "status": "running"}
    assert status_of(store, "flow:r") == "running"
    assert any(e.path == "@restore[1]" for e in store.read_entries("flow:r"))
    missing = client.post(url, json={"checkpoint": 999}, headers=ORIGIN)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "ERR_CHECKPOINT_NOT_FOUND"
    assert client.post(url, json={}, headers=ORIGIN).status_code == 400  # no checkpoint named
    # from the page's form: back to the run with a notice
    form = {"csrf": csrf_of(client, run_url("flow:r")), "checkpoint": "0"}
    back = client.post(url, data=form, follow_redirects=False)
    assert back.status_code == 303 and back.headers["location"].startswith(run_url("flow:r") + "?notice=restored")
    assert "restored to checkpoint 0 (epoch 2)" in client.get(back.headers["location"]).text


def test_fork_from_a_checkpoint_lands_on_the_new_run(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "flow:f", "go:f")
    first = checkpoint_at(store, "flow:f", "steps/first")
    url = run_url("flow:f", "/fork", api=True)
    form = {"csrf": csrf_of(client, run_url("flow:f")), "checkpoint": str(first), "runId": "copy/1"}
    r = client.post(url, data=form, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith(run_url("copy/1") + "?notice=forked")
    shown = client.get(r.headers["location"]).text
    assert "under the new run&#39;s idempotency keys (copy/1/steps/" in shown and 'id="run-status">running' in shown
    assert status_of(store, "flow:f") == "parked"  # the original is untouched
    j = client.post(url, json={"checkpoint": first}, headers=ORIGIN)
    assert j.status_code == 200, j.text
    body = j.json()
    assert body["run"].startswith("flow:f:fork:") and body["forkedFrom"] == "flow:f" and body["checkpoint"] == first
    assert body["status"] == "running" and f"({body['run']}/steps/…)" in body["note"]
    taken = client.post(url, json={"checkpoint": first, "runId": "copy/1"}, headers=ORIGIN)
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "ERR_DURABLE_RUN_EXISTS"
    again = client.post(url, data=form, follow_redirects=False)  # a refused form comes back to the source
    assert again.headers["location"].startswith(run_url("flow:f") + "?notice=ERR_DURABLE_RUN_EXISTS")


# --- bulk ------------------------------------------------------------------------------------------------


def _bulk_runs(store: SqliteStore) -> None:
    parked_run(store, "due:1", "go:1")
    store.park("due:1", Parked("steps/wait", "approval", "go:1", 1))  # its deadline passed: a resume moves it
    parked_run(store, "wait:2", "go:2")  # waits for a delivery: a resume would not move it
    store.admit(Admission.of("held:3", workflow="flow"))
    store.park("held:3", Parked("@manifest[0]", "flow", None, None, "ERR_DURABLE_MANIFEST_CHANGED: changed: greet"))
    store.admit(Admission.of("done:4", workflow="flow"))
    store.complete("done:4", Outcome.completed(1))


def _by_run(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["run"]: r for r in body["results"]}


def test_resume_selected_runs_force_only_when_asked(store: SqliteStore, client: TestClient) -> None:
    _bulk_runs(store)
    runs = ["due:1", "wait:2", "held:3", "done:4", "nope"]
    r = client.post("/api/bulk/resume", json={"runs": runs}, headers=ORIGIN)
    assert r.status_code == 200, r.text
    out = _by_run(r.json())
    assert list(out) == runs and r.json()["done"] == 1
    assert out["due:1"]["done"] is True and out["due:1"]["resumed"] is True
    assert out["wait:2"]["done"] is False and "telo deliver go:2" in out["wait:2"]["hint"]
    assert out["held:3"]["done"] is False and out["held:3"]["error"]["code"] == "ERR_DURABLE_MANIFEST_CHANGED"
    assert out["done:4"]["done"] is False and "already settled" in out["done:4"]["reason"]
    assert out["nope"]["error"]["code"] == "ERR_DURABLE_RUN_NOT_FOUND"
    assert [status_of(store, x) for x in runs[:4]] == ["running", "parked", "parked", "completed"]
    forced = _by_run(client.post("/api/bulk/resume", json={"runs": ["held:3"], "force": True},
                                 headers=ORIGIN).json())
    assert forced["held:3"]["done"] is True and forced["held:3"]["forced"] is True
    assert client.post("/api/bulk/resume", json={"runs": []}, headers=ORIGIN).status_code == 400
    assert client.post("/api/bulk/resume", json={"runs": "due:1"}, headers=ORIGIN).status_code == 400


def test_cancel_selected_runs_from_the_runs_page(store: SqliteStore, client: TestClient) -> None:
    _bulk_runs(store)
    page = client.get("/runs").text
    assert 'id="bulk"' in page and 'name="run" value="wait:2"' in page and 'form="bulk"' in page
    assert 'id="bulk-cancel"' in page and 'id="bulk-resume"' in page and 'id="bulk-force"' in page
    csrf = csrf_of(client, "/runs")
    # one POST: the ticked rows repeat the `run` field
    body = f"csrf={csrf}&run=wait%3A2&run=done%3A4&run=held%3A3&reason=cleanup"
    r = client.post("/api/bulk/cancel", content=body,
                    headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    rows = dict(re.findall(r'<tr data-run="([^"]+)" class="outcome-(\w+)"', r.text))
    assert rows == {"wait:2": "done", "done:4": "refused", "held:3": "done"}
    assert "already completed" in r.text
    assert [status_of(store, x) for x in ("wait:2", "done:4", "held:3")] == ["cancelled", "completed", "cancelled"]
    assert status_of(store, "due:1") == "parked"  # not ticked
    j = client.post("/api/bulk/cancel", json={"runs": ["due:1", "wait:2"]}, headers=ORIGIN).json()
    assert [(x["run"], x["done"]) for x in j["results"]] == [("due:1", True), ("wait:2", False)]


def test_resume_selected_from_the_form_explains_refusals(store: SqliteStore, client: TestClient) -> None:
    _bulk_runs(store)
    csrf = csrf_of(client, "/runs")
    body = f"csrf={csrf}&run=wait%3A2&run=held%3A3"
    headers = {"content-type": "application/x-www-form-urlencoded"}
    r = client.post("/api/bulk/resume", content=body, headers=headers)
    assert r.status_code == 200
    rows = dict(re.findall(r'<tr data-run="([^"]+)" class="outcome-(\w+)"', r.text))
    assert rows == {"wait:2": "refused", "held:3": "refused"}
    assert "telo deliver go:2" in r.text and "ERR_DURABLE_MANIFEST_CHANGED" in r.text
    forced = client.post("/api/bulk/resume", content=body + "&force=on", headers=headers)
    assert dict(re.findall(r'<tr data-run="([^"]+)" class="outcome-(\w+)"', forced.text))["held:3"] == "done"


# --- the guard -------------------------------------------------------------------------------------------

NEW_POSTS = [
    (run_url("g:1", "/resolve", api=True), {"path": "steps/pay", "action": "fail"}),
    (run_url("g:1", "/restore", api=True), {"checkpoint": 0}),
    (run_url("g:1", "/fork", api=True), {"checkpoint": 0, "runId": "g:copy"}),
    ("/api/bulk/cancel", {"runs": ["g:1"]}),
    ("/api/bulk/resume", {"runs": ["g:1"], "force": True}),
]


@pytest.mark.parametrize(("url", "body"), NEW_POSTS, ids=["resolve", "restore", "fork", "bulk-cancel", "bulk-resume"])
def test_every_new_action_is_refused_without_the_token_or_from_a_foreign_origin(
        store: SqliteStore, client: TestClient, url: str, body: dict[str, Any]) -> None:
    unconfirmed_run(store, "g:1")
    before = len(store.read_entries("g:1"))
    for headers in ({}, {"origin": "http://evil.example"}, {"origin": "null"}):
        r = client.post(url, json=body, headers=headers)
        assert r.status_code == 403 and r.json()["error"]["code"] == "ERR_UI_CSRF", (headers, r.text)
    token = csrf_of(client, run_url("g:1"))
    form = client.post(url, data={"csrf": "guess", **{k: str(v) for k, v in body.items()}},
                       headers={"origin": "http://evil.example", "x-csrf-token": token})
    assert form.status_code == 403 and form.json()["error"]["code"] == "ERR_UI_CSRF"  # a foreign form, token or not
    assert status_of(store, "g:1") == "parked" and len(store.read_entries("g:1")) == before
    assert store.read_run("g:copy") is None
