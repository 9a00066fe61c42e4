"""What only the PostgreSQL journal has to get right (reference §7 "Postgres journal"; spec §8.2).

The shared semantics are in tests/stores/; these tests cover DDL races and upgrades of upstream tables,
joinable transactions and ``writes_inside``, LISTEN/NOTIFY wake-ups, legacy rows, SKIP LOCKED sweeps and
recovery by a fresh instance. Each test works on tables of its own random prefix.
"""

from __future__ import annotations

import contextvars
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from psycopg import sql

from telo.clock import FakeClock, process_start_ticks
from telo.errors import Code, JournalError, TeloError
from telo.journal import postgres_session
from telo.journal.claims import Holder, this_host
from telo.journal.integrity import checksum
from telo.journal.model import NO_VALUE, Admission, Entry, Outcome, Parked, RunFilter
from telo.journal.postgres import PostgresStore
from telo.journal.postgres_schema import RUN_COLUMNS, RUN_EXTENSION_COLUMNS, is_race, names_for
from tests.pg_support import fresh_prefix, pg_url

TARGET = {"kind": "Python.Function", "name": "charge", "module": "file:///app/orders.yaml"}
OTHER_A = Holder("sweeper-a", "host-a", 1, 1).to_text()  # another host: never judged dead from here
OTHER_B = Holder("sweeper-b", "host-b", 2, 2).to_text()
TTL = 60_000
NOW = 1_767_225_600_000

# The [M] (pre-codec) upstream tables: no codec columns, no replayed_steps, none of telo's columns.
UPSTREAM_DDL = """
CREATE TABLE {runs} (
  run TEXT PRIMARY KEY, status TEXT NOT NULL, due_at BIGINT,
  parked_path TEXT, parked_resource TEXT, parked_token TEXT,
  inputs TEXT, result TEXT, error TEXT, collapsed_regions INT, collapse_reasons TEXT,
  claim_holder TEXT, claim_until BIGINT);
CREATE TABLE {entries} (
  run TEXT NOT NULL, path TEXT NOT NULL, seq BIGSERIAL,
  entry_kind TEXT NOT NULL, decision TEXT, target TEXT, value TEXT,
  PRIMARY KEY (run, path));
"""


@pytest.fixture
def url() -> str:
    return pg_url()


@pytest.fixture
def prefix() -> str:
    return fresh_prefix()


@pytest.fixture
def open_store(url: str, prefix: str) -> Iterator[Callable[..., PostgresStore]]:
    opened: list[PostgresStore] = []

    def make(**options: Any) -> PostgresStore:
        options.setdefault("table", prefix)
        store = PostgresStore(url, **options)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[..., PostgresStore]) -> PostgresStore:
    return open_store()


def _sql(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, params or None)
        return cur.fetchall() if cur.description else []


def _columns(url: str, table: str) -> set[str]:
    rows = _sql(
        url,
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = %s",
        table,
    )
    return {r[0] for r in rows}


def _admit(store: PostgresStore, run: str = "r1", **kw: Any) -> None:
    assert store.admit(Admission.of(run, **kw)).admitted


# --- DDL ------------------------------------------------------------------------------------------------


def test_concurrent_creators_in_threads_all_succeed(url: str, prefix: str) -> None:
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def create() -> None:
        try:
            barrier.wait()
            PostgresStore(url, table=prefix).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert {"run", "epoch", "created_at"} <= _columns(url, f"{prefix}_runs")


def test_concurrent_creators_in_processes_all_succeed(url: str, prefix: str) -> None:
    code = (
        "import sys, time; from telo.journal.postgres import PostgresStore; "
        "time.sleep(max(0.0, float(sys.argv[3]) - time.time())); "
        "PostgresStore(sys.argv[1], table=sys.argv[2]).close()"
    )
    start = str(time.time() + 1.5)  # all start their DDL at the same instant
    procs = [subprocess.Popen([sys.executable, "-c", code, url, prefix, start]) for _ in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]


