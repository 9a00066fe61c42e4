"""SQLite journal specifics: pragmas, schema, group commit, cross-instance and cross-process behaviour,
transactions, legacy rows. The shared semantics are in tests/stores (conformance suite)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from telo.clock import FakeClock
from telo.errors import JournalError, TeloError
from telo.journal.claims import Holder, this_host
from telo.journal.integrity import checksum
from telo.journal.model import Admission, Entry, Outcome, Parked
from telo.journal.queues import QueueLimits
from telo.journal.sqlite import SqliteStore
from telo.journal.sqlite_append import AppendOp
from telo.journal.sqlite_schema import RUN_COLUMNS, SCHEMA_VERSION
from telo.values.equality import equal
from tests.unit.journal.batches import Gate

TARGET = {"kind": "Python.Function", "name": "charge", "module": "file:///app/orders.yaml"}
PROCS = {"cwd": str(Path(__file__).resolve().parents[3])}


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "journal.db")


@pytest.fixture
def store(path: str) -> Iterator[SqliteStore]:
    with SqliteStore(path) as s:
        yield s


def _admit(store: SqliteStore, run: str = "r1") -> None:
    assert store.admit(Admission.of(run)).admitted


# --- connections and schema -------------------------------------------------------------------------------


def test_wal_and_synchronous_full_by_default(store: SqliteStore) -> None:
    writer = store._writer.call(lambda c: (c.execute("PRAGMA journal_mode").fetchone()[0],
                                           c.execute("PRAGMA synchronous").fetchone()[0],
                                           c.execute("PRAGMA busy_timeout").fetchone()[0]))
    assert writer == ("wal", 2, 30000)  # synchronous 2 = FULL
    with store.transaction() as tx:
        assert tx.connection.execute("PRAGMA synchronous").fetchone()[0] == 2


@pytest.mark.parametrize(("mode", "number"), [("NORMAL", 1), ("full", 2), ("EXTRA", 3)])
def test_synchronous_is_configurable(path: str, mode: str, number: int) -> None:
    with SqliteStore(path, synchronous=mode, busy_timeout_ms=1234) as s:
        got = s._writer.call(lambda c: (c.execute("PRAGMA synchronous").fetchone()[0],
                                        c.execute("PRAGMA busy_timeout").fetchone()[0]))
        assert got == (number, 1234)


@pytest.mark.parametrize("kwargs", [{"synchronous": "OFF"}, {"table": "bad-name"}, {"table": "1x"},
                                    {"table": "x; DROP TABLE y"}])
def test_bad_options_are_refused(path: str, kwargs: dict[str, str]) -> None:
    with pytest.raises(JournalError) as exc:
        SqliteStore(path, **kwargs)  # type: ignore[arg-type]
    assert exc.value.code == "ERR_JOURNAL_CONFIG_INVALID" and exc.value.hint


def test_in_memory_database_is_refused() -> None:
    with pytest.raises(JournalError):
        SqliteStore(":memory:")


def test_schema_mirrors_the_postgres_tables(store: SqliteStore, path: str) -> None:
    conn = sqlite3.connect(path)
    runs = [r[1] for r in conn.execute("PRAGMA table_info(telo_durable_runs)")]
    entries = [(r[1], r[5]) for r in conn.execute("PRAGMA table_info(telo_durable_entries)")]
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")}
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    assert runs == [c for c, _ in RUN_COLUMNS]
    assert runs[:16] == ["run", "status", "due_at", "parked_path", "parked_resource", "parked_token", "inputs",
                         "result", "error", "collapsed_regions", "collapse_reasons", "replayed_steps",
                         "inputs_codec_version", "result_codec_version", "claim_holder", "claim_until"]
    # (name, position in the primary key)
    assert entries == [("run", 1), ("path", 2), ("seq", 0), ("entry_kind", 0), ("decision", 0), ("target", 0),
                       ("value", 0), ("codec_version", 0), ("checksum", 0), ("written_at", 0)]
    assert indexes == {"telo_durable_runs_entries_seq_idx", "telo_durable_runs_parked_token_idx",
                       "telo_durable_runs_due_idx", "telo_durable_runs_created_idx", "telo_durable_runs_queue_idx",
                       "telo_durable_runs_started_idx", "telo_durable_runs_dedup_idx", "telo_durable_runs_debounce_idx"}
    assert version == SCHEMA_VERSION


def test_two_prefixes_share_a_file(path: str) -> None:
    with SqliteStore(path, table="a") as a, SqliteStore(path, table="b") as b:
        _admit(a, "r")
        assert b.read_run("r") is None
        _admit(b, "r")
        a.append("r", Entry.decided("inputs", "inputs", 1))
        assert b.read_entries("r") == []


def test_a_journal_from_a_newer_telo_is_refused(path: str) -> None:
    SqliteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(JournalError) as exc:
        SqliteStore(path)
    assert exc.value.code == "ERR_JOURNAL_SCHEMA_NEWER"


def test_a_version_3_journal_gains_entry_times_and_keeps_its_rows(path: str) -> None:
    """Schema version 4 added the entries' ``written_at`` (Entry.at): a file of version 3 — its entries with
    checksums but no times — upgrades in place the first time this telo opens it; its rows read ``at=None``
    and still verify (the checksum never covered the time)."""
    old = Entry.step("steps/old", TARGET, {"n": 1})
    with SqliteStore(path) as store:
        _admit(store)
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE telo_durable_entries DROP COLUMN written_at")  # the version 3 table
    conn.execute("INSERT INTO telo_durable_entries (run, path, seq, entry_kind, decision, target, value, "
                 "codec_version, checksum) VALUES ('r1', 'steps/old', 1, 'step', NULL, ?, ?, 2, ?)",
                 (json.dumps(TARGET), old.value, checksum(old)))
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    with SqliteStore(path, clock=FakeClock(5_000)) as store:
        new = store.append("r1", Entry.decided("steps/new", "value", 2))
        assert [(e.path, e.at) for e in store.read_entries("r1")] == [("steps/old", None), ("steps/new", 5_000)]
        assert new.at == 5_000
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT path, written_at FROM telo_durable_entries ORDER BY seq").fetchall() == [
        ("steps/old", None), ("steps/new", 5_000)]
    conn.close()


def test_a_version_4_journal_gains_queue_columns_and_keeps_its_runs(path: str) -> None:
    """Schema version 5 added the runs' ``queue`` and ``queue_key`` and their index (issue 16): a file of
    version 4 upgrades in place the first time this telo opens it; its runs read as of no queue, and a queued
    admission then records both."""
    with SqliteStore(path) as store:
        _admit(store, "old")
    conn = sqlite3.connect(path)
    _to_version_5(conn)
    conn.execute("DROP INDEX telo_durable_runs_queue_idx")
    conn.execute("ALTER TABLE telo_durable_runs DROP COLUMN queue_key")
    conn.execute("ALTER TABLE telo_durable_runs DROP COLUMN queue")  # the version 4 table
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()
    with SqliteStore(path) as store:
        old = store.read_run("old")
        assert old is not None and (old.queue, old.queue_key) == (None, None)
        assert store.admit(Admission.of("new", status="scheduled", due_at=0, queue="q", queue_key="k")).admitted
        new = store.read_run("new")
        assert new is not None and (new.queue, new.queue_key) == ("q", "k")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'telo_durable_runs_queue_idx'").fetchone()[0]
    conn.close()


def _to_version_6(conn: sqlite3.Connection) -> None:
    """A journal's tables as schema version 6 left them: no ``dedup_key``, ``debounce_key``, their indexes, or the
    ``queues`` table."""
    conn.execute("DROP INDEX telo_durable_runs_dedup_idx")
    conn.execute("DROP INDEX telo_durable_runs_debounce_idx")
    conn.execute("ALTER TABLE telo_durable_runs DROP COLUMN debounce_key")
    conn.execute("ALTER TABLE telo_durable_runs DROP COLUMN dedup_key")
    conn.execute("DROP TABLE IF EXISTS telo_durable_queues")
    conn.execute("PRAGMA user_version = 6")


def _to_version_5(conn: sqlite3.Connection) -> None:
    """A journal's tables as schema version 5 left them: no ``priority``, ``started_at`` or their index."""
    _to_version_6(conn)
    conn.execute("DROP INDEX telo_durable_runs_started_idx")
    conn.execute("ALTER TABLE telo_durable_runs DROP COLUMN started_at")
    conn.execute("ALTER TABLE telo_durable_runs DROP COLUMN priority")
    conn.execute("PRAGMA user_version = 5")


