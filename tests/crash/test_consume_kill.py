"""``Durable.Consume`` (issue 18) across SIGKILLs: a stream iteration over :data:`ROWS` rows, its ``telo worker``
killed at random points and restarted until the run completes, processes every row exactly once when its SQL
effects live in the journal's own database, and at least once with stable idempotency keys when they do not.

- :func:`test_a_table_consumed_on_the_journals_database_is_exactly_once_across_kill_9` (SQLite: journal and data
  in one file; PostgreSQL: the journal on a ``Postgres.Connection`` whose database holds the data) pages a table
  ``outbox`` by its key, ``transaction: !ref db``. Each batch's steps are one ``Sql.Exec`` inserting the batch's
  ids into ``done`` (``id`` its primary key: a row processed twice fails the run) and a Python step that logs
  ``<pid> <batch>`` to a progress file and sleeps :data:`PAUSE_S` — INSIDE the batch's transaction, after the
  inserts, so most kills land on a batch whose rows are written but not committed. The test checks, right after
  each kill, whether the batch the victim was in was rolled back (no row of it in ``done``) and requires some
  kills to have done so. Then: the run completed with every row, ``done`` holds each id once, in the batch its
  key puts it in, and the journal's ``@batch``/``@cursor`` decisions follow one another without gap or overlap.
- :func:`test_a_file_consumed_with_effects_outside_the_journal_is_at_least_once_with_stable_keys` consumes an
  ndjson file of :data:`ROWS` lines; its step is a ``keyConsuming`` Python effect that appends ``<idempotency
  key> <line id> <pid>`` per line to a ledger (one fsynced write per batch), then sleeps — a window between the
  effect and its receipt. Then: every id is in the ledger, each repeat of an id carries the key of its first
  occurrence, a key covers exactly one batch's ids, the run completed with every line, and some kills did make a
  batch run again (so the key check is not vacuous).

The kill schedule is random: its seed is in every failure message, and ``TELO_CRASH_SEED=<n>`` replays it.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from telo.journal import eventlog
from telo.journal.model import Admission
from telo.journal.store import Store
from tests.crash.support import StoreSpec, make_spec
from tests.crash.workflows.harness import Flow, Proc

ROWS = 10_000
BATCH = 200
BATCHES = ROWS // BATCH
KILLS = 8  # SIGKILLs of a worker at work, each followed by a fresh worker...
MIN_KILLS = 6  # ...at least this many before the run completes (a random schedule may end early)
PAUSE_S = 0.04  # the table test's Python step, inside the batch's transaction after its inserts
EFFECT_SLEEP_S = 0.04  # the file test's effect, after its ledger write: before its receipt
KILL_AFTER_S = (0.0, 0.3)  # a kill this long after the worker's first progress line...
BLIND_KILL_P = 0.2  # ...or, this often, this long after the worker started, progress or not
BLIND_KILL_S = (0.1, 1.0)
MIN_ROLLED_BACK = 2  # table test: kills that caught a batch's inserts uncommitted, at least
FINISH_DEADLINE_S = 30.0
PROGRESS_DEADLINE_S = 15.0
RUN = "consume-1"
MODULE = "consume_kill_fns"

FUNCTIONS = f"""\
# Written by tests/crash/test_consume_kill.py for its telo workers.
import os
import time


def _append(path, text, sync):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, text.encode())
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def pause(inputs):
    # The table test: runs inside the batch's transaction, after its inserts.
    _append(os.environ["CONSUME_PROGRESS"], f"{{os.getpid()}} {{inputs['k']}}\\n", False)
    time.sleep({PAUSE_S})
    return {{}}


def append(inputs, ctx):
    # The file test: the effect outside the journal, one fsynced ledger line per item, keyed.
    key = ctx.idempotency_key
    if not key:
        raise RuntimeError("the effect ran without an idempotency key")
    pid = os.getpid()
    _append(os.environ["CONSUME_LEDGER"], "".join(f"{{key}} {{i}} {{pid}}\\n" for i in inputs["ids"]), True)
    _append(os.environ["CONSUME_PROGRESS"], f"{{pid}} {{inputs['k']}}\\n", False)
    time.sleep({EFFECT_SLEEP_S})
    return {{"n": len(inputs["ids"])}}