def test_losing_a_create_race_counts_as_success(url: str, prefix: str) -> None:
    """Deterministic race: another session's CREATE is uncommitted while ours runs, then commits.

    Our CREATE TABLE IF NOT EXISTS blocks on the catalog row and then fails with a unique violation
    (23505) or duplicate_table — the upstream race the reference says counts as success.
    """
    names = names_for(prefix, None)
    cols = ", ".join(f"{n} {t}" for n, t in RUN_COLUMNS)
    done: list[BaseException | None] = []
    with psycopg.connect(url) as other:  # not autocommit: holds its CREATE open
        other.execute(sql.SQL("CREATE TABLE {} ({})").format(names.runs_id, sql.SQL(cols)))

        def create() -> None:
            try:
                PostgresStore(url, table=prefix).close()
                done.append(None)
            except BaseException as exc:
                done.append(exc)

        t = threading.Thread(target=create)
        t.start()
        deadline = time.monotonic() + 10
        blocked = False
        while time.monotonic() < deadline and not blocked:
            blocked = bool(
                _sql(
                    url,
                    "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                    "CREATE TABLE%",
                )
            )
            time.sleep(0.02)
        assert blocked, "our CREATE never waited on the other session's: the race was not staged"
        other.commit()
        t.join(timeout=30)
    assert done == [None]
    assert {c for c, _ in RUN_EXTENSION_COLUMNS} <= _columns(url, names.runs)


def test_race_sqlstates_are_found_through_the_cause_chain() -> None:
    race = psycopg.errors.UniqueViolation("duplicate key")
    assert is_race(race)
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = ValueError("middle")
    wrapped.__cause__.__cause__ = race
    assert is_race(wrapped)
    assert not is_race(psycopg.errors.UndefinedTable("nope"))
    deep: BaseException = race
    for i in range(9):
        outer = RuntimeError(str(i))
        outer.__cause__ = deep
        deep = outer
    assert not is_race(deep)  # the reference searches 8 levels, no further


def test_an_upstream_table_gains_telo_columns_and_keeps_its_rows(url: str, prefix: str) -> None:
    names = names_for(prefix, None)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL(UPSTREAM_DDL).format(runs=names.runs_id, entries=names.entries_id))
        conn.execute(
            sql.SQL("INSERT INTO {} (run, status, inputs) VALUES ('old', 'running', %s)").format(names.runs_id),
            ('{"n":{"$bigint":"9007199254740993"}}',),
        )
    store = PostgresStore(url, table=prefix)
    try:
        assert {"replayed_steps", "inputs_codec_version", "parked_reason", "workflow", "epoch"} <= _columns(
            url, names.runs
        )
        assert "codec_version" in _columns(url, names.entries)
        old = store.read_run("old")
        assert old is not None and old.status == "running" and old.epoch == 0 and old.created_at is None
        assert old.decoded_inputs() == {"n": 9007199254740993}
        # and the upgraded table works for new runs
        _admit(store, "new", workflow="w")
        assert [r.run for r in store.list_runs(RunFilter()).runs] == ["new", "old"]
    finally:
        store.close()


def test_entries_tables_lacking_the_time_column_gain_it(url: str, prefix: str) -> None:
    """``written_at`` (Entry.at) is added to an upstream table and to an older telo's (one with ``checksum``);
    their rows read ``at=None``, an older telo's still verify (the checksum never covered the time), and new
    entries are stamped with the store's clock."""
    upstream, older = names_for(prefix, None), names_for(prefix + "_v", None)
    old = Entry.step("steps/old", {"kind": "Run.Value", "name": "v"}, {"n": 1})
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL(UPSTREAM_DDL).format(runs=upstream.runs_id, entries=upstream.entries_id))
        conn.execute(sql.SQL("INSERT INTO {} (run, status) VALUES ('r1', 'running')").format(upstream.runs_id))
        conn.execute(sql.SQL("INSERT INTO {} (run, path, entry_kind, value) VALUES ('r1', 'steps/old', 'step', "
                             "'1')").format(upstream.entries_id))
    with PostgresStore(url, table=older.prefix) as store:
        _admit(store)
    with psycopg.connect(url, autocommit=True) as conn:  # the table as the telo before entry times left it
        conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN written_at").format(older.entries_id))
        conn.execute(sql.SQL("INSERT INTO {} (run, path, entry_kind, target, value, codec_version, checksum) "
                             "VALUES ('r1', 'steps/old', 'step', %s, %s, 2, %s)").format(older.entries_id),
                     (json.dumps(dict(old.target or {})), old.value, checksum(old)))
    for names in (upstream, older):
        assert "written_at" not in _columns(url, names.entries)
        with PostgresStore(url, table=names.prefix, clock=FakeClock(7_000)) as store:
            assert "written_at" in _columns(url, names.entries)
            store.append("r1", Entry.decided("steps/new", "value", 2))
            assert [(e.path, e.at) for e in store.read_entries("r1")] == [("steps/old", None), ("steps/new", 7_000)]