def test_a_version_5_journal_gains_priority_and_starts_and_keeps_its_runs(path: str) -> None:
    """Schema version 6 added the runs' ``priority`` and ``started_at`` and the index of a rate window's starts
    (issue 16, proposal step 3): a file of version 5 upgrades in place the first time this telo opens it; its
    queued runs keep their queue and key, read priority None (0) and never started, and are granted — their first
    grant recording the start."""
    with SqliteStore(path) as store:
        assert store.admit(Admission.of("old", status="scheduled", due_at=0, queue="q", queue_key="k")).admitted
    conn = sqlite3.connect(path)
    _to_version_5(conn)
    conn.commit()
    conn.close()
    with SqliteStore(path) as store:
        old = store.read_run("old")
        assert old is not None and (old.queue, old.queue_key, old.priority, old.started_at) == ("q", "k", None, None)
        worker = Holder("w", "host-w", 1, 1).to_text()
        granted = store.claim_due(worker, 1_000, 5_000, 5, queues={"q": QueueLimits(rate_limit=1,
                                                                                    rate_period_ms=60_000)})
        assert [(r.run, r.started_at) for r in granted] == [("old", 5_000)]
        assert store.admit(Admission.of("new", status="scheduled", due_at=0, queue="q", priority=-3)).admitted
        new = store.read_run("new")
        assert new is not None and new.priority == -3
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'telo_durable_runs_started_idx'").fetchone()[0]
    plan = " ".join(str(r) for r in conn.execute("EXPLAIN QUERY PLAN SELECT count(*) FROM telo_durable_runs "
                                                 "WHERE queue = 'q' AND started_at > 0"))
    assert "telo_durable_runs_started_idx" in plan, plan  # a rate window is counted on its index
    conn.close()


