"""``Durable.Consume`` (issue 18; telo.kinds.consume): a file, another run's stream and a table as a queue consumed
in batches, each batch pinned before its steps and its cursor journaled after them as a ``stream_cursor`` event;
with ``transaction:`` on the journal's own database, a batch's SQL effects and its cursor commit or roll back
together."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

import telo
from telo.durable import shutdown
from telo.journal import eventlog
from telo.kinds.consume_sources import StreamSource

FUNCTIONS = """\
import os
from pathlib import Path

def handle(inputs):
    with open(Path(os.environ["CONSUME_LEDGER"]), "a") as f:
        for it in inputs["items"]:
            f.write(str(it) + "\\n")
    return {"n": len(inputs["items"])}

def maybe_fail(inputs):
    flag = Path(os.environ["CONSUME_FAIL"])
    if flag.exists() and inputs["index"] == 1:
        flag.unlink()  # once: the step's retry then finds it gone
        raise RuntimeError("batch 1 fails once")
    return {}
"""

MANIFEST = """\
kind: Telo.Application
metadata: { name: Consumer }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Durable: durable, Py: python, Sql: sql, Run: run }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Sql.Connection
metadata: { name: db }
url: ./runs.db
---
kind: Py.Function
metadata: { name: handle }
function: consume_fns:handle
---
kind: Py.Function
metadata: { name: maybeFail }
function: consume_fns:maybe_fail
---
kind: Sql.Exec
metadata: { name: markDone }
connection: !ref db
sql: INSERT INTO done (id) VALUES (:id)
---
kind: Durable.Consume
metadata: { name: fromFile }
source: { file: { path: ./input.ndjson } }
batchSize: 3
steps:
  - { name: h, invoke: !ref handle, inputs: { items: !cel "batch.items" } }
---
kind: Durable.Consume
metadata: { name: fromStream }
source: { stream: { journal: !ref runs, run: !cel "inputs.producer", name: rows } }
batchSize: 2
poll: 20ms
steps:
  - { name: h, invoke: !ref handle, inputs: { items: !cel "batch.items" } }
---
kind: Durable.Consume
metadata: { name: fromTable }
source: { query: { connection: !ref db, sql: "SELECT id, body FROM outbox", key: id } }
batchSize: 4
transaction: !ref db
steps:
  - name: each
    invoke: !ref markAll
    inputs: { ids: !cel "batch.items.map(r, r.id)" }
  - { name: gate, invoke: !ref maybeFail, inputs: { index: !cel "batch.index" } }
---
kind: Run.Iteration
metadata: { name: markAll }
collection: !cel "inputs.ids"
steps:
  - { name: m, invoke: !ref markDone, inputs: { id: !cel "item" } }
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
kind: Durable.Receive
metadata: { name: go }
topic: go
---
kind: Local.Workflow
metadata: { name: producer }
journal: !ref runs
runId: !cel "'producer:' + inputs.id"
steps:
  - { name: a, invoke: !ref emit, inputs: { v: 1 } }
  - { name: b, invoke: !ref emit, inputs: { v: 2 } }
  - { name: c, invoke: !ref emit, inputs: { v: 3 } }
  - { name: wait, invoke: !ref go }
  - { name: d, invoke: !ref emit, inputs: { v: 4 } }
  - { name: e, invoke: !ref endRows }
---
kind: Local.Workflow
metadata: { name: files }
journal: !ref runs
runId: !cel "'files:' + inputs.id"
steps:
  - { name: drain, invoke: !ref fromFile }
---
kind: Local.Workflow
metadata: { name: streams }
journal: !ref runs
runId: !cel "'streams:' + inputs.id"
inputs: { producer: !cel "inputs.producer" }
steps:
  - { name: drain, invoke: !ref fromStream, inputs: { producer: !cel "inputs.producer" } }
---
kind: Local.Workflow
metadata: { name: table }
journal: !ref runs
runId: !cel "'table:' + inputs.id"
steps:
  - name: drain
    invoke: !ref fromTable
    retry: { attempts: 2, initialDelay: 1, jitter: none }
