"""PostgreSQL journal: group commit (issue 14) — many runs' writes in one transaction, kind by kind one
statement (:mod:`telo.journal.postgres_writer`, :mod:`telo.journal.postgres_groups`, ``postgres_ops``).

Before, every write was a transaction of its own on a pooled connection (2.5 write transactions per step).
Each batch below is formed by holding the writer thread (``Gate``) while the operations are queued, so that
they commit as ONE batch; the statements the writer sends are traced through a cursor class of its
connection."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from telo.durable.aio import AsyncStore
from telo.errors import Code, JournalError, TeloError
from telo.journal.chain import ChainBroken, ClaimLost, WriteChain
from telo.journal.claims import Fence, Holder
from telo.journal.model import Admission, AdmitResult, Claim, Entry, Outcome
from telo.journal.postgres import PostgresStore
from telo.journal.store import GroupCommitStore
from tests.pg_support import fresh_prefix, pg_url
from tests.unit.journal.batches import one_batch

LIVE_A = Holder.for_this_process("worker-a").to_text()
LIVE_B = Holder.for_this_process("worker-b").to_text()
FAR = 10**13  # a claim that never lapses in these tests


@pytest.fixture
def store() -> Iterator[PostgresStore]:
    s = PostgresStore(pg_url(), table=fresh_prefix())
    yield s
    s.close()


def trace(store: PostgresStore) -> list[str]:
    """Every statement the writer's connection runs from now on."""
    statements: list[str] = []

    class Traced(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            statements.append(str(query))
            return super().execute(query, params, **kwargs)

    def install(conn: psycopg.Connection[Any]) -> None:
        conn.cursor_factory = Traced

    store._writer.call(install)
    return statements


def kinds(statements: list[str]) -> list[str]:
    """The statements of a trace by what they are (BEGIN, COMMIT, the group statements, ...)."""
    out = []
    for s in statements:
        head = s.split(" (")[0].split(" SET ")[0]
        out.append("append_many" if "unnest" in s and "entries" in head and s.startswith("INSERT")
                   else "admit_many" if "unnest" in s and s.startswith("INSERT")
                   else "complete_many" if "unnest" in s and s.startswith("UPDATE")
                   else s if s in ("BEGIN", "COMMIT", "ROLLBACK") else "other")
    return out


def test_the_store_is_a_group_commit_store_and_defers_entries(store: PostgresStore) -> None:
    assert isinstance(store, GroupCommitStore)
    assert AsyncStore(store).chain("r") is not None  # entries may be deferred with the SQLite barriers


def test_a_batch_of_many_runs_is_one_transaction_and_one_statement_per_kind(store: PostgresStore) -> None:
    """Twenty runs admitted (claimed), three entries each, and completed — 100 writes — in ONE transaction of
    five statements; each run's entries take increasing seqs in the order they were appended."""
    statements = trace(store)
    aio = AsyncStore(store)
    runs = [f"r{i:02d}" for i in range(20)]

    def submit() -> list[asyncio.Future[Any]]:
        futures: list[asyncio.Future[Any]] = []
        for run in runs:
            futures.append(aio.submit_admission(Admission.of(run, inputs={"run": run}), LIVE_A, 1_000))
        for n in range(3):
            for run in runs:
                futures.append(store.submit_append_async(run, Entry.decided(f"p{n}", "value", n),
                                                         fence=Fence(LIVE_A, 1)))
        for run in runs:
            futures.append(store.complete_async(run, Outcome.completed({"run": run}), fence=Fence(LIVE_A, 1)))
        return futures

    statements.clear()
    got = one_batch(store, submit)
    assert not [g for g in got if isinstance(g, BaseException)], got
    # the gate's batch, then these hundred writes
    assert kinds(statements) == ["BEGIN", "COMMIT", "BEGIN", "admit_many", "append_many", "complete_many", "COMMIT"]
    for run in runs:
        record = store.read_run(run)
        assert record is not None and record.status == "completed" and record.claim is None
        entries = store.read_entries(run)
        assert [e.path for e in entries] == ["p0", "p1", "p2"]
        assert [e.seq for e in entries] == sorted(e.seq for e in entries)  # type: ignore[type-var]
    admitted: list[AdmitResult] = got[:20]
    assert all(a.admitted and a.record.claim == Claim(LIVE_A, 1_000 + store.claim_ttl_ms) for a in admitted)
    assert store.stats.max_batch >= 100


def test_first_writer_wins_and_repeats_in_one_group(store: PostgresStore) -> None:
    assert store.admit(Admission.of("a")).admitted
    first = store.append("a", Entry.decided("x", "value", "first"))

    def submit() -> list[asyncio.Future[Any]]:
        return [store.submit_append_async("a", Entry.decided("x", "value", "second")),  # stored before
                store.submit_append_async("a", Entry.decided("y", "value", 1)),
                store.submit_append_async("a", Entry.decided("y", "value", 2)),  # a repeat in the group
                store.submit_append_async("ghost", Entry.decided("y", "value", 3))]  # never admitted

    x, y1, y2, ghost = one_batch(store, submit)
    assert x == first and x.decode("a") == "first"
    assert y1.decode("a") == 1 and y2 == y1
    assert isinstance(ghost, TeloError) and ghost.code == Code.DURABLE_RUN_NOT_FOUND
    assert [e.decode("a") for e in store.read_entries("a")] == ["first", 1]


def test_a_stale_fence_is_refused_in_a_group_and_writes_nothing(store: PostgresStore) -> None:
    assert store.admit(Admission.of("a"), claim=Claim(LIVE_A, FAR)).admitted
    assert store.admit(Admission.of("b"), claim=Claim(LIVE_A, FAR)).admitted
    stale, fresh = Fence(LIVE_B, 1), Fence(LIVE_A, 1)

    def submit() -> list[asyncio.Future[Any]]:
        return [store.submit_append_async("a", Entry.decided("p", "value", 1), fence=stale),
                store.submit_append_async("b", Entry.decided("p", "value", 2), fence=fresh),
                store.complete_async("a", Outcome.completed(1), fence=stale)]

    refused, written, completion = one_batch(store, submit)
    assert isinstance(refused, ClaimLost) and isinstance(completion, ClaimLost)
    assert written.decode("b") == 2
    assert store.read_entries("a") == []
    record = store.read_run("a")
    assert record is not None and record.status == "running"


def test_a_deferred_append_that_lost_its_race_breaks_its_chain_in_the_same_batch(store: PostgresStore) -> None:
    """Another execution stored a different value at p1: this execution's later writes, queued in the same
    batch, must not commit (a hole in what it built on)."""
    assert store.admit(Admission.of("a"), claim=Claim(LIVE_A, FAR)).admitted
    assert store.admit(Admission.of("b")).admitted
    fence = Fence(LIVE_A, 1)
    store.append("a", Entry.decided("p1", "value", "theirs"), fence=fence)
    chain = WriteChain("a", fence)

    def submit() -> list[asyncio.Future[Any]]:
        return [store.submit_deferred("a", Entry.decided("p0", "value", "mine-0"), chain),
                store.submit_deferred("a", Entry.decided("p1", "value", "mine-1"), chain),
                store.submit_deferred("a", Entry.decided("p2", "value", "mine-2"), chain),
                store.submit_append_async("b", Entry.decided("q", "value", "other run")),
                store.complete_async("a", Outcome.completed(1), chain=chain)]

    p0, p1, p2, other, completion = one_batch(store, submit)
    assert p0.decode("a") == "mine-0"
    assert p1.decode("a") == "theirs"  # first writer wins: the stored entry comes back
    assert isinstance(p2, ChainBroken) and isinstance(completion, ChainBroken)
    assert other.decode("b") == "other run"
    assert [e.path for e in store.read_entries("a")] == ["p1", "p0"]
    record = store.read_run("a")
    assert record is not None and record.status == "running"


def test_a_write_the_server_refuses_fails_alone_and_the_batch_commits(store: PostgresStore) -> None:
    """A NUL character cannot be stored in PostgreSQL text: the statement carrying it fails, which aborts the
    whole transaction; the writer runs the batch again isolated, so only that append fails."""
    for run in ("a", "b"):
        assert store.admit(Admission.of(run)).admitted

    def submit() -> list[asyncio.Future[Any]]:
        return [store.submit_append_async("a", Entry.decided("fine", "value", 1)),
                store.submit_append_async("b", Entry.decided("bad\x00path", "value", 2)),
                store.complete_async("a", Outcome.completed("done"))]

    fine, bad, done = one_batch(store, submit)
    assert fine.decode("a") == 1 and done.status == "completed"
    assert isinstance(bad, JournalError) and bad.code == Code.JOURNAL_WRITE_FAILED
    assert "NUL" in (bad.hint or "")
    assert store.read_entries("b") == []


def test_a_connection_the_server_dropped_between_batches_is_replaced(store: PostgresStore) -> None:
    assert store.admit(Admission.of("a")).admitted
    pid = store._writer.call(lambda conn: conn.info.backend_pid)
    with psycopg.connect(pg_url(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    entry = store.append("a", Entry.decided("p", "value", 1))  # nothing was sent on the dead connection yet
    assert entry.decode("a") == 1
    assert store._writer.call(lambda conn: conn.info.backend_pid) != pid


def test_a_connection_lost_inside_a_batch_fails_that_batch_only(store: PostgresStore) -> None:
    assert store.admit(Admission.of("a")).admitted
    pid = store._writer.call(lambda conn: conn.info.backend_pid)

    def killed_mid_batch(conn: Any) -> None:
        with psycopg.connect(pg_url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        conn.execute("SELECT 1")

    with pytest.raises(JournalError) as err:
        store._writer.call(killed_mid_batch)
    assert err.value.code == Code.JOURNAL_UNAVAILABLE
    assert store.append("a", Entry.decided("p", "value", 1)).decode("a") == 1  # the next batch reconnects


def test_a_lone_execution_commits_its_queue_itself(store: PostgresStore) -> None:
    """``commit_queued`` on the loop's thread (a lone run at a barrier): one transaction for what is queued."""
    assert store.admit(Admission.of("a")).admitted

    async def main() -> list[Any]:
        futures = [store.submit_append_async("a", Entry.decided(f"p{i}", "value", i)) for i in range(5)]
        commits = store.stats.commits
        assert store.commit_queued()
        assert store.stats.commits == commits + 1
        return list(await asyncio.gather(*futures))

    got = asyncio.run(main())
    assert [e.decode("a") for e in got] == [0, 1, 2, 3, 4]


def test_an_unforeseen_error_in_a_group_is_isolated_and_the_writer_goes_on(store: PostgresStore) -> None:
    """A group runner that raises something unforeseen after its statement wrote: the batch is rolled back and
    run again isolated (the group under a SAVEPOINT, then each append alone), and the writer thread lives on —
    before, the error escaped the executor and the writer thread stopped for good."""
    from telo.journal.postgres_groups import append_group
    from telo.journal.postgres_ops import PgAppend

    for run in ("a", "b"):
        assert store.admit(Admission.of(run)).admitted
    executor = store._writer._executor
    calls = []

    def buggy(conn: Any, ops: list[PgAppend]) -> list[tuple[bool, Any]]:
        calls.append(len(ops))
        append_group(conn, ops)  # it wrote its rows ...
        raise RuntimeError("unforeseen")  # ... then a bug

    executor._groups[PgAppend] = buggy  # type: ignore[attr-defined]

    def submit() -> list[asyncio.Future[Any]]:
        return [store.submit_append_async("a", Entry.decided("p", "value", 1)),
                store.submit_append_async("b", Entry.decided("q", "value", 2))]

    first, second = one_batch(store, submit)
    assert first.decode("a") == 1 and second.decode("b") == 2  # each alone, after the group failed twice
    assert calls == [2, 2]  # the optimistic pass, then the isolated pass's group
    assert [e.path for e in store.read_entries("a")] == ["p"]  # once: the failed passes left nothing
    assert store.append("b", Entry.decided("later", "value", 3)).decode("b") == 3  # the writer still writes