def test_a_version_6_journal_gains_dedup_and_debounce_keys_and_keeps_its_runs(path: str) -> None:
    """Schema version 7 added the runs' ``dedup_key`` and ``debounce_key`` and their unique partial indexes
    (issue 16 step 4, telo.journal.keyed): a file of version 6 upgrades in place the first time this telo opens it;
    its runs read with no key, and keyed admissions then dedupe on the new index."""
    with SqliteStore(path) as store:
        assert store.admit(Admission.of("old", status="scheduled", due_at=0, queue="q", queue_key="k")).admitted
    conn = sqlite3.connect(path)
    _to_version_6(conn)
    conn.commit()
    conn.close()
    with SqliteStore(path) as store:
        old = store.read_run("old")
        assert old is not None and (old.queue_key, old.dedup_key, old.debounce_key) == ("k", None, None)
        first = store.admit(Admission.of("a", status="scheduled", due_at=0, queue="q", dedup_key="order-1"))
        second = store.admit(Admission.of("b", status="scheduled", due_at=0, queue="q", dedup_key="order-1"))
        assert first.admitted and not second.admitted and second.record.run == "a"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7
    with pytest.raises(sqlite3.IntegrityError):  # the index itself refuses a second live run of the key
        conn.execute("INSERT INTO telo_durable_runs (run, status, queue, dedup_key) VALUES ('c', 'running', 'q', "
                     "'order-1')")
    conn.execute("INSERT INTO telo_durable_runs (run, status, queue, dedup_key) VALUES ('d', 'completed', 'q', "
                 "'order-1')")  # (a settled run holds no key)
    conn.close()