"""


def setup(tmp_path: Path, monkeypatch: Any, manifest: str = MANIFEST) -> Path:
    (tmp_path / "consume_fns.py").write_text(FUNCTIONS)
    (tmp_path / "app.yaml").write_text(manifest)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("CONSUME_LEDGER", str(tmp_path / "ledger.txt"))
    monkeypatch.setenv("CONSUME_FAIL", str(tmp_path / "fail.flag"))
    return tmp_path / "app.yaml"


def ledger(tmp_path: Path) -> list[str]:
    path = tmp_path / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_a_file_is_consumed_in_pinned_batches_with_a_cursor_after_each(tmp_path: Path, monkeypatch: Any) -> None:
    """Lines end at \\n only (a \\r — JSON whitespace — inside a line used to end it, and the consume with it), and
    the last line needs no newline (it used to be dropped while the run completed)."""
    manifest = setup(tmp_path, monkeypatch)
    lines = [json.dumps({"i": i}) for i in range(8)]
    lines[3] = '{"i":\r 3}'
    (tmp_path / "input.ndjson").write_bytes(("\n".join(lines)).encode())  # no newline after the last
    with telo.load(manifest) as app:
        done = app.run("files", {"id": "1"}, wait=10)
        journal = app.journal("files:1")
        store = app.aio._store()
        kinds = {e.path: e.kind for e in eventlog.events(store, "files:1")}
    size = (tmp_path / "input.ndjson").stat().st_size
    assert done.ok and done.step("drain") == {"batches": 3, "items": 8, "cursor": size}
    assert ledger(tmp_path) == [str({"i": i}) for i in range(8)]
    cursors = [e.value for e in journal if e.path.startswith("steps/drain/@cursor")]
    assert [c["items"] for c in cursors] == [3, 3, 2, 0] and [c["terminal"] for c in cursors] == [False] * 3 + [True]
    assert {kinds[f"steps/drain/@cursor[{k}]"] for k in range(4)} == {eventlog.EventKind.STREAM_CURSOR}


def test_a_file_whose_last_line_is_not_json_fails_the_consume_with_its_offset(
        tmp_path: Path, monkeypatch: Any) -> None:
    manifest = setup(tmp_path, monkeypatch)
    (tmp_path / "input.ndjson").write_text('{"i": 0}\n{"i": 1}\n{"partial"')
    with telo.load(manifest) as app:
        done = app.run("files", {"id": "2"}, wait=10)
    assert done.status == "failed" and done.error is not None and done.error.code == "ERR_INVALID_VALUE"
    assert "byte 18" in done.error.message, done.error.message


def test_a_file_line_nested_too_deeply_fails_the_consume_with_its_offset_not_a_recursion_error(
        tmp_path: Path, monkeypatch: Any) -> None:
    manifest = setup(tmp_path, monkeypatch)
    (tmp_path / "input.ndjson").write_text('{"i": 0}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    with telo.load(manifest) as app:
        done = app.run("files", {"id": "3"}, wait=10)
    assert done.status == "failed" and done.error is not None, done
    assert done.error.code == "ERR_TYPED_FRAME_UNENCODABLE" and "byte 9" in done.error.message, done.error


def test_another_runs_stream_is_consumed_once_each_in_order_until_its_close(tmp_path: Path, monkeypatch: Any) -> None:
    manifest = setup(tmp_path, monkeypatch)
    with telo.load(manifest) as app:
        assert app.run("producer", {"id": "p"}).status == "parked"  # wrote 1, 2, 3; waits for `go`
        consumer = app.start("streams", {"id": "1", "producer": "producer:p"})  # reads 1-3, then polls
        app.send("producer:p", "go", None)  # writes 4 and closes
        assert app.result("producer:p", wait=10).ok
        done = app.result(consumer, wait=10)
    assert done.ok and done.step("drain")["items"] == 4
    assert ledger(tmp_path) == ["1", "2", "3", "4"]


def test_a_table_consumed_in_transactions_on_the_journals_database_is_exactly_once(
        tmp_path: Path, monkeypatch: Any) -> None:
    """Batch 1's step fails once: its inserts and its cursor roll back together (batch 0 stays committed), and
    the step's retry runs batch 1 again — every row is marked once (a second mark would break `done`'s key)."""
    manifest = setup(tmp_path, monkeypatch)
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute("CREATE TABLE outbox (id INTEGER PRIMARY KEY, body TEXT)")
    db.execute("CREATE TABLE done (id INTEGER PRIMARY KEY)")
    db.executemany("INSERT INTO outbox VALUES (?, ?)", [(i, f"m{i}") for i in range(1, 11)])
    db.commit()
    (tmp_path / "fail.flag").touch()
    with telo.load(manifest) as app:
        done = app.run("table", {"id": "1"}, wait=10)
        journal = app.journal("table:1")
    marked = [r[0] for r in db.execute("SELECT id FROM done ORDER BY id")]
    assert not (tmp_path / "fail.flag").exists()  # the failure happened
    assert done.ok and done.step("drain") == {"batches": 3, "items": 10, "cursor": 10}, done
    assert marked == list(range(1, 11)) and done.collapsed_regions == 0  # journaled per step, never collapsed
    cursors = [e.path for e in journal if "@cursor" in e.path]
    assert cursors == [f"steps/drain/@cursor[{k}]" for k in range(4)]  # one per batch: the rolled-back one is gone


def test_a_query_whose_key_repeats_across_a_batch_boundary_is_refused_not_skipped(
        tmp_path: Path, monkeypatch: Any) -> None:
    """Paging by ``key > last``: rows 1-4 then a second 4, four a batch — the second 4 was silently never
    consumed (the run completed). Now the consume fails, naming the shared key, before any batch of it runs."""
    manifest = setup(tmp_path, monkeypatch)
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute("CREATE TABLE outbox (id INTEGER NOT NULL, body TEXT)")
    db.execute("CREATE TABLE done (id INTEGER)")
    db.executemany("INSERT INTO outbox VALUES (?, ?)", [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (4, "e"), (5, "f")])
    db.commit()
    with telo.load(manifest) as app:
        done = app.run("table", {"id": "dup"}, wait=10)
    marked = [r[0] for r in db.execute("SELECT id FROM done")]
    assert done.status == "failed" and done.error is not None and done.error.code == "ERR_INVALID_VALUE", done
    assert "share the key id=4" in done.error.message and marked == []


@pytest.mark.parametrize("stop", ["cancel", "drain"])
def test_a_consume_polling_an_open_stream_stops_at_a_cancel_or_a_drain(
        tmp_path: Path, monkeypatch: Any, stop: str) -> None:
    """It kept polling after the run was cancelled (issue 18 review, bug 8: 49 reads in 1-2 s) or the process
    began draining: its poll checked neither."""
    manifest = setup(tmp_path, monkeypatch)
    reads = [0]
    next_batch = StreamSource.next_batch

    async def counted(self: StreamSource, cursor: Any, limit: int) -> Any:
        reads[0] += 1
        return await next_batch(self, cursor, limit)

    monkeypatch.setattr(StreamSource, "next_batch", counted)
    try:
        with telo.load(manifest) as app:
            assert app.run("producer", {"id": "p"}).status == "parked"  # its stream stays open
            consumer = app.start("streams", {"id": "9", "producer": "producer:p"})
            deadline = time.monotonic() + 10
            while reads[0] < 5 and time.monotonic() < deadline:  # past the values there are: polling
                time.sleep(0.02)
            if stop == "cancel":
                app.cancel(consumer)
            else:
                shutdown.request(signal.SIGTERM)
            time.sleep(0.5)
            stopped_at = reads[0]
            time.sleep(0.5)  # (at a 20 ms poll, ~25 more reads if it still polls)
            status = app.status(consumer).status
            failed = [e.path for e in app.journal(consumer) if e.path.endswith("/@failed")]
    finally:
        shutdown.reset()
    assert reads[0] == stopped_at, f"{reads[0] - stopped_at} reads in the 0.5 s after the {stop}"
    assert status == ("cancelled" if stop == "cancel" else "running"), status
    assert failed == []  # a halt, not the step's failure: the run continues in its next execution