"""

HEAD = """\
# Written by tests/crash/test_consume_kill.py.
kind: Telo.Application
metadata: { name: ConsumeKill, version: 1.0.0 }
imports: { Py: python, Durable: durable, Local: durable-local, Journal: %(journal_module)s, Sql: sql%(more)s }
---
%(db)s---
kind: Journal.Journal
metadata: { name: runs }
%(journal)s---
kind: Local.Workflow
metadata: { name: drain }
journal: !ref runs
runId: !cel "inputs.id"
steps:
  - { name: drain, invoke: !ref consume }
---
"""

TABLE = """\
kind: Sql.Exec
metadata: { name: markBatch }
connection: !ref db
sql: %(insert)s
---
kind: Py.Function
metadata: { name: pause }
function: %(module)s:pause
idempotent: true
---
kind: Durable.Consume
metadata: { name: consume }
source: { query: { connection: !ref db, sql: "SELECT id, body FROM %(outbox)s", key: id } }
batchSize: %(batch)d
transaction: !ref db
steps:
  - name: mark
    invoke: !ref markBatch
    inputs: { ids: !cel "json(batch.items.map(r, r.id))", k: !cel "batch.index" }
  - { name: pause, invoke: !ref pause, inputs: { k: !cel "batch.index" } }
"""

FILE = """\
kind: Py.Function
metadata: { name: append }
function: %(module)s:append
keyConsuming: true  # a batch interrupted after its effect runs it again, with the same key
---
kind: Durable.Consume
metadata: { name: consume }
source: { file: { path: %(input)s } }
batchSize: %(batch)d
steps:
  - { name: h, invoke: !ref append, inputs: { ids: !cel "batch.items.map(r, r.id)", k: !cel "batch.index" } }