def test_an_older_telo_table_gains_the_dedup_and_debounce_keys(url: str, prefix: str) -> None:
    """Issue 16 step 4 added the runs' ``dedup_key`` and ``debounce_key`` and their unique partial indexes: a table
    of the telo before them gains both when this telo opens it, its runs read with no key, and the index refuses a
    second live run of a key whatever writes it."""
    names = names_for(prefix, None)
    with PostgresStore(url, table=prefix) as store:
        _admit(store, "old")
    with psycopg.connect(url, autocommit=True) as conn:  # the table as the telo before step 4 left it
        for index in ("dedup", "debounce"):
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(f"{prefix}_runs_{index}_idx")))
        conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN dedup_key, DROP COLUMN debounce_key").format(names.runs_id))
    assert "dedup_key" not in _columns(url, names.runs)
    with PostgresStore(url, table=prefix) as store:
        assert {"dedup_key", "debounce_key"} <= _columns(url, names.runs)
        old = store.read_run("old")
        assert old is not None and (old.dedup_key, old.debounce_key) == (None, None)
        assert store.admit(Admission.of("a", status="scheduled", due_at=0, queue="q", dedup_key="k")).admitted
        assert store.admit(Admission.of("b", status="scheduled", due_at=0, queue="q", dedup_key="k")).record.run == "a"
    with psycopg.connect(url, autocommit=True) as conn, pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute(sql.SQL("INSERT INTO {} (run, status, queue, dedup_key) VALUES ('c', 'running', 'q', 'k')")
                     .format(names.runs_id))


def test_create_table_false_runs_no_ddl_and_names_what_is_missing(url: str, prefix: str) -> None:
    with pytest.raises(JournalError) as err:
        PostgresStore(url, table=prefix, create_table=False)
    assert err.value.code == "ERR_JOURNAL_SCHEMA_MISSING"
    assert _columns(url, f"{prefix}_runs") == set()  # nothing was created
    PostgresStore(url, table=prefix).close()
    PostgresStore(url, table=prefix, create_table=False).close()


def test_names_are_validated_and_folded_like_unquoted_sql(url: str) -> None:
    for bad in ("1abc", "a-b", 'x"; DROP TABLE y; --', "", "a" * 60):
        with pytest.raises(JournalError):
            PostgresStore(url, table=bad)
    mixed = "Mixed" + fresh_prefix()
    PostgresStore(url, table=mixed).close()
    assert "run" in _columns(url, f"{mixed.lower()}_runs")


def test_an_unreachable_server_fails_fast_as_a_journal_error() -> None:
    started = time.monotonic()
    with pytest.raises(JournalError) as err:
        PostgresStore("postgresql://postgres@127.0.0.1:1/postgres")
    assert err.value.code == "ERR_JOURNAL_UNAVAILABLE"
    assert time.monotonic() - started < 10


# --- transactions and writes_inside (spec §8.2) ---------------------------------------------------------


def test_rollback_discards_entries_and_effects_but_not_lifecycle(store: PostgresStore, url: str) -> None:
    _admit(store)
    store.append("r1", Entry.decided("inputs", "inputs", {}))
    side = f"{fresh_prefix()}_side"
    _sql(url, sql.SQL("CREATE TABLE {} (x INT)").format(sql.Identifier(side)).as_string(None))
    with pytest.raises(RuntimeError), store.transaction() as tx:
        store.append("r1", Entry.step("steps/a", TARGET, 1))
        tx.connection.execute(sql.SQL("INSERT INTO {} VALUES (1)").format(sql.Identifier(side)))
        store.park("r1", Parked("steps/wait", "approval", "tok"))  # lifecycle: outside the transaction
        assert [e.path for e in store.read_entries("r1")] == ["inputs", "steps/a"]  # reads join it
        raise RuntimeError("body failed")
    assert [e.path for e in store.read_entries("r1")] == ["inputs"]
    assert _sql(url, sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(side)).as_string(None)) == [(0,)]
    rec = store.read_run("r1")
    assert rec is not None and rec.status == "parked"


