"""The dashboard's queue pages (issue 16, "Visibility"): every queue with runs in the journal, and one queue's
depth and what holds its slots per key and per process, with its oldest waiting runs in grant order — the
counts ``telo queues`` shows, read through the same operation; a queued run's page links to its queue and says
its position; an unknown queue is a 404 (``ERR_QUEUE_NOT_FOUND``); the page refreshes itself when the queue
changes. Before these pages the dashboard showed nothing of queues."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the dashboard needs the `ui` extra")

from starlette.testclient import TestClient

from telo.journal.claims import Holder
from telo.journal.model import Admission, Outcome, Parked
from telo.journal.sqlite import SqliteStore
from telo.server.app import run_url
from tests.server.support import start_ui, stop

WORKER = Holder("worker", "worker-host", 4121, 7).to_text()
ODD = "pay/ments q%"  # a queue name travels percent-encoded as one path segment, like a run id


def queued(store: SqliteStore, queue: str = "payments") -> None:
    """pay:0 (acme) running under a live claim; pay:1, pay:2 (acme) and pay:3 (bolt) waiting; pay:4 (bolt) due
    in an hour; pay:5 (bolt) parked; pay:6 completed (not counted)."""
    now = int(time.time() * 1000)
    for i, key in enumerate(["acme", "acme", "acme", "bolt"]):
        store.admit(Admission.of(f"pay:{i}", status="scheduled", due_at=now - 100 + i, workflow="pay", queue=queue,
                                 queue_key=key))
    store.admit(Admission.of("pay:4", status="scheduled", due_at=now + 3_600_000, workflow="pay", queue=queue,
                             queue_key="bolt"))
    store.admit(Admission.of("pay:5", status="scheduled", due_at=now, workflow="pay", queue=queue, queue_key="bolt"))
    store.park("pay:5", Parked("steps/wait", "approval", "tok-5"))
    store.admit(Admission.of("pay:6", status="scheduled", due_at=now, workflow="pay", queue=queue, queue_key="bolt"))
    store.complete("pay:6", Outcome.completed(None))
    assert store.claim("pay:0", WORKER, 600_000, now) is not None
    store.update_run("pay:0", status="running", due_at=None)


def test_the_queues_page_lists_each_queue_with_its_depth_and_holders(store: SqliteStore,
                                                                       client: TestClient) -> None:
    queued(store)
    store.admit(Admission.of("refund:1", status="scheduled", due_at=0, workflow="refund", queue="refunds"))
    store.complete("refund:1", Outcome.completed(None))  # a queue with only settled runs is still listed
    listing = client.get("/api/queues").json()["queues"]
    assert [q["queue"] for q in listing] == ["payments", "refunds"]
    payments = listing[0]
    assert (payments["holding"], payments["parked"], payments["depth"]) == (1, 1, {"dueNow": 3, "dueLater": 1,
                                                                                    "total": 4})
    assert payments["processes"] == [{"process": "worker-host:4121", "running": 1}]
    assert "limits" not in payments  # the journal records no limits: they are the manifest's
    page = client.get("/queues")
    assert page.status_code == 200
    row = re.search(r'<tr data-queue="payments">(.*?)</tr>', page.text, re.S)
    assert row is not None and 'href="/queues/payments"' in row.group(1)
    assert re.findall(r"<td[^>]*>(\d+)</td>", row.group(1)) == ["1", "3", "1", "1", "0", "2"]
    assert "telo queues show MANIFEST NAME" in page.text
    assert 'id="nav-queues" ' not in page.text and 'href="/queues" id="nav-queues"' in client.get("/runs").text


def test_a_queue_page_shows_it_per_key_and_its_oldest_waiting_runs(store: SqliteStore, client: TestClient) -> None:
    queued(store)
    detail = client.get("/api/queues/payments").json()
    assert detail["keys"] == [
        {"key": "acme", "holding": 1, "running": 1, "waiting": 2, "later": 0, "parked": 0},
        {"key": "bolt", "holding": 0, "running": 0, "waiting": 1, "later": 1, "parked": 1}]
    assert [(o["position"], o["run"]) for o in detail["oldest"]] == [(1, "pay:1"), (2, "pay:2"), (3, "pay:3")]
    assert detail["oldest"][0]["dueAt"].endswith("Z")
    page = client.get("/queues/payments")
    assert page.status_code == 200
    keys = re.search(r'<table class="runs" id="queue-keys">(.*?)</table>', page.text, re.S)
    assert keys is not None and '<tr data-key="acme"><td><code>acme</code></td><td>1</td><td>2</td>' in keys.group(1)
    oldest = re.search(r'<table class="runs" id="queue-oldest">(.*?)</table>', page.text, re.S)
    assert oldest is not None
    assert re.findall(r'<tr><td>(\d+)</td><td><a class="run-link" href="([^"]+)">', oldest.group(1)) == [
        ("1", run_url("pay:1")), ("2", run_url("pay:2")), ("3", run_url("pay:3"))]
    assert "1 running under a live claim" in page.text and "3 due now, 1 due later" in page.text


def test_a_queued_runs_page_links_to_its_queue_and_says_its_position(store: SqliteStore,
                                                                       client: TestClient) -> None:
    queued(store, ODD)
    page = client.get(run_url("pay:2"))
    assert page.status_code == 200
    fact = re.search(r'<dd id="run-queue">(.*?)</dd>', page.text, re.S)
    assert fact is not None
    assert fact.group(1).startswith('<a href="/queues/pay%2Fments%20q%25">pay/ments q%</a>, key <code>acme</code>')
    assert "waiting for a slot, position 2 of 3 (1 running, 1 with its key, 1 parked)" in fact.group(1)
    assert client.get(run_url("pay:2", api=True)).json()["queue"]["position"] == 2
    assert client.get("/queues/pay%2Fments%20q%25").status_code == 200  # the odd name, one segment
    assert client.get(run_url("pay:0")).text.count('id="run-queue"') == 1  # running: its queue, no position


def test_an_unknown_queue_is_a_404(store: SqliteStore, client: TestClient) -> None:
    queued(store)
    page = client.get("/queues/paymnets")
    assert page.status_code == 404 and "ERR_QUEUE_NOT_FOUND" in page.text
    api = client.get("/api/queues/paymnets")
    assert api.status_code == 404 and api.json()["error"]["code"] == "ERR_QUEUE_NOT_FOUND"
    assert client.get("/api/queues/paymnets/events").status_code == 404


def test_a_queue_page_refreshes_itself_when_the_queue_changes(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "journal.db"))
    queued(store)
    proc, url, _ = start_ui(tmp_path / "journal.db", tmp_path)
    try:
        with urllib.request.urlopen(url + "api/queues/payments/events", timeout=10) as reply:
            events = []
            deadline = time.monotonic() + 10
            while len(events) < 2 and time.monotonic() < deadline:
                line = reply.readline().decode()
                if line.startswith("event: "):
                    events.append(line.split(": ", 1)[1].strip())
                    if len(events) == 1:  # hello: now a run joins the queue
                        store.admit(Admission.of("pay:9", status="scheduled", due_at=0, queue="payments"))
            assert events == ["hello", "change"]
        with urllib.request.urlopen(url + "queues/payments", timeout=10) as page:
            assert 'data-live="/api/queues/payments/events"' in page.read().decode()
        with urllib.request.urlopen(url + "api/queues", timeout=10) as listing:
            assert json.loads(listing.read())["queues"][0]["depth"]["dueNow"] == 4
    finally:
        stop(proc)
        store.close()