"""


# --- driving the workers -------------------------------------------------------------------------------------


@dataclass
class Kill:
    pid: int
    mode: str  # "aimed" (after the worker's first progress line) or "blind" (after its start)
    batch: int | None  # the last batch the victim reported progress in
    note: str = ""


@dataclass
class Driver:
    """One worker at a time over one run; each is SIGKILLed at a random point, then replaced."""

    flow: Flow
    store: Store
    progress: Path
    rng: random.Random
    ctx: str
    kills: list[Kill] = field(default_factory=list)
    _offset: int = 0
    _last: dict[int, int] = field(default_factory=dict)  # pid -> the last batch it reported

    def _read_progress(self) -> None:
        if not self.progress.exists():
            return
        with self.progress.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for raw in data[:end].decode().splitlines():
            pid, k = raw.split()
            self._last[int(pid)] = int(k)

    def completed(self) -> bool:
        record = self.store.read_run(RUN)
        assert record is not None, f"{self.ctx}: run {RUN} is missing"
        assert record.status in ("running", "completed"), f"{self.ctx}: the run is {record.status}: {record!r}"
        return record.status == "completed"

    def start(self) -> Proc:
        return self.flow.start(*self.flow.worker_args("50ms", until_idle=False), label=f"worker-{len(self.kills)}")

    def _alive(self, proc: Proc) -> None:
        code = proc.poll()
        assert code is None, f"{self.ctx}: {proc.label} (pid {proc.pid}) exited {code}:\n{proc.output()}"

    def run(self, after_kill: Callable[[Kill], None]) -> float:
        """Kill :data:`KILLS` workers at random points (or fewer, if the run completes first), then let the last
        one finish the run; ``after_kill`` inspects each victim's state before its replacement starts. Returns
        the seconds the kills took."""
        began = time.monotonic()
        proc = self.start()
        while len(self.kills) < KILLS and not self.completed():
            blind = self.rng.random() < BLIND_KILL_P
            if blind:
                at = time.monotonic() + self.rng.uniform(*BLIND_KILL_S)
            else:
                until = time.monotonic() + PROGRESS_DEADLINE_S
                while True:
                    self._alive(proc)
                    self._read_progress()
                    if proc.pid in self._last or self.completed():
                        break
                    assert time.monotonic() < until, (
                        f"{self.ctx}: {proc.label} made no progress in {PROGRESS_DEADLINE_S} s:\n{proc.output()}")
                    time.sleep(0.005)
                at = time.monotonic() + self.rng.uniform(*KILL_AFTER_S)
            while time.monotonic() < at:
                self._alive(proc)
                time.sleep(0.002)
            if not proc.sigkill():
                break
            self._read_progress()
            kill = Kill(proc.pid, "blind" if blind else "aimed", self._last.get(proc.pid))
            after_kill(kill)
            self.kills.append(kill)
            proc = self.start()
        kill_phase = time.monotonic() - began
        deadline = time.monotonic() + FINISH_DEADLINE_S
        while not self.completed():
            self._alive(proc)
            assert time.monotonic() < deadline, f"{self.ctx}: the run did not complete:\n{proc.output()}"
            time.sleep(0.02)
        return kill_phase


def _setup(spec: StoreSpec, tmp_path: Path, manifest: str) -> tuple[Flow, Path]:
    (tmp_path / f"{MODULE}.py").write_text(FUNCTIONS)
    flow = Flow(spec, tmp_path)
    flow.manifest = tmp_path / "consume.yaml"
    flow.manifest.write_text(manifest)
    progress = tmp_path / "progress.txt"
    flow.env.update({"CONSUME_PROGRESS": str(progress), "CONSUME_LEDGER": str(flow.ledger)})
    return flow, progress


def _cursors(store: Store, start: Any, ctx: str) -> list[tuple[Any, Any, int]]:
    """The journal's batches in order, ``(from, to, count)`` each, checked against its cursors: batch 0 starts
    at ``start``, batch ``k`` where batch ``k-1``'s cursor ended, its cursor ends where the batch did; a last,
    empty batch with a terminal cursor ends the loop. No decision beyond it."""
    entries = eventlog.recover(store, RUN).entries
    decided = {p for p in entries if p.startswith("steps/drain/@")}
    out: list[tuple[Any, Any, int]] = []
    before: Any = start
    for k in range(len(decided)):
        batch = entries.get(f"steps/drain/@batch[{k}]")
        cursor = entries.get(f"steps/drain/@cursor[{k}]")
        assert batch is not None and cursor is not None, f"{ctx}: batch {k} or its cursor is missing: {sorted(decided)}"
        b, c = batch.decode(RUN), cursor.decode(RUN)
        assert b["from"] == before, f"{ctx}: batch {k} {b} does not start at cursor {before}"
        assert c["cursor"] == b["to"] and c["items"] == b["count"], f"{ctx}: batch {k} {b} has cursor {c}"
        out.append((b["from"], b["to"], b["count"]))
        before = c["cursor"]
        if c["terminal"]:
            assert b["count"] == 0 and len(decided) == 2 * (k + 1), f"{ctx}: terminal cursor {k} {c}: {sorted(decided)}"
            return out
    raise AssertionError(f"{ctx}: no terminal cursor: {sorted(decided)}")


# --- exactly once: the table in the journal's database -------------------------------------------------------


class Table:
    """The ``outbox`` and ``done`` tables, in the journal's SQLite file or PostgreSQL database."""

    def __init__(self, spec: StoreSpec) -> None:
        self.kind = spec.kind
        prefix = f"{spec.table}_" if spec.table else ""
        self.outbox, self.done = f"{prefix}outbox", f"{prefix}done"
        self.conn: Any
        if spec.kind == "sqlite":
            self.conn = sqlite3.connect(spec.location, timeout=30)
        else:
            import psycopg

            self.conn = psycopg.connect(spec.location, autocommit=True)
        self.execute(f"CREATE TABLE {self.outbox} (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        self.execute(f"CREATE TABLE {self.done} (id INTEGER PRIMARY KEY, batch INTEGER NOT NULL)")
        if spec.kind == "sqlite":
            self.conn.executemany(f"INSERT INTO {self.outbox} VALUES (?, ?)",
                                  [(i, f"message {i}") for i in range(1, ROWS + 1)])
            self.conn.commit()
        else:
            self.execute(f"INSERT INTO {self.outbox} SELECT i, 'message ' || i FROM generate_series(1, {ROWS}) i")

    def execute(self, sql: str) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(sql)
        rows = list(cur.fetchall()) if cur.description else []
        if self.kind == "sqlite":
            self.conn.commit()  # ends the read: the worker's writes stay visible to the next one
        return rows

    def insert_sql(self) -> str:
        if self.kind == "sqlite":
            return f"INSERT INTO {self.done} (id, batch) SELECT value, :k FROM json_each(:ids)"
        return (f"INSERT INTO {self.done} (id, batch) SELECT x::integer, %(k)s "
                f"FROM jsonb_array_elements_text(%(ids)s::jsonb) AS t(x)")

    def close(self) -> None:
        if self.kind == "postgres":
            self.execute(f"DROP TABLE IF EXISTS {self.outbox}, {self.done}")
        self.conn.close()


def _table_manifest(spec: StoreSpec, table: Table) -> str:
    if spec.kind == "sqlite":
        head = {"journal_module": "durable-journal-sqlite", "more": "",
                "db": f"kind: Sql.Connection\nmetadata: {{ name: db }}\nurl: {json.dumps(spec.location)}\n",
                "journal": f"path: {json.dumps(spec.location)}\n"}
    else:
        head = {"journal_module": "durable-journal-postgres", "more": ", Postgres: postgres",
                "db": ("kind: Postgres.Connection\nmetadata: { name: db }\n"
                       f"connectionString: {json.dumps(spec.location)}\n"
                       "pool: { min: 1, max: 3, idleTimeoutMs: 5000, connectionTimeoutMs: 10000 }\n"),
                "journal": f"connection: !ref db\ntable: {spec.table}\n"}
    return HEAD % head + TABLE % {"insert": json.dumps(table.insert_sql()), "module": MODULE, "outbox": table.outbox,
                                  "batch": BATCH}


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_table_consumed_on_the_journals_database_is_exactly_once_across_kill_9(kind: str, tmp_path: Path) -> None:
    seed = int(os.environ.get("TELO_CRASH_SEED") or random.randrange(2**32))
    ctx = f"[{kind} seed={seed}]"
    began = time.monotonic()
    spec = make_spec(kind, tmp_path)
    store = spec.open()  # creates the journal's tables (PostgreSQL) before the data's
    table = Table(spec)
    flow, progress = _setup(spec, tmp_path, _table_manifest(spec, table))
    driver = Driver(flow, store, progress, random.Random(seed), ctx)
    rolled_back = 0

    def after_kill(kill: Kill) -> None:
        """Was the victim's batch, whose inserts it had run (it reported progress after them), left
        uncommitted? Then none of its rows may be in ``done``."""
        nonlocal rolled_back
        if kill.batch is None:
            return
        n = table.execute(f"SELECT COUNT(*) FROM {table.done} WHERE batch = {kill.batch}")[0][0]
        assert n in (0, BATCH), f"{ctx}: batch {kill.batch} is in `done` with {n} rows: a partial commit"
        if n == 0:
            kill.note = "rolled back"
            rolled_back += 1

    try:
        assert store.admit(Admission.of(RUN, workflow="drain", inputs={"id": RUN})).admitted
        kill_phase = driver.run(after_kill)
        record = store.read_run(RUN)
        assert record is not None and record.status == "completed", f"{ctx}: {record!r}"
        result = record.decoded_result()["steps"]["drain"]["result"]
        assert result == {"batches": BATCHES, "items": ROWS, "cursor": ROWS}, f"{ctx}: {result}"
        count, distinct, low, high = table.execute(
            f"SELECT COUNT(*), COUNT(DISTINCT id), MIN(id), MAX(id) FROM {table.done}")[0]
        assert (count, distinct, low, high) == (ROWS, ROWS, 1, ROWS), f"{ctx}: `done` {count, distinct, low, high}"
        missing = table.execute(f"SELECT COUNT(*) FROM {table.outbox} o WHERE NOT EXISTS "
                                f"(SELECT 1 FROM {table.done} d WHERE d.id = o.id)")[0][0]
        assert missing == 0, f"{ctx}: {missing} rows of the outbox are not in `done`"
        misplaced = table.execute(f"SELECT id, batch FROM {table.done} WHERE batch != (id - 1) / {BATCH} "
                                  "ORDER BY id LIMIT 5")
        assert not misplaced, f"{ctx}: rows processed in another batch than their key's: {misplaced}"
        batches = _cursors(store, None, ctx)
        assert batches == [(None if k == 0 else k * BATCH, (k + 1) * BATCH, BATCH) for k in range(BATCHES)] + [
            (ROWS, ROWS, 0)], f"{ctx}: {batches}"
        assert len(driver.kills) >= MIN_KILLS, f"{ctx}: the run completed after {len(driver.kills)} kills"
        assert rolled_back >= MIN_ROLLED_BACK, (
            f"{ctx}: only {rolled_back} kills caught a batch uncommitted (want {MIN_ROLLED_BACK}): {driver.kills}")
        print(f"\n{ctx}: {ROWS} rows in {BATCHES} batches; {len(driver.kills)} kills in {kill_phase:.1f} s "
              f"({rolled_back} rolled back a batch: {[(k.mode, k.batch, k.note) for k in driver.kills]}); "
              f"every row exactly once after {time.monotonic() - began:.1f} s")
    finally:
        flow.close()
        table.close()
        store.close()


# --- at least once, stable keys: a file, effects outside the journal -----------------------------------------


def test_a_file_consumed_with_effects_outside_the_journal_is_at_least_once_with_stable_keys(tmp_path: Path) -> None:
    seed = int(os.environ.get("TELO_CRASH_SEED") or random.randrange(2**32))
    ctx = f"[file seed={seed}]"
    began = time.monotonic()
    source = tmp_path / "input.ndjson"
    source.write_text("".join(json.dumps({"id": i, "body": f"line {i}"}) + "\n" for i in range(ROWS)))
    spec = make_spec("sqlite", tmp_path)
    head = {"journal_module": "durable-journal-sqlite", "more": "", "db": "",
            "journal": f"path: {json.dumps(spec.location)}\n"}
    flow, progress = _setup(spec, tmp_path, (HEAD % head).replace("---\n---\n", "---\n", 1)
                            + FILE % {"module": MODULE, "input": json.dumps(str(source)), "batch": BATCH})
    store = spec.open()
    driver = Driver(flow, store, progress, random.Random(seed), ctx)
    try:
        assert store.admit(Admission.of(RUN, workflow="drain", inputs={"id": RUN})).admitted
        kill_phase = driver.run(lambda kill: None)
        record = store.read_run(RUN)
        assert record is not None and record.status == "completed", f"{ctx}: {record!r}"
        result = record.decoded_result()["steps"]["drain"]["result"]
        size = source.stat().st_size
        assert result == {"batches": BATCHES, "items": ROWS, "cursor": size}, f"{ctx}: {result}"
        keys: dict[int, str] = {}  # id -> the key of its first occurrence
        ids_of: dict[str, set[int]] = defaultdict(set)
        seen: dict[int, int] = defaultdict(int)
        for n, raw in enumerate(flow.ledger.read_text().splitlines()):
            key, line_id, _ = raw.split(" ")
            i = int(line_id)
            first = keys.setdefault(i, key)
            assert key == first, f"{ctx}: ledger line {n}: id {i} again with key {key!r}, first with {first!r}"
            ids_of[key].add(i)
            seen[i] += 1
        assert set(keys) == set(range(ROWS)), f"{ctx}: ids never processed: {sorted(set(range(ROWS)) - set(keys))[:10]}"
        assert all(key.startswith(f"{RUN}/steps/drain") for key in ids_of), f"{ctx}: {sorted(ids_of)[:5]}"
        blocks = sorted((min(ids), max(ids), len(ids)) for ids in ids_of.values())
        assert blocks == [(k * BATCH, (k + 1) * BATCH - 1, BATCH) for k in range(BATCHES)], (
            f"{ctx}: a key does not cover exactly one batch's ids: {blocks[:5]}…")
        batches = _cursors(store, 0, ctx)
        assert [count for _, _, count in batches] == [BATCH] * BATCHES + [0] and batches[-1][1] == size, (
            f"{ctx}: {batches}")
        again = sum(1 for c in seen.values() if c > 1)
        assert len(driver.kills) >= MIN_KILLS, f"{ctx}: the run completed after {len(driver.kills)} kills"
        assert again >= BATCH, f"{ctx}: no batch ran twice across {len(driver.kills)} kills: the key check is vacuous"
        print(f"\n{ctx}: {ROWS} lines in {BATCHES} batches; {len(driver.kills)} kills in {kill_phase:.1f} s "
              f"({[(k.mode, k.batch) for k in driver.kills]}); {again} ids processed more than once "
              f"({sum(seen.values())} ledger lines), each with its first key; done after "
              f"{time.monotonic() - began:.1f} s")
    finally:
        flow.close()
        store.close()