def test_commit_keeps_entries_and_hides_them_until_then(
    store: PostgresStore, open_store: Callable[..., PostgresStore]
) -> None:
    other = open_store()
    _admit(store)
    with store.transaction():
        stored = store.append("r1", Entry.step("steps/a", TARGET, {"ok": True}))
        assert other.read_entries("r1") == []  # uncommitted: invisible to other connections
    assert other.read_entries("r1") == [stored]
    assert other.read_entries("r1")[0].decode("r1") == {"ok": True}


def test_a_transaction_left_idle_past_the_lease_is_ended_by_the_server(
    open_store: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    """A holder stopped inside a joinable transaction (SIGSTOP, a frozen VM) held its run's row against every
    sweep (``SKIP LOCKED``) for as long as it stayed stopped; the server now ends the transaction once it sat
    idle for the holder's lease (telo.journal.postgres_session), and the run can be taken over."""
    monkeypatch.setattr(postgres_session, "IDLE_TRANSACTION_TIMEOUT_MS", 300)
    holder, sweeper = open_store(), open_store()
    holder.claim_ttl_ms = 1_000
    _admit(holder, "r1")
    assert holder.claim("r1", OTHER_A, 1_000, NOW)
    waited = float("inf")
    with pytest.raises(JournalError) as failed, holder.transaction() as tx:
        holder.append("r1", Entry.step("steps/a", TARGET, 1))
        tx.connection.execute(f"SELECT run FROM {prefix}_runs WHERE run = 'r1' FOR UPDATE")  # until COMMIT
        started = time.monotonic()
        while time.monotonic() - started < 15:
            if sweeper.due_runs(NOW + 5_000, 10) == ["r1"]:  # past the lease: due, once no lock hides it
                waited = time.monotonic() - started
                break
            time.sleep(0.05)
    assert 0.9 <= waited < 5, f"the run stayed locked for {waited:.1f} s (bound: the 1 s lease)"
    assert failed.value.code == Code.JOURNAL_FAILED and "commit" in str(failed.value)
    assert sweeper.read_entries("r1") == []  # rolled back with the session
    assert sweeper.claim("r1", OTHER_B, TTL, NOW + 5_000)


def test_a_joinable_transaction_is_bounded_by_the_lease_when_it_is_longer(store: PostgresStore) -> None:
    store.claim_ttl_ms = 90_000
    with store.transaction() as tx:
        assert tx.connection.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("90s",)
    with store.transaction() as tx, store.transaction() as inner:  # a savepoint: the outer bound
        assert inner.connection.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("90s",)
    store.claim_ttl_ms = 1_000  # shorter than telo's own bound: telo's own
    with store.transaction() as tx:
        shown = tx.connection.execute("SHOW idle_in_transaction_session_timeout").fetchone()
    assert shown == (f"{postgres_session.IDLE_TRANSACTION_TIMEOUT_MS // 1000}s",)


def test_a_body_error_from_its_own_sql_reaches_the_caller_unchanged(store: PostgresStore) -> None:
    with pytest.raises(psycopg.errors.UndefinedTable), store.transaction() as tx:
        tx.connection.execute("SELECT * FROM no_such_table_here")


def test_writes_inside_attests_only_its_own_open_transaction(
    store: PostgresStore, open_store: Callable[..., PostgresStore]
) -> None:
    other = open_store(table=fresh_prefix())
    assert not store.writes_inside(SimpleNamespace(transaction=None))
    with store.transaction() as tx:
        zone = SimpleNamespace(transaction=tx)
        assert store.writes_inside(zone) and store.writes_inside(tx)
        assert not other.writes_inside(zone)  # another store's journal is not in this transaction
        with other.transaction() as other_tx:
            assert not store.writes_inside(SimpleNamespace(transaction=other_tx))
            assert other.writes_inside(SimpleNamespace(transaction=other_tx))
        with store.transaction() as inner:  # a savepoint on the same connection: still inside both
            assert inner.connection is tx.connection
            assert store.writes_inside(zone) and store.writes_inside(SimpleNamespace(transaction=inner))
        # another thread with a fresh context does not join the transaction, so it must not attest either
        seen: list[bool] = []
        t = threading.Thread(target=lambda: seen.append(store.writes_inside(zone)))
        t.start()
        t.join()
        assert seen == [False]
        # a copied context does join it, and attests
        assert contextvars.copy_context().run(store.writes_inside, zone)
    assert not store.writes_inside(zone)  # closed


def test_a_rolled_back_savepoint_drops_only_its_own_entries(store: PostgresStore) -> None:
    _admit(store)
    with store.transaction():
        store.append("r1", Entry.step("steps/a", TARGET, 1))
        with pytest.raises(RuntimeError), store.transaction():
            store.append("r1", Entry.step("steps/b", TARGET, 2))
            raise RuntimeError
    assert [e.path for e in store.read_entries("r1")] == ["steps/a"]


# --- wake-ups -------------------------------------------------------------------------------------------


def test_unpark_wakes_a_subscriber_promptly(store: PostgresStore, open_store: Callable[..., PostgresStore]) -> None:
    other = open_store()  # the waker is another instance (another pool), as in another process
    woken: list[tuple[str, float]] = []
    got = threading.Event()

    def on_wake(run: str) -> None:
        woken.append((run, time.monotonic()))
        got.set()

    unsubscribe = store.subscribe_wake(on_wake)
    assert unsubscribe is not None
    _admit(other, "p1")
    other.park("p1", Parked("steps/wait", "approval", "tok-1"))
    sent = time.monotonic()
    assert other.unpark("p1")
    assert got.wait(1.0)
    assert woken[0][0] == "p1" and woken[0][1] - sent < 1.0
    assert not other.unpark("p1")  # not parked any more: no change, no NOTIFY
    unsubscribe()
    got.clear()
    other.park("p1", Parked("steps/wait", "approval", "tok-1"))
    other.unpark("p1")
    assert not got.wait(0.5)
    assert [r for r, _ in woken] == ["p1"]


def test_admitting_an_already_due_scheduled_run_wakes_subscribers(store: PostgresStore) -> None:
    woken: list[str] = []
    got = threading.Event()

    def on_wake(run: str) -> None:
        woken.append(run)
        got.set()

    unsubscribe = store.subscribe_wake(on_wake)
    assert unsubscribe is not None
    now = int(time.time() * 1000)
    _admit(store, "later", status="scheduled", due_at=now + 3_600_000)
    _admit(store, "due", status="scheduled", due_at=now - 1)
    assert got.wait(1.0)
    time.sleep(0.2)
    assert woken == ["due"]
    unsubscribe()


def test_a_failing_callback_does_not_stop_the_listener(store: PostgresStore) -> None:
    calls: list[str] = []
    got = threading.Event()

    def flaky(run: str) -> None:
        calls.append(run)
        if len(calls) == 1:
            raise RuntimeError("subscriber bug")
        got.set()

    unsubscribe = store.subscribe_wake(flaky)
    assert unsubscribe is not None
    for run in ("a", "b"):
        _admit(store, run)
        store.park(run, Parked("steps/w"))
        store.unpark(run)
    assert got.wait(1.0) and calls == ["a", "b"]
    unsubscribe()


# --- values ---------------------------------------------------------------------------------------------


def test_legacy_rows_decode_with_bigint_tags(store: PostgresStore, url: str, prefix: str) -> None:
    _admit(store, "legacy")
    legacy = {
        "steps/charge": '{"amount":{"$bigint":"12345678901234567890"},"n":1,"tags":["a"]}',
        "steps/null": "null",
    }
    for path, value in legacy.items():
        _sql(
            url,
            sql.SQL(
                "INSERT INTO {} (run, path, entry_kind, target, value, codec_version) "
                "VALUES ('legacy', %s, 'step', %s, %s, NULL)"
            )
            .format(sql.Identifier(f"{prefix}_entries"))
            .as_string(None),
            path,
            json.dumps({"kind": "Run.Value", "name": "v"}),
            value,
        )
    _sql(url, f"INSERT INTO {prefix}_entries (run, path, entry_kind) VALUES ('legacy', 'steps/none', 'step')")
    entries = {e.path: e for e in store.read_entries("legacy")}
    charge = entries["steps/charge"]
    assert charge.v is None and charge.target == {"kind": "Run.Value", "name": "v"}
    decoded = charge.decode("legacy")
    assert decoded["amount"] == 12345678901234567890 and isinstance(decoded["amount"], int)
    assert decoded["n"] == 1.0 and isinstance(decoded["n"], float)  # legacy JSON numbers were doubles
    assert entries["steps/null"].decode("legacy") is None
    assert entries["steps/none"].decode("legacy") is NO_VALUE  # NULL value: produced nothing
    # a new entry is frame text beside codec_version
    stored = store.append("legacy", Entry.step("steps/new", TARGET, 2**62))
    row = _sql(url, f"SELECT value, codec_version, target FROM {prefix}_entries WHERE path = 'steps/new'")
    assert row == [(stored.value, 2, json.dumps(TARGET, separators=(",", ":")))]


# --- sweeps and claims ----------------------------------------------------------------------------------


def test_two_concurrent_sweepers_never_both_claim_a_run(open_store: Callable[..., PostgresStore]) -> None:
    seed = open_store()
    runs = [f"run-{i:03d}" for i in range(60)]
    for run in runs:
        _admit(seed, run)
    claimed: dict[str, list[str]] = {OTHER_A: [], OTHER_B: []}
    barrier = threading.Barrier(2)

    def sweep(holder: str) -> None:
        store = open_store()
        barrier.wait()
        while True:
            due = store.due_runs(NOW, 4)
            if not due:
                return
            for run in due:
                if store.claim(run, holder, TTL, NOW):
                    claimed[holder].append(run)

    threads = [threading.Thread(target=sweep, args=(h,)) for h in claimed]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    a, b = set(claimed[OTHER_A]), set(claimed[OTHER_B])
    assert not (a & b)
    assert a | b == set(runs)
    assert len(claimed[OTHER_A]) + len(claimed[OTHER_B]) == len(runs)


def test_due_runs_skips_rows_another_sweep_has_locked(store: PostgresStore, url: str, prefix: str) -> None:
    for run in ("a", "b", "c"):
        _admit(store, run)
    with psycopg.connect(url) as other:
        other.execute(f"SELECT run FROM {prefix}_runs WHERE run = 'a' FOR UPDATE")
        started = time.monotonic()
        assert store.due_runs(NOW, 10) == ["b", "c"]  # not blocked: SKIP LOCKED
        assert time.monotonic() - started < 2
    assert store.due_runs(NOW, 10) == ["a", "b", "c"]


def test_a_dead_local_holder_does_not_hide_a_run_from_the_sweep(store: PostgresStore) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    start = process_start_ticks(proc.pid)
    proc.kill()
    proc.wait()
    dead = Holder("gone", this_host(), proc.pid, start).to_text()
    live = Holder.for_this_process("me").to_text()
    for run in ("dead-held", "live-held", "free"):
        _admit(store, run)
    assert store.claim("dead-held", dead, TTL, NOW)
    assert store.claim("live-held", live, TTL, NOW)
    assert store.due_runs(NOW, 10) == ["dead-held", "free"]
    assert store.due_runs(NOW, 1) == ["dead-held"]  # LIMIT counts only runs that are really due
    assert store.claim("dead-held", OTHER_A, TTL, NOW)  # and the claim is taken over at once
    assert not store.claim("live-held", OTHER_A, TTL, NOW)


# --- recovery -------------------------------------------------------------------------------------------


def test_a_fresh_store_over_the_same_tables_recovers_everything(open_store: Callable[..., PostgresStore]) -> None:
    clock = FakeClock(NOW)
    store = open_store(clock=clock)
    for run, kw in (
        ("done", {"workflow": "w", "inputs": {"a": 1}}),
        ("parked", {"workflow": "w"}),
        ("held", {"workflow": "w"}),
        ("later", {"status": "scheduled", "due_at": NOW + 1, "workflow": "s"}),
    ):
        _admit(store, run, **kw)
        clock.advance(ms=1)
    store.append("done", Entry.decided("inputs", "inputs", {"a": 1}))
    store.append("done", Entry.step("steps/x", TARGET, [1, "two"]))
    store.complete(
        "done", Outcome.completed({"steps": {}}, collapsed_regions=1, collapse_reasons=("why",), replayed_steps=2)
    )
    store.park("parked", Parked("steps/wait", "approval", "tok", at=NOW + 5, reason="waiting"))
    assert store.claim("held", OTHER_A, TTL, NOW)
    store.update_run("held", manifest_digest="sha256-x", digest_scope="reachable", epoch=3)
    store.update_run("held", error={"code": "E", "message": "m"})
    runs = ("done", "parked", "held", "later")
    before = {r: store.read_run(r) for r in runs}
    entries_before = store.read_entries("done")
    store.close()

    fresh = open_store(create_table=False, clock=clock)
    assert {r: fresh.read_run(r) for r in runs} == before
    assert fresh.read_entries("done") == entries_before
    done = before["done"]
    assert done is not None and done.status == "completed" and done.decoded_result() == {"steps": {}}
    assert done.collapse_reasons == ("why",) and done.replayed_steps == 2 and done.decoded_inputs() == {"a": 1}
    assert [e.decode("done") for e in entries_before] == [{"a": 1}, [1, "two"]]
    parked = before["parked"]
    assert parked is not None and parked.parked == Parked("steps/wait", "approval", "tok", NOW + 5, "waiting")
    assert fresh.run_parked_on("tok") == parked
    held = before["held"]
    assert held is not None and held.claim is not None and held.claim.holder == OTHER_A
    assert (held.manifest_digest, held.digest_scope, held.epoch) == ("sha256-x", "reachable", 3)
    assert held.error == {"code": "E", "message": "m"}
    assert not fresh.claim("held", OTHER_B, TTL, NOW)
    assert fresh.due_runs(NOW + 10, 10) == ["later", "parked"]
    assert [r.run for r in fresh.list_runs(RunFilter(workflow="w")).runs] == ["held", "parked", "done"]
    page = fresh.list_runs(RunFilter(limit=2))
    assert [r.run for r in page.runs] == ["later", "held"] and page.next is not None
    assert [r.run for r in fresh.list_runs(RunFilter(limit=2, after=page.next)).runs] == ["parked", "done"]


def test_update_run_rejects_unknown_fields(store: PostgresStore) -> None:
    _admit(store)
    with pytest.raises(TypeError):
        store.update_run("r1", colour="blue")
    with pytest.raises(TeloError) as err:
        store.update_run("nope", status="running")
    assert err.value.code == "ERR_DURABLE_RUN_NOT_FOUND"


def test_module_family_alone_imports_psycopg() -> None:
    code = "import sys, telo.journal, telo.journal.memory; print('psycopg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_opening_the_journal_does_not_wait_for_open_writers(url: str, prefix: str) -> None:
    """DDL runs only for what is missing: CREATE INDEX IF NOT EXISTS would queue behind any writer."""
    PostgresStore(url, table=prefix).close()
    with psycopg.connect(url) as writer:
        writer.execute(f"INSERT INTO {prefix}_runs (run, status) VALUES ('w', 'running')")
        writer.execute(f"INSERT INTO {prefix}_entries (run, path, entry_kind) VALUES ('w', 'p', 'step')")
        opened = threading.Event()

        def reopen() -> None:
            PostgresStore(url, table=prefix).close()
            opened.set()

        t = threading.Thread(target=reopen, daemon=True)
        t.start()
        waited = not opened.wait(5)
        writer.rollback()  # unblocks a store that did wait, so the test ends either way
        t.join(10)
        assert not waited, "opening the journal waited for an open write transaction"


def _backends(url: str, like: str) -> set[int]:
    rows = _sql(url, "SELECT pid FROM pg_stat_activity WHERE query LIKE %s AND pid <> pg_backend_pid()", like)
    return {r[0] for r in rows}


def test_the_wake_listener_reconnects_after_losing_its_connection(store: PostgresStore, url: str) -> None:
    channel = f'LISTEN "{store._names.channel}"'
    got = threading.Event()
    unsubscribe = store.subscribe_wake(lambda run: got.set())
    assert unsubscribe is not None
    first = _backends(url, channel)
    assert len(first) == 1
    _sql(url, "SELECT pg_terminate_backend(%s)", next(iter(first)))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (_backends(url, channel) - first):
        time.sleep(0.05)
    assert _backends(url, channel) - first, "the listener did not LISTEN again"
    _admit(store, "p")
    store.park("p", Parked("steps/w"))
    store.unpark("p")
    assert got.wait(1.0)
    unsubscribe()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _backends(url, channel):
        time.sleep(0.05)
    assert not _backends(url, channel)  # unsubscribing closed the LISTEN connection


def test_pooled_connections_the_server_dropped_are_replaced(store: PostgresStore, url: str) -> None:
    _admit(store)
    with store._pool.connection() as conn:  # the pool's idle connection (min_size 1): only ours is killed
        pid = conn.info.backend_pid
    _sql(url, "SELECT pg_terminate_backend(%s)", pid)
    rec = store.read_run("r1")  # would fail on a dead connection without the pool's check
    assert rec is not None and rec.status == "running"


def test_a_closed_store_refuses_with_a_journal_error(open_store: Callable[..., PostgresStore]) -> None:
    store = open_store()
    store.close()
    with pytest.raises(JournalError) as err:
        store.read_run("r1")
    assert err.value.code == "ERR_JOURNAL_UNAVAILABLE"
