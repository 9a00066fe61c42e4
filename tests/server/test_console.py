"""The operator console over HTTP (issue 15): times in RFC 3339 with milliseconds, the steps' timeline with
failures, retries and fan-outs, the Await's schema on the deliver form, and searching the runs list."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("starlette", reason="the dashboard needs the `ui` extra")

from starlette.testclient import TestClient

from telo.clock import SYSTEM_CLOCK, FakeClock
from telo.journal.model import Entry
from telo.journal.sqlite import SqliteStore
from telo.server.app import run_url
from tests.server.support import failed_run, parked_run, retrying_run

BASE = "http://127.0.0.1:8765"
RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
START = 1_796_200_000_000  # 2026-12-02T08:26:40.000Z


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


# --- the run page ----------------------------------------------------------------------------------------


def test_times_are_rfc3339_with_milliseconds_in_the_api_and_on_the_pages(store: SqliteStore,
                                                                          client: TestClient) -> None:
    parked_run(store, "flow:t1", "go:t1")
    detail = client.get(run_url("flow:t1", api=True)).json()
    assert detail["createdAt"] == "2026-12-02T08:26:40.000Z" and RFC3339_MS.match(detail["updatedAt"])
    listed = client.get("/api/runs").json()["runs"][0]
    assert listed["createdAt"] == detail["createdAt"]
    journal = client.get(run_url("flow:t1", "/journal", api=True)).json()
    assert journal["createdAt"] == detail["createdAt"]
    page = client.get(run_url("flow:t1")).text
    assert "2026-12-02T08:26:40.000Z" in page


def test_a_failed_step_shows_its_error_its_attempts_and_its_recorded_times(store: SqliteStore,
                                                                           client: TestClient) -> None:
    failed_run(store, "batch:1", at_ms=START)
    journal = client.get(run_url("batch:1", "/journal", api=True)).json()
    steps = {s["path"]: s for s in journal["steps"]}
    charge = steps["steps/charge"]
    assert charge["state"] == "failed" and charge["attempt"] == 3 and charge["retries"] == 2
    assert charge["error"] == {"code": "ERR_CARD_DECLINED", "message": "declined for good"}
    # A verdict is written when the attempt fails: its due time minus its backoff (engine/retry.py).
    assert charge["lastFailure"]["at"] == "2026-12-02T08:26:40.100Z"
    assert [e["category"] for e in journal["events"] if e["path"] == "steps/charge/@failed"] == ["failure"]
    # Every entry says when the store wrote it (the store's clock: this test's, which stood still).
    assert {e["at"] for e in journal["events"]} == {"2026-12-02T08:26:40.000Z"}
    page = client.get(run_url("batch:1")).text
    failures = page.split('<section class="failures">', 1)[1].split("</section>", 1)[0]
    assert "steps/charge" in failures and "ERR_CARD_DECLINED" in failures and "declined for good" in failures
    assert "after 3 attempts" in failures
    assert re.search(r'<tr class="step" data-step="steps/charge" data-state="failed">', page)


def test_the_timeline_draws_each_step_over_the_log_and_counts_a_fan_out(store: SqliteStore,
                                                                       client: TestClient) -> None:
    failed_run(store, "batch:2")
    journal = client.get(run_url("batch:2", "/journal", api=True)).json()
    steps = {s["path"]: s for s in journal["steps"]}
    assert steps["steps/each"]["fanOut"] == {"done": 3, "total": 3}
    assert (steps["steps/each"]["from"], steps["steps/each"]["to"]) == (2, 10)
    assert steps["steps/each[1]/w"]["depth"] == 1 and journal["lastSeq"] == 16
    page = client.get(run_url("batch:2")).text
    # steps/each spans seq 2..10 of 16: x = 1/16, width = 9/16 (SVG attributes: the CSP forbids inline style)
    assert '<rect x="6.25%" y="1" width="56.25%"' in page
    assert "3/3 done" in page and "style=" not in page


def test_a_retry_waiting_on_its_backoff_shows_attempt_k_of_n_and_when_the_next_is_due(
        store: SqliteStore, client: TestClient) -> None:
    due = SYSTEM_CLOCK.now_ms() + 60_000
    retrying_run(store, "pay:1", due_ms=due)
    step = client.get(run_url("pay:1", "/journal", api=True)).json()["steps"][0]
    assert step["state"] == "parked" and step["attempt"] == 1 and step["attempts"] == 6
    assert 55_000 < step["nextAttemptInMs"] <= 60_000 and RFC3339_MS.match(step["nextAttemptAt"])
    page = client.get(run_url("pay:1")).text
    assert re.search(r"attempt 1/6, next in (5[6-9]|60) s", page)
    assert "last attempt: <code>ERR_TIMEOUT</code> slow" in page


def test_the_deliver_form_shows_the_schema_the_await_recorded(store: SqliteStore, client: TestClient) -> None:
    schema = {"type": "object", "required": ["by"], "properties": {"by": {"type": "string"}}}
    parked_run(store, "flow:s1", "go:s1")
    store.append("flow:s1", Entry.decided("steps/wait/@payloadSchema", "schema", schema))
    detail = client.get(run_url("flow:s1", api=True)).json()
    assert detail["actions"]["deliverSchema"] == schema
    page = client.get(run_url("flow:s1")).text
    assert 'id="deliver-schema"' in page and "&#34;required&#34;" in page  # the textarea's data-schema
    # Enforced by the server whatever the form lets through.
    refused = client.post("/api/deliver", json={"token": "go:s1", "payload": {"who": "eve"}},
                          headers={"origin": BASE})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "ERR_DURABLE_PAYLOAD_INVALID"


# --- the runs list ---------------------------------------------------------------------------------------


@pytest.fixture
def many(store: SqliteStore, clock: FakeClock) -> SqliteStore:
    """Five runs, one minute apart from 08:26:40Z: three parked of ``flow``, two failed of ``batch``."""
    for n, (run, kind) in enumerate([("flow:a1", "p"), ("batch:x1", "f"), ("flow:a2", "p"), ("batch:x2", "f"),
                                     ("flow:zz", "p")]):
        if kind == "p":
            parked_run(store, run, f"go:{run}")
        else:
            failed_run(store, run)
        clock.advance(ms=60_000)
        del n
    return store


def _listed(client: TestClient, query: str) -> list[str]:
    reply = client.get("/api/runs?" + query)
    assert reply.status_code == 200, reply.text
    return [r["run"] for r in reply.json()["runs"]]


def test_search_by_run_id_and_inputs_substrings(many: SqliteStore, client: TestClient) -> None:
    assert _listed(client, "q=FLOW:A") == ["flow:a2", "flow:a1"]  # case-insensitive, newest first
    assert _listed(client, "inputs=go:flow") == []  # the token is not in the inputs
    assert _listed(client, "inputs=%22A-17%22") == ["batch:x2", "batch:x1"]
    assert _listed(client, "inputs=flow:zz") == ["flow:zz"]
    page = client.get("/runs?q=x2").text
    assert 'id="search-q" value="x2"' in page and run_url("batch:x2") in page and run_url("flow:a1") not in page


def test_filter_by_workflow_status_and_creation_time(many: SqliteStore, client: TestClient) -> None:
    assert _listed(client, "workflow=batch") == ["batch:x2", "batch:x1"]
    assert _listed(client, "status=parked&q=a") == ["flow:a2", "flow:a1"]
    # since/until bound the creation time, both ends included: RFC 3339, a form's datetime-local, epoch ms
    assert _listed(client, "since=2026-12-02T08:27:40Z&until=2026-12-02T08:28:40.000Z") == ["flow:a2", "batch:x1"]
    assert _listed(client, "since=2026-12-02T08:29&workflow=flow") == ["flow:zz"]
    assert _listed(client, f"until={START}") == ["flow:a1"]
    listing = client.get("/api/runs?until=2026-12-02T08:27:40Z").json()
    assert listing["until"] == "2026-12-02T08:27:40.000Z" and listing["next"] is None
    bad = client.get("/api/runs?since=yesterday")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "ERR_INVALID_VALUE"
    page = client.get("/runs?status=failed&q=x").text
    # the status chips keep the rest of the search
    assert 'href="/runs?status=parked&amp;q=x"' in page


def test_a_search_pages_through_its_matches(many: SqliteStore, client: TestClient) -> None:
    first = client.get("/api/runs?q=flow&limit=2").json()
    assert [r["run"] for r in first["runs"]] == ["flow:zz", "flow:a2"] and first["next"]
    second = client.get(f"/api/runs?q=flow&limit=2&after={first['next']}").json()
    assert [r["run"] for r in second["runs"]] == ["flow:a1"] and second["next"] is None