def test_a_version_6_journal_gains_the_queue_override_table(path: str) -> None:
    """Schema version 7 added the table ``<prefix>_queues`` of the limits ``telo queues set`` overrides (issue
    16): a file of version 6 gains it, empty, the first time this telo opens it, keeping its runs; overrides are
    then written and read there."""
    from telo.journal.queue_overrides import QueueOverride

    with SqliteStore(path) as store:
        _admit(store, "old")
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE telo_durable_queues")
    conn.execute("PRAGMA user_version = 6")
    conn.commit()
    conn.close()
    with SqliteStore(path) as store:
        assert store.read_run("old") is not None and dict(store.queue_overrides()) == {}
        store.set_queue_override(QueueOverride("q", concurrency=3, set_by="alice", set_at=1))
    with SqliteStore(path) as store:
        assert store.queue_overrides()["q"].concurrency == 3
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7
    assert [r[1] for r in conn.execute("PRAGMA table_info(telo_durable_queues)")] == [
        "queue", "concurrency", "worker_concurrency", "key_limit", "rate_limit", "rate_period_ms", "set_by", "set_at"]
    conn.close()


def test_processes_creating_one_fresh_file_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "fresh.db")
    code = textwrap.dedent(f"""
        from telo.journal.sqlite import SqliteStore
        from telo.journal.model import Admission, Entry
        import sys
        with SqliteStore({path!r}) as s:
            s.admit(Admission.of("r"))
            s.append("r", Entry.decided("p" + sys.argv[1], "value", 1))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)], **PROCS) for i in range(6)]  # type: ignore[call-overload]
    assert [p.wait(60) for p in procs] == [0] * 6
    with SqliteStore(path) as s:
        assert sorted(e.path for e in s.read_entries("r")) == [f"p{i}" for i in range(6)]


# --- group commit -----------------------------------------------------------------------------------------


def test_concurrent_appends_share_commits(store: SqliteStore) -> None:
    threads, per_thread = 100, 10
    for t in range(threads):
        _admit(store, f"run-{t}")
    before = store.stats.commits
    gate = threading.Barrier(threads)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            gate.wait()
            for i in range(per_thread):
                e = store.append(f"run-{t}", Entry.step(f"steps/s{i}", TARGET, {"t": t, "i": i}))
                assert e.seq is not None
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert not errors
    commits = store.stats.commits - before
    total = threads * per_thread
    assert commits < total / 4, (commits, total)  # far fewer fsyncs than appends
    assert store.stats.max_batch >= 10
    for t in range(threads):
        entries = store.read_entries(f"run-{t}")
        assert [e.path for e in entries] == [f"steps/s{i}" for i in range(per_thread)]
        seqs = [e.seq or 0 for e in entries]
        assert seqs == sorted(seqs) and len(set(seqs)) == per_thread


def test_a_lone_writer_commits_on_its_own_thread(store: SqliteStore) -> None:
    _admit(store)
    before = store.stats.inline_commits
    for i in range(5):
        store.append("r1", Entry.decided(f"p{i}", "value", i))
    assert store.stats.inline_commits - before == 5


def test_same_path_twice_in_one_batch_converges(store: SqliteStore) -> None:
    _admit(store)
    gate = Gate(store)
    first = store.submit_append("r1", Entry.step("steps/charge", TARGET, {"charged": 1}))
    second = store.submit_append("r1", Entry.step("steps/charge", TARGET, {"charged": 2}))
    commits = store.stats.commits
    gate.open()
    a, b = first.result(10), second.result(10)
    assert store.stats.commits == commits + 1 + 1  # the gate's batch, then both appends in one
    assert a == b and equal(b.decode("r1"), {"charged": 1})
    assert store.read_entries("r1") == [a]


def test_a_failing_op_does_not_fail_its_batch(store: SqliteStore) -> None:
    _admit(store)
    runs = store._sql.runs

    def half_done(conn: sqlite3.Connection) -> None:
        conn.execute(f"UPDATE {runs} SET workflow = 'half' WHERE run = 'r1'")
        raise RuntimeError("boom after a write")

    gate = Gate(store)
    ok1 = store.submit_append("r1", Entry.decided("a", "value", 1))
    ghost = store.submit_append("ghost", Entry.decided("a", "value", 1))
    broken = store._writer.submit(half_done)
    ok2 = store.submit_append("r1", Entry.decided("b", "value", 2))
    gate.open()
    assert ok1.result(10).path == "a" and ok2.result(10).path == "b"
    with pytest.raises(TeloError) as exc:
        ghost.result(10)
    assert exc.value.code == "ERR_DURABLE_RUN_NOT_FOUND"
    with pytest.raises(RuntimeError):
        broken.result(10)
    assert [e.path for e in store.read_entries("r1")] == ["a", "b"]
    rec = store.read_run("r1")
    assert rec is not None and rec.workflow is None  # the failed op's own write was undone


def test_a_batch_that_cannot_commit_fails_every_op_and_the_store_recovers(path: str) -> None:
    with SqliteStore(path, busy_timeout_ms=100) as store:
        _admit(store)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holding the write lock past the busy timeout
        try:
            with pytest.raises(JournalError) as exc:
                store.append("r1", Entry.decided("a", "value", 1))
            assert exc.value.code == "ERR_JOURNAL_WRITE_FAILED"
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert store.append("r1", Entry.decided("a", "value", 2)).path == "a"
        assert store.stats.failed_batches == 1


def test_submit_append_from_asyncio(store: SqliteStore) -> None:
    _admit(store)

    async def main() -> list[Entry]:
        futures = [asyncio.wrap_future(store.submit_append("r1", Entry.decided(f"p{i}", "value", i)))
                   for i in range(50)]
        return await asyncio.gather(*futures)

    stored = asyncio.run(main())
    assert [e.path for e in stored] == [f"p{i}" for i in range(50)]
    assert [e.seq for e in stored] == sorted(e.seq or 0 for e in stored)  # queued appends keep their order
    assert store.read_entries("r1") == stored


# --- durability across instances and processes --------------------------------------------------------------


def test_an_acknowledged_append_is_visible_to_a_fresh_instance(store: SqliteStore, path: str) -> None:
    _admit(store)
    e = store.append("r1", Entry.step("steps/a", TARGET, {"ok": True}))
    with SqliteStore(path) as fresh:  # while the first one is still open
        assert fresh.read_entries("r1") == [e]
        assert fresh.read_run("r1") == store.read_run("r1")


def test_two_instances_racing_on_one_path_converge(path: str) -> None:
    with SqliteStore(path) as a, SqliteStore(path) as b:
        _admit(a)
        def write(name: str, s: SqliteStore, r: int, barrier: threading.Barrier, results: dict[str, Entry]) -> None:
            barrier.wait()
            results[name] = s.append("r1", Entry.decided(f"p{r}", "value", name))

        for round_ in range(20):
            barrier = threading.Barrier(2)
            results: dict[str, Entry] = {}
            ts = [threading.Thread(target=write, args=(n, s, round_, barrier, results))
                  for n, s in (("a", a), ("b", b))]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            assert results["a"] == results["b"]
        stored = a.read_entries("r1")
        assert stored == b.read_entries("r1") and len(stored) == 20


def test_two_processes_racing_on_one_run_converge(store: SqliteStore, path: str, tmp_path: Path) -> None:
    _admit(store)
    code = textwrap.dedent(f"""
        import json, sys, time
        from telo.journal.sqlite import SqliteStore
        from telo.journal.model import Entry
        me = sys.argv[1]
        with SqliteStore({path!r}) as s:
            while time.time() < float(sys.argv[2]):
                pass
            out = [s.append("r1", Entry.decided(f"steps/s{{i}}", "value", me)).value for i in range(200)]
        print(json.dumps(out))
    """)
    start = str(time.time() + 1.0)
    procs = [subprocess.Popen([sys.executable, "-c", code, name, start], stdout=subprocess.PIPE, text=True,
                              **PROCS) for name in ("a", "b")]  # type: ignore[call-overload]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    stored = store.read_entries("r1")
    assert len(stored) == 200
    assert outs[0] == outs[1] == [e.value for e in stored]  # each process got the stored value back
    assert {json.loads(v) for v in outs[0]} <= {"a", "b"}


def test_acknowledged_appends_survive_sigkill(store: SqliteStore, path: str) -> None:
    _admit(store)
    code = textwrap.dedent(f"""
        import sys
        from telo.journal.sqlite import SqliteStore
        from telo.journal.model import Entry
        s = SqliteStore({path!r})
        i = 0
        while True:
            s.append("r1", Entry.decided(f"steps/s{{i}}", "value", i))
            print(i, flush=True)
            i += 1
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, **PROCS)  # type: ignore[call-overload]
    assert proc.stdout is not None
    acked = -1
    for line in proc.stdout:
        acked = int(line)
        if acked >= 50:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stored = {e.path for e in store.read_entries("r1")}
    assert {f"steps/s{i}" for i in range(acked + 1)} <= stored


