"""Messages into a run, events and streams out of it on the dashboard (issue 18; telo.server.messages): the run
page's "Send a message" form and its JSON twin, through the same CSRF guard and error rendering as the other
actions; the run's events (latest per name, history) and its streams, paged from an offset."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("starlette", reason="the dashboard needs the `ui` extra")

from starlette.testclient import TestClient

import telo
from telo.durable.messages import message_payload
from telo.journal.sqlite import SqliteStore
from telo.server.app import run_url
from telo.server.messages import stream_url
from tests.server.support import parked_run

BASE = "http://127.0.0.1:8765"
ORIGIN = {"origin": BASE}
ODD = "log/α b?"  # a stream name that must travel as one percent-encoded segment

MANIFEST = """\
kind: Telo.Application
metadata: { name: Msgs }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Durable: durable }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./.telo/runs.db
---
kind: Durable.Receive
metadata: { name: nextCmd }
topic: cmds
---
kind: Durable.Publish
metadata: { name: progress }
name: progress
value: !cel "inputs.v"
---
kind: Durable.Publish
metadata: { name: phase }
name: phase
value: !cel "inputs.v"
---
kind: Local.Workflow
metadata: { name: three }
journal: !ref runs
runId: !cel "'three:' + inputs.id"
steps:
  - name: a
    invoke: !ref nextCmd
  - name: p1
    invoke: !ref progress
    inputs: { v: !cel "steps.a.result.payload" }
  - name: ph
    invoke: !ref phase
    inputs: { v: "middle" }
  - name: b
    invoke: !ref nextCmd
  - name: p2
    invoke: !ref progress
    inputs: { v: "done" }
---
kind: Durable.StreamWrite
metadata: { name: emit }
stream: rows
value: !cel "inputs.v"
---
kind: Durable.StreamWrite
metadata: { name: endRows }
stream: rows
close: true
---
kind: Durable.StreamWrite
metadata: { name: note }
stream: "log/α b?"
value: "noted"
---
kind: Local.Workflow
metadata: { name: writer }
journal: !ref runs
runId: !cel "'writer:' + inputs.id"
steps:
  - name: w0
    invoke: !ref emit
    inputs: { v: "zero" }
  - name: w1
    invoke: !ref emit
    inputs: { v: { n: 1 } }
  - name: w2
    invoke: !ref emit
    inputs: { v: "two" }
  - name: n
    invoke: !ref note
  - name: wait
    invoke: !ref nextCmd
  - name: w3
    invoke: !ref emit
    inputs: { v: !cel "steps.wait.result.payload" }
  - name: end
    invoke: !ref endRows