# --- transactions (spec §8.2) ---------------------------------------------------------------------------


def test_transaction_commit_and_rollback(store: SqliteStore, path: str) -> None:
    _admit(store)
    with store.transaction() as tx:
        assert store.writes_inside(tx)
        assert isinstance(tx.connection, sqlite3.Connection)
        store.append("r1", Entry.decided("kept", "value", 1))
        assert [e.path for e in store.read_entries("r1")] == ["kept"]  # reads join the transaction
        with SqliteStore(path) as other:
            assert other.read_entries("r1") == []  # not committed yet
    assert not store.writes_inside(tx)

    class Boom(Exception):
        pass

    with pytest.raises(Boom), store.transaction() as tx2:
        store.append("r1", Entry.decided("lost", "value", 2))
        tx2.connection.execute(f"UPDATE {store._sql.runs} SET workflow = 'sql' WHERE run = 'r1'")
        raise Boom
    assert [e.path for e in store.read_entries("r1")] == ["kept"]
    rec = store.read_run("r1")
    assert rec is not None and rec.workflow is None  # the step's own SQL rolled back with the entries
    # appends after a rollback number on from what is stored
    later = store.append("r1", Entry.decided("later", "value", 3))
    assert (later.seq or 0) > (store.read_entries("r1")[0].seq or 0)


def test_a_suspension_rolls_back(store: SqliteStore) -> None:
    _admit(store)

    class Suspend(BaseException):
        pass

    with pytest.raises(Suspend), store.transaction():
        store.append("r1", Entry.decided("x", "value", 1))
        raise Suspend
    assert store.read_entries("r1") == []


def test_nested_transactions_are_savepoints(store: SqliteStore) -> None:
    _admit(store)
    with store.transaction() as outer:
        store.append("r1", Entry.decided("outer", "value", 1))
        with pytest.raises(ValueError), store.transaction() as inner:
            assert store.writes_inside(inner) and inner.connection is outer.connection
            store.append("r1", Entry.decided("inner", "value", 2))
            raise ValueError
        assert store.writes_inside(outer) and not store.writes_inside(inner)
    assert [e.path for e in store.read_entries("r1")] == ["outer"]


def test_transactions_of_other_stores_and_threads(store: SqliteStore, path: str) -> None:
    _admit(store)
    with SqliteStore(path, table="other") as other, other.transaction() as tx:
        assert not store.writes_inside(tx) and other.writes_inside(tx)  # another store's transaction
    seen: list[int] = []
    with store.transaction():
        t = threading.Thread(target=lambda: seen.append(len(store.read_entries("r1"))))
        store.append("r1", Entry.decided("in-tx", "value", 1))
        t.start()
        t.join()
    assert seen == [0]  # a thread outside the context reads the last commit, not the open transaction


def test_lifecycle_writes_inside_a_transaction_are_refused(store: SqliteStore) -> None:
    _admit(store)
    with store.transaction():
        for call in (lambda: store.admit(Admission.of("r2")),
                     lambda: store.complete("r1", Outcome.completed(1)),
                     lambda: store.park("r1", Parked("steps/w")),
                     lambda: store.claim("r1", "h", 1, 0)):
            with pytest.raises(JournalError) as exc:
                call()
            assert exc.value.code == "ERR_JOURNAL_IN_TRANSACTION"
    rec = store.read_run("r1")
    assert rec is not None and rec.status == "running"


# --- rows ------------------------------------------------------------------------------------------------


def test_legacy_rows_read_back_through_decode(store: SqliteStore, path: str) -> None:
    _admit(store)
    conn = sqlite3.connect(path)
    conn.execute(store._sql.insert_entry, ("r1", "steps/old", 1, "step", None, json.dumps(TARGET),
                                           '{"big":{"$bigint":"12345678901234567890"},"n":1}', None))
    conn.execute(store._sql.insert_entry, ("r1", "steps/none", 2, "step", None, None, None, None))
    conn.commit()
    conn.close()
    old, none = store.read_entries("r1")
    assert old.v is None and old.target == TARGET
    assert equal(old.decode("r1"), {"big": 12345678901234567890, "n": 1.0})
    assert none.value is None and none.target is None
    # the next append numbers after the legacy rows
    assert (store.append("r1", Entry.decided("new", "value", 1)).seq or 0) > 2