"""


@pytest.fixture
def app(tmp_path: Path, store: SqliteStore) -> Iterator[telo.App]:
    """The manifest over the dashboard's own journal (tmp_path/journal.db, the `store` fixture's)."""
    with telo.load(MANIFEST, journal=str(tmp_path / "journal.db")) as loaded:
        yield loaded


def csrf_of(client: TestClient, url: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', client.get(url).text)
    assert found is not None
    return found.group(1)


def notice_of(location: str) -> tuple[str, str]:
    query = parse_qs(urlsplit(location).query)
    return query["notice"][0], query["level"][0]


def messages_at(store: SqliteStore, run: str, path: str) -> list[object]:
    """The payloads of the message entries at ``path`` (telo.durable.messages: ``{payload, nonce}``)."""
    return [message_payload(run, e) for e in store.read_entries(run) if e.path == path]


# --- send ------------------------------------------------------------------------------------------------


def test_send_from_the_run_pages_form_writes_the_message_and_wakes_the_receive(
        store: SqliteStore, client: TestClient, app: telo.App) -> None:
    assert app.run("three", {"id": "1"}).status == "parked"  # a receive waits on topic cmds
    detail = client.get(run_url("three:1", api=True)).json()
    assert detail["actions"]["send"] is True and detail["actions"]["sendTopic"] == "cmds"
    assert detail["actions"]["deliver"] is None  # a receive is moved by a message, not a delivery
    page = client.get(run_url("three:1")).text
    assert 'id="send-form"' in page and 'id="send-topic" value="cmds"' in page and 'id="deliver-form"' not in page
    url = run_url("three:1", "/send", api=True)
    form = {"csrf": csrf_of(client, run_url("three:1")), "topic": "cmds", "payload": '{"pct": 50}', "key": "k1"}
    r = client.post(url, data=form, follow_redirects=False)  # no Origin: the form's token counts
    assert r.status_code == 303 and r.headers["location"].startswith(run_url("three:1") + "?notice=sent")
    notice, level = notice_of(r.headers["location"])
    seq = next(e.seq for e in store.read_entries("three:1") if e.path == "@inbox/cmds/k1")
    assert level == "ok" and f"seq {seq}, key k1, duplicate: no, woke: yes" in notice
    assert messages_at(store, "three:1", "@inbox/cmds/k1") == [{"pct": 50}]  # read back from the journal
    shown = client.get(r.headers["location"]).text
    assert "sent to topic cmds" in shown and 'id="run-status">running' in shown
    # The same key again: nothing is written, and the answer says so.
    again = client.post(url, data={**form, "payload": '{"pct": 99}'}, follow_redirects=False)
    notice, level = notice_of(again.headers["location"])
    assert level == "ok" and "duplicate: yes" in notice and f"seq {seq}" in notice and "nothing was written" in notice
    assert messages_at(store, "three:1", "@inbox/cmds/k1") == [{"pct": 50}]
    # Refusals come back as a notice with the code, never a traceback.
    bad = client.post(url, data={**form, "key": "k2", "payload": "{not json"}, follow_redirects=False)
    notice, level = notice_of(bad.headers["location"])
    assert level == "error" and notice.startswith("ERR_DURABLE_PAYLOAD_INVALID: the payload is not JSON")
    blank = client.post(url, data={**form, "key": "k3", "topic": "  "}, follow_redirects=False)
    assert notice_of(blank.headers["location"])[0].startswith("ERR_DURABLE_MESSAGE_INVALID")
    assert messages_at(store, "three:1", "@inbox/cmds/k2") == [] and messages_at(store, "three:1", "@inbox//k3") == []
    # Without a key the message gets a fresh one; the run (woken by k1) takes k1 first, then this one.
    fresh = client.post(url, data={**form, "key": "", "payload": '"second"'}, follow_redirects=False)
    assert "duplicate: no" in notice_of(fresh.headers["location"])[0]
    assert app.run_due() == 1
    done = app.result("three:1", wait=10)
    assert done.ok and done.step("a")["key"] == "k1" and done.step("b")["payload"] == "second"


def test_send_as_json_and_its_refusals(store: SqliteStore, client: TestClient, app: telo.App) -> None:
    app.run("three", {"id": "2"})
    url = run_url("three:2", "/send", api=True)
    r = client.post(url, json={"topic": "cmds", "payload": {"n": 3}, "key": "j1"}, headers=ORIGIN)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body == {"run": "three:2", "topic": "cmds", "key": "j1", "seq": body["seq"], "duplicate": False,
                    "woke": True}
    assert messages_at(store, "three:2", "@inbox/cmds/j1") == [{"n": 3}]
    again = client.post(url, json={"topic": "cmds", "payload": 0, "key": "j1"}, headers=ORIGIN)
    assert again.status_code == 200 and again.json() == {**body, "duplicate": True, "woke": False}
    queued = client.post(url, json={"topic": "later", "payload": None}, headers=ORIGIN).json()
    assert queued["key"] and not queued["duplicate"] and not queued["woke"]  # a fresh key; no receive waits on it
    # the CSRF guard, a bad topic, an unknown run
    assert client.post(url, json={"topic": "cmds"}, headers={"origin": "https://evil.example"}).status_code == 403
    no_topic = client.post(url, json={"payload": 1}, headers=ORIGIN)
    assert no_topic.status_code == 400 and no_topic.json()["error"]["code"] == "ERR_DURABLE_MESSAGE_INVALID"
    missing = client.post(run_url("nope", "/send", api=True), json={"topic": "cmds"}, headers=ORIGIN)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "ERR_DURABLE_RUN_NOT_FOUND"


def test_a_settled_run_refuses_a_message(store: SqliteStore, client: TestClient, app: telo.App) -> None:
    app.run("three", {"id": "3"})
    form = {"csrf": csrf_of(client, run_url("three:3")), "topic": "cmds", "payload": "1"}  # the page, still open
    app.send("three:3", "cmds", 1)
    app.send("three:3", "cmds", 2)
    assert app.result("three:3", wait=10).ok
    r = client.post(run_url("three:3", "/send", api=True), data=form, follow_redirects=False)
    notice, level = notice_of(r.headers["location"])
    assert r.status_code == 303 and level == "error"
    assert notice.startswith("ERR_DURABLE_RUN_SETTLED: cannot send a message to run 'three:3': it is completed")
    assert "send to a run that is still running or parked" in notice  # the hint
    shown = client.get(r.headers["location"]).text
    assert "ERR_DURABLE_RUN_SETTLED" in shown and "Traceback" not in shown and 'id="send-form"' not in shown
    assert client.get(run_url("three:3", api=True)).json()["actions"]["send"] is False
    as_json = client.post(run_url("three:3", "/send", api=True), json={"topic": "cmds"}, headers=ORIGIN)
    assert as_json.status_code == 409 and as_json.json()["error"]["code"] == "ERR_DURABLE_RUN_SETTLED"
    assert as_json.json()["error"]["hint"] == "send to a run that is still running or parked"


def test_a_run_parked_on_an_await_still_offers_both(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "flow:m", "go:m")
    actions = client.get(run_url("flow:m", api=True)).json()["actions"]
    assert actions["deliver"] == "go:m" and actions["send"] is True and actions["sendTopic"] is None
    page = client.get(run_url("flow:m")).text
    assert 'id="deliver-form"' in page and 'id="send-form"' in page and 'id="send-topic" value=""' in page


# --- events ----------------------------------------------------------------------------------------------


def test_events_on_the_run_page_and_as_json(store: SqliteStore, client: TestClient, app: telo.App) -> None:
    app.run("three", {"id": "4"})
    assert client.get(run_url("three:4", "/published", api=True)).json()["latest"] == []
    assert 'id="run-events"' not in client.get(run_url("three:4")).text  # nothing published yet
    app.send("three:4", "cmds", {"pct": 50})
    assert app.wait("three:4", 10).status == "parked"  # published progress and phase, waits at `b`
    app.send("three:4", "cmds", "go")
    assert app.result("three:4", wait=10).ok
    found = client.get(run_url("three:4", "/published", api=True)).json()
    latest = {e["name"]: e for e in found["latest"]}
    assert [e["name"] for e in found["latest"]] == ["progress", "phase"]  # the most recently published first
    assert latest["progress"]["value"] == "done" and latest["progress"]["count"] == 2
    assert latest["progress"]["path"] == "steps/p2" and latest["phase"]["path"] == "steps/ph"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", latest["phase"]["at"])
    assert [(e["name"], e["value"]) for e in found["events"]] == [("progress", {"pct": 50}), ("phase", "middle"),
                                                                  ("progress", "done")]
    assert found["total"] == 3 and found["events"][0]["seq"] < found["events"][2]["seq"]
    only = client.get(run_url("three:4", "/published", api=True) + "?name=phase").json()
    assert [e["value"] for e in only["events"]] == ["middle"] and only["name"] == "phase"
    page = client.get(run_url("three:4")).text
    row = re.search(r'<tr data-event="progress">.*?</tr>', page, re.S)
    assert row is not None and "&#34;done&#34;" in row.group(0) and "steps/p2" in row.group(0)
    assert ">2×<" in row.group(0) and 'id="events-history"' in page and "&#34;pct&#34;: 50" in page
    unknown = client.get(run_url("nope", "/published", api=True))
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "ERR_DURABLE_RUN_NOT_FOUND"


# --- streams ---------------------------------------------------------------------------------------------


def test_streams_are_listed_and_read_from_an_offset(store: SqliteStore, client: TestClient, app: telo.App) -> None:
    assert app.run("writer", {"id": "1"}).status == "parked"  # wrote rows 0..2 and a note, waits for a message
    listed = client.get(run_url("writer:1", "/streams", api=True)).json()
    assert listed == {"run": "writer:1", "settled": False, "streams": [
        {"stream": "rows", "values": 3, "closed": False}, {"stream": ODD, "values": 1, "closed": False}]}
    page = client.get(run_url("writer:1")).text
    assert 'id="run-streams"' in page and f'href="{stream_url("writer:1", ODD)}"' in page
    first = client.get(stream_url("writer:1", "rows", api=True)).json()
    assert [(v["offset"], v["value"]) for v in first["values"]] == [(0, "zero"), (1, {"n": 1}), (2, "two")]
    assert first["next"] == 3 and not first["more"] and not first["ended"]
    # paged: one value a page, from offset 1
    paged = client.get(stream_url("writer:1", "rows", api=True) + "?offset=1&limit=1").json()
    assert [v["value"] for v in paged["values"]] == [{"n": 1}] and paged["next"] == 2 and paged["more"]
    html = client.get(stream_url("writer:1", "rows") + "?offset=1&limit=1").text
    assert 'data-offset="1"' in html and 'data-offset="2"' not in html and "&#34;n&#34;: 1" in html
    assert 'href="?offset=2&amp;limit=1" id="stream-next"' in html and 'id="stream-prev"' in html
    odd = client.get(stream_url("writer:1", ODD)).text
    assert "&#34;noted&#34;" in odd and 'id="stream-name">log/α b?<' in odd
    # the writer closes the stream after a message; a reader past the end sees it ended
    app.send("writer:1", "cmds", "three")
    assert app.result("writer:1", wait=10).ok
    final = client.get(stream_url("writer:1", "rows", api=True) + "?offset=3").json()
    assert [v["value"] for v in final["values"]] == ["three"] and final["closed"] and final["ended"]
    assert "closed by its writer" in client.get(stream_url("writer:1", "rows")).text
    assert {"stream": "rows", "values": 4, "closed": True} in client.get(
        run_url("writer:1", "/streams", api=True)).json()["streams"]
    # refusals: a bad offset, an unknown run
    bad = client.get(stream_url("writer:1", "rows", api=True) + "?offset=-1")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "ERR_INVALID_VALUE"
    assert client.get(stream_url("nope", "rows", api=True)).status_code == 404
    assert client.get(stream_url("nope", "rows")).status_code == 404