def test_truncating_everything_never_reuses_a_seq(store: SqliteStore) -> None:
    _admit(store)
    last = [store.append("r1", Entry.decided(f"p{i}", "value", i)) for i in range(3)][-1]
    assert store.truncate_before("r1", 10_000) == 3
    again = store.append("r1", Entry.decided("p0", "value", 0))
    assert (again.seq or 0) > (last.seq or 0)


def test_a_dead_local_holder_does_not_keep_a_run_from_being_due(store: SqliteStore) -> None:
    _admit(store)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = Holder("gone", this_host(), child.pid, 1).to_text()
    assert store.claim("r1", dead, 60_000, 0)
    assert store.due_runs(1, 10) == ["r1"]
    assert store.claim("r1", Holder.for_this_process("me").to_text(), 60_000, 1)
    assert store.due_runs(2, 10) == []


def test_update_run_maps_record_fields(store: SqliteStore) -> None:
    _admit(store)
    rec = store.update_run("r1", status="parked", parked=Parked("steps/w", "r", "tok", 5, "why"), due_at=5,
                           error={"code": "E", "message": "m"}, collapse_reasons=("a",), epoch=2,
                           inputs_v=None, result="1", result_v=2)
    assert rec == store.read_run("r1")
    assert rec.parked == Parked("steps/w", "r", "tok", 5, "why") and rec.epoch == 2
    assert rec.collapse_reasons == ("a",) and rec.error == {"code": "E", "message": "m"}
    with pytest.raises(TypeError):
        store.update_run("r1", updated_at=1)


# --- lifecycle of the store itself -----------------------------------------------------------------------


def test_close_drains_then_refuses(path: str) -> None:
    store = SqliteStore(path)
    _admit(store)
    gate = Gate(store)
    pending = [store.submit_append("r1", Entry.decided(f"p{i}", "value", i)) for i in range(5)]
    closer = threading.Thread(target=store.close)
    closer.start()
    gate.open()
    closer.join(10)
    assert all(f.result(1).seq for f in pending)  # queued before close: committed
    with pytest.raises(JournalError) as exc:
        store.append("r1", Entry.decided("late", "value", 1))
    assert exc.value.code == "ERR_JOURNAL_CLOSED"
    with pytest.raises(JournalError):
        store.read_run("r1")
    store.close()  # idempotent
    assert not store._writer._thread.is_alive()
    with SqliteStore(path) as again:
        assert len(again.read_entries("r1")) == 5


def test_an_interrupt_mid_batch_leaves_the_store_usable(store: SqliteStore) -> None:
    _admit(store)

    def interrupted(conn: sqlite3.Connection) -> None:
        conn.execute(f"UPDATE {store._sql.runs} SET workflow = 'half' WHERE run = 'r1'")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store._writer.call(interrupted)  # a lone caller: runs inline, on this thread
    assert store.append("r1", Entry.decided("a", "value", 1)).path == "a"
    rec = store.read_run("r1")
    assert rec is not None and rec.workflow is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_is_refused_instead_of_hanging(store: SqliteStore) -> None:
    _admit(store)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            store.append("r1", Entry.decided("child", "value", 1))
        except JournalError as exc:
            code = 0 if exc.code == "ERR_JOURNAL_FORKED" else 2
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.append("r1", Entry.decided("parent", "value", 1)).path == "parent"


def test_a_transaction_that_cannot_begin_fails_clearly(path: str) -> None:
    with SqliteStore(path, busy_timeout_ms=50) as store:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(JournalError) as exc, store.transaction():
                pass
            assert exc.value.code == "ERR_JOURNAL_WRITE_FAILED"
        finally:
            other.execute("ROLLBACK")
            other.close()
        with store.transaction() as tx:
            assert store.writes_inside(tx)


# --- appends grouped within a batch (sqlite_append.append_group) -----------------------------------------


def test_a_grouped_batch_numbers_in_order_and_keeps_first_writer_wins(store: SqliteStore) -> None:
    for run in ("a", "b"):
        _admit(store, run)
    early = store.append("a", Entry.decided("p1", "value", "early"))
    store.append("b", Entry.decided("p0", "value", 0))
    assert store.truncate_before("b", 10_000) == 1  # b's seq floor is now above anything stored
    gate = Gate(store)
    futures = [store.submit_append(run, Entry.decided(f"p{i}", "value", f"{run}{i}"))
               for i in range(300) for run in ("a", "b")]  # > 256 rows: several INSERT chunks
    futures.append(store.submit_append("ghost", Entry.decided("p", "value", 1)))
    gate.open()
    got = [f.result(10) for f in futures[:-1]]
    with pytest.raises(TeloError) as exc:
        futures[-1].result(10)
    assert exc.value.code == "ERR_DURABLE_RUN_NOT_FOUND"
    a, b = got[0::2], got[1::2]
    assert a[1] == early  # p1 of "a" existed: the stored entry comes back
    assert [json.loads(e.value or "") for e in a[:3]] == ["a0", "early", "a2"]
    for run, entries in (("a", a), ("b", b)):
        stored = store.read_entries(run)
        assert {e.path: e for e in stored} == {e.path: e for e in entries}
        seqs = [e.seq or 0 for e in entries if e != early]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # submission order
    assert min(e.seq or 0 for e in b) > 1  # above the floor left by truncation


def test_a_failing_group_is_undone_and_rerun_one_by_one(store: SqliteStore) -> None:
    _admit(store)
    runner = store._writer._executor._groups[AppendOp]
    calls: list[int] = []

    def broken_runner(conn: sqlite3.Connection, ops: list[object]) -> list[tuple[bool, object]]:
        calls.append(len(ops))
        runner(conn, ops)  # writes everything ...
        raise sqlite3.OperationalError("... then fails")

    store._writer._executor._groups[AppendOp] = broken_runner
    gate = Gate(store)
    futures = [store.submit_append("r1", Entry.decided(f"p{i}", "value", i)) for i in range(5)]
    gate.open()
    got = [f.result(10) for f in futures]
    assert calls == [5]
    assert store.read_entries("r1") == got  # written once each, by the one-by-one rerun
    assert [e.path for e in got] == [f"p{i}" for i in range(5)]


def _append_until_closed(s: SqliteStore, run: str, start: threading.Barrier, outcomes: list[str]) -> None:
    start.wait()
    for i in range(10_000):
        try:
            s.append(run, Entry.decided(f"p{i}", "value", i))
        except JournalError as exc:
            outcomes.append(exc.code)
            return
    outcomes.append("finished")  # pragma: no cover - close came too late


def test_close_racing_with_appends_leaves_nobody_waiting(path: str) -> None:
    for attempt in range(5):
        store = SqliteStore(path, table=f"t{attempt}")
        for t in range(20):
            _admit(store, f"run-{t}")
        outcomes: list[str] = []
        start = threading.Barrier(21)
        threads = [threading.Thread(target=_append_until_closed, args=(store, f"run-{t}", start, outcomes))
                   for t in range(20)]
        for th in threads:
            th.start()
        start.wait()
        time.sleep(0.02 * (attempt + 1))
        store.close()
        for th in threads:
            th.join(10)
        assert not any(th.is_alive() for th in threads)  # nobody hangs
        assert set(outcomes) <= {"ERR_JOURNAL_CLOSED", "finished"} and len(outcomes) == 20


def test_a_busy_inline_writer_does_not_starve_queued_operations(store: SqliteStore) -> None:
    _admit(store, "sync")
    _admit(store, "async")
    stop = threading.Event()

    def tight_loop() -> None:
        i = 0
        while not stop.is_set():
            store.append("sync", Entry.decided(f"p{i}", "value", i))
            i += 1

    t = threading.Thread(target=tight_loop)
    t.start()
    try:
        time.sleep(0.05)
        for i in range(20):
            started = time.monotonic()
            store.submit_append("async", Entry.decided(f"q{i}", "value", i)).result(timeout=5)
            assert time.monotonic() - started < 1.0
    finally:
        stop.set()
        t.join()
