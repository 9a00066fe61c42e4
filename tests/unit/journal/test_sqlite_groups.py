"""SQLite journal: a batch's admissions, entries and completions as grouped multi-row statements
(:mod:`telo.journal.sqlite_lifecycle`, :mod:`telo.journal.sqlite_append`, ``telo.journal.batch_plan.plan``).

Each run's own operations keep their batch order, operations of different runs are grouped kind by kind, and
any other operation stays in place as a barrier. Every batch below is formed by holding the writer thread
(``Gate``) while the operations are queued, so that they commit as ONE batch."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from telo.durable.aio import AsyncStore
from telo.errors import TeloError
from telo.journal.batch_plan import GroupRunner, chunks, plan
from telo.journal.chain import ERR_DURABLE_CHAIN_BROKEN, ChainBroken, ClaimLost, WriteChain
from telo.journal.claims import Fence, Holder
from telo.journal.model import Admission, AdmitResult, Claim, Entry, Outcome, RunRecord
from telo.journal.sqlite import SqliteStore
from telo.journal.sqlite_append import AppendOp
from telo.journal.sqlite_lifecycle import AdmitOp, CompleteOp
from tests.unit.journal.batches import one_batch

LIVE_A = Holder.for_this_process("worker-a").to_text()  # both name this (live) process
LIVE_B = Holder.for_this_process("worker-b").to_text()
TTL = 60_000


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(str(tmp_path / "journal.db")) as s:
        yield s


def trace(store: SqliteStore) -> list[str]:
    """Every statement the writer connection runs from now on."""
    statements: list[str] = []
    store._writer.call(lambda conn: conn.set_trace_callback(statements.append))
    return statements


def admits(store: SqliteStore, statements: list[str]) -> list[str]:
    return [s for s in statements if s.startswith(f"INSERT OR IGNORE INTO {store._sql.runs} ")]


def completes(store: SqliteStore, statements: list[str]) -> list[str]:
    return [s for s in statements if s.startswith(f"UPDATE {store._sql.runs} SET status = ")]


def stored(store: SqliteStore, run: str) -> RunRecord:
    record = store.read_run(run)
    assert record is not None, run
    return record


# --- admissions ---------------------------------------------------------------------------------------------


def test_many_admissions_in_one_batch_are_one_statement(store: SqliteStore) -> None:
    old = store.admit(Admission.of("old", workflow="w-old"))
    assert old.admitted
    statements = trace(store)
    runs = [f"r{i}" for i in range(10)]

    def submit() -> list[asyncio.Future[Any]]:
        futures = [store.admit_async(Admission.of(run, workflow=f"w-{run}", inputs={"n": i}))
                   for i, run in enumerate(runs)]
        # a run that already exists: not admitted again, its stored record comes back
        futures.append(store.admit_async(Admission.of("old", workflow="w-new")))
        return futures

    got: list[AdmitResult] = one_batch(store, submit)
    for i, run in enumerate(runs):
        assert got[i].admitted, run
        assert got[i].record.run == run and got[i].record.workflow == f"w-{run}"
        assert got[i].record.decoded_inputs() == {"n": i}
        assert got[i].record == stored(store, run)  # what was returned is what was written
    again = got[-1]
    assert not again.admitted
    assert again.record == old.record == stored(store, "old")
    assert again.record.workflow == "w-old"
    inserts = admits(store, statements)
    assert len(inserts) == 1 and inserts[0].endswith("RETURNING run")  # eleven admissions, one statement
    assert store.stats.max_batch == 11


def test_more_admissions_than_one_statement_holds(store: SqliteStore) -> None:
    statements = trace(store)
    runs = [f"r{i:02d}" for i in range(45)]
    got: list[AdmitResult] = one_batch(store, lambda: [store.admit_async(Admission.of(r))
                                                       for r in runs])
    assert [g.record.run for g in got] == runs and all(g.admitted for g in got)
    assert all(g.record == stored(store, g.record.run) for g in got)
    assert chunks(45) == [32, 8, 4, 1]
    assert len(admits(store, statements)) == 4  # one statement per chunk


def test_the_same_run_admitted_twice_in_one_batch_admits_the_first(store: SqliteStore) -> None:
    statements = trace(store)

    def submit() -> list[asyncio.Future[Any]]:
        return [store.admit_async(Admission.of("x", workflow="first")),
                store.admit_async(Admission.of("y")),
                store.admit_async(Admission.of("x", workflow="second"))]

    first, other, second = one_batch(store, submit)
    assert first.admitted and first.record.workflow == "first"
    assert other.admitted and other.record.run == "y"
    assert not second.admitted and second.record.workflow == "first"
    assert second.record == stored(store, "x")
    # run one at a time (no multi-row INSERT … RETURNING for this group)
    assert not [s for s in admits(store, statements) if s.endswith("RETURNING run")]
    assert len(admits(store, statements)) == 3


# --- an admission with its first claim -----------------------------------------------------------------------


def test_an_admission_writes_its_claim_with_its_row(store: SqliteStore) -> None:
    now = 1_000_000
    result = store.admit(Admission.of("c"), claim=Claim(LIVE_A, now + TTL))
    assert result.admitted
    record = stored(store, "c")
    assert record.claim == Claim(LIVE_A, now + TTL)
    assert result.record.claim == record.claim
    assert result.record == record
    assert not store.claim("c", LIVE_B, TTL, now + 1)  # another live holder, while the claim is live
    assert stored(store, "c").claim == Claim(LIVE_A, now + TTL)
    assert store.renew("c", Fence(LIVE_A, 1), TTL, now + 2)  # its holder renews it (the admission's token 1)
    assert store.claim("c", LIVE_B, TTL, now + 2 + TTL)  # lapsed: another holder may take it
    # an admission of a run that exists keeps the stored claim, whatever it asks for
    again = store.admit(Admission.of("c"), claim=Claim(LIVE_A, now + 10 * TTL))
    assert not again.admitted
    assert again.record.claim == stored(store, "c").claim == Claim(LIVE_B, now + 2 + 2 * TTL)


def test_claimed_admissions_grouped_in_one_batch(store: SqliteStore) -> None:
    now = 2_000_000
    statements = trace(store)
    aio = AsyncStore(store)

    def submit() -> list[asyncio.Future[Any]]:
        futures: list[asyncio.Future[Any]] = []
        for i in range(6):
            assert aio.admits_queued
            futures.append(aio.submit_admission(Admission.of(f"c{i}"), LIVE_A, now + i))
        futures.append(store.admit_async(Admission.of("free")))  # no claim, same group
        return futures

    got: list[AdmitResult] = one_batch(store, submit)
    for i in range(6):
        assert got[i].admitted
        assert got[i].record.claim == Claim(LIVE_A, now + i + TTL)
        assert stored(store, f"c{i}").claim == Claim(LIVE_A, now + i + TTL)
        assert got[i].record == stored(store, f"c{i}")
        assert not store.claim(f"c{i}", LIVE_B, TTL, now + 10)
    assert got[-1].admitted and got[-1].record.claim is None and stored(store, "free").claim is None
    assert store.claim("free", LIVE_B, TTL, now)
    assert len(admits(store, statements)) == 1


# --- completions ------------------------------------------------------------------------------------------


def test_completions_of_many_runs_in_one_batch(store: SqliteStore) -> None:
    runs = [f"r{i:02d}" for i in range(40)]  # more than 32: several statements (32 + 8)
    for run in [*runs, "broken", "fine"]:
        assert store.admit(Admission.of(run), claim=Claim(LIVE_A, 10**13)).admitted
    broken = WriteChain("broken")
    broken.break_with(RuntimeError("an earlier deferred append failed"))
    fine = WriteChain("fine")
    statements = trace(store)

    def submit() -> list[asyncio.Future[Any]]:
        futures = [store.complete_async(run, Outcome.completed({"run": run})) for run in runs[:20]]
        futures.append(store.complete_async("ghost", Outcome.completed(1)))
        futures.append(store.complete_async("broken", Outcome.completed(1), chain=broken))
        futures.append(store.complete_async("fine", Outcome.failed("ERR_X", "it failed"), chain=fine))
        futures += [store.complete_async(run, Outcome.completed({"run": run})) for run in runs[20:]]
        return futures

    got = one_batch(store, submit)
    records: list[RunRecord] = got[:20] + got[23:]
    ghost, refused, failed = got[20:23]
    for run, record in zip(runs, records, strict=True):
        assert isinstance(record, RunRecord), (run, record)
        assert record.run == run and record.status == "completed"
        assert record.decoded_result() == {"run": run}
        assert record.claim is None  # released with the completion
        assert record == stored(store, run)
    assert isinstance(ghost, TeloError) and ghost.code == "ERR_DURABLE_RUN_NOT_FOUND"
    assert store.read_run("ghost") is None
    assert isinstance(refused, ChainBroken) and refused.code == ERR_DURABLE_CHAIN_BROKEN
    kept = stored(store, "broken")
    assert kept.status == "running" and kept.result is None and kept.claim == Claim(LIVE_A, 10**13)
    assert isinstance(failed, RunRecord) and failed.status == "failed"
    assert failed.error == {"code": "ERR_X", "message": "it failed"} and failed == stored(store, "fine")
    assert fine.broken is None
    # 42 completions sent (the ghost's included; the broken chain's refused before): 32 + 8 + 2 rows
    assert chunks(42) == [32, 8, 2]
    assert len(completes(store, statements)) == 3


def test_a_completion_after_a_lost_race_in_the_same_batch_is_refused(store: SqliteStore) -> None:
    for run in ("x", "y"):
        assert store.admit(Admission.of(run)).admitted
    store.append("x", Entry.decided("p", "value", "theirs"))  # another executor's value, already stored
    chain_x, chain_y = WriteChain("x"), WriteChain("y")

    def submit() -> list[asyncio.Future[Any]]:
        return [store.submit_deferred("x", Entry.decided("p", "value", "mine"), chain_x),
                store.submit_deferred("y", Entry.decided("p", "value", "mine"), chain_y),
                store.complete_async("x", Outcome.completed(1), chain=chain_x),
                store.complete_async("y", Outcome.completed(2), chain=chain_y)]

    appended_x, appended_y, completed_x, completed_y = one_batch(store, submit)
    assert isinstance(appended_x, Entry) and appended_x.decode("x") == "theirs"
    assert isinstance(chain_x.broken, ClaimLost)
    assert isinstance(completed_x, ChainBroken)
    assert stored(store, "x").status == "running"
    assert isinstance(appended_y, Entry) and appended_y.decode("y") == "mine"
    assert isinstance(completed_y, RunRecord) and completed_y.status == "completed"
    assert stored(store, "y").status == "completed"


# --- ordering: each run's order, barriers in place -------------------------------------------------------------


def test_each_runs_order_is_kept_and_barriers_stay_in_place(store: SqliteStore) -> None:
    sql = store._sql

    def look(conn: sqlite3.Connection) -> tuple[dict[str, str], dict[str, list[str]]]:
        """What a barrier sees of the batch so far (its own connection: the batch's open transaction)."""
        statuses = dict(conn.execute(f"SELECT run, status FROM {sql.runs}").fetchall())
        entries: dict[str, list[str]] = {}
        for run, path in conn.execute(f"SELECT run, path FROM {sql.entries} ORDER BY run, seq"):
            entries.setdefault(run, []).append(path)
        return statuses, entries

    def step(run: str, path: str) -> asyncio.Future[Entry]:
        return store.submit_append_async(run, Entry.decided(path, "value", f"{run}/{path}"))

    def submit() -> list[asyncio.Future[Any]]:
        return [
            store.admit_async(Admission.of("a")),  # 0
            step("a", "p0"),  # 1
            store.claim_async("b", LIVE_A, TTL, 1),  # 2: b is admitted only after it
            store.admit_async(Admission.of("b")),  # 3
            step("a", "p1"),  # 4
            step("b", "p0"),  # 5
            store.claim_async("a", LIVE_A, TTL, 1),  # 6: after a's admission, before its completion
            store._writer.submit_async(look),  # 7
            step("b", "p1"),  # 8
            store.complete_async("a", Outcome.completed("a")),  # 9
            store.admit_async(Admission.of("c")),  # 10
            step("c", "p0"),  # 11
            step("a", "p2"),  # 12: after a's completion (allowed: the run exists)
            store.complete_async("b", Outcome.completed("b")),  # 13
            store.claim_async("c", LIVE_A, TTL, 1),  # 14: between c's admission and completion
            store.complete_async("c", Outcome.completed("c")),  # 15
            store._writer.submit_async(look),  # 16
        ]

    got = one_batch(store, submit)
    assert not [g for g in got if isinstance(g, BaseException)], got
    assert got[2] is None  # b did not exist yet
    assert got[6] == 1 and got[14] == 1  # each run's first grant: fencing token 1
    # the barrier saw exactly what was queued before it
    assert got[7] == ({"a": "running", "b": "running"}, {"a": ["p0", "p1"], "b": ["p0"]})
    assert got[16] == ({"a": "completed", "b": "completed", "c": "completed"},
                       {"a": ["p0", "p1", "p2"], "b": ["p0", "p1"], "c": ["p0"]})
    # a completion after a claim releases it: had either claim run after its completion, it would stand
    assert stored(store, "a").claim is None and stored(store, "c").claim is None
    assert stored(store, "b").claim is None  # its claim came before its admission: nothing to claim
    for run, positions in (("a", [1, 4, 12]), ("b", [5, 8]), ("c", [11])):
        seqs = [got[k].seq for k in positions]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), (run, seqs)
        assert store.read_entries(run) == [got[k] for k in positions]
    assert stored(store, "a").decoded_result() == "a"


def test_a_runs_operations_out_of_the_usual_order_keep_their_order(store: SqliteStore) -> None:
    """Grouping runs admissions before entries before completions, but never across one run's own order: an
    append or a completion queued before its run's admission still runs before it (and fails)."""

    def submit() -> list[asyncio.Future[Any]]:
        return [store.admit_async(Admission.of("a")),
                store.submit_append_async("z", Entry.decided("early", "value", 1)),  # before z is admitted
                store.complete_async("y", Outcome.completed(1)),  # before y is admitted
                store.submit_append_async("a", Entry.decided("p0", "value", 0)),
                store.admit_async(Admission.of("z")),
                store.admit_async(Admission.of("y")),
                store.submit_append_async("z", Entry.decided("late", "value", 2))]

    admitted_a, early, completed_y, entry_a, admitted_z, admitted_y, late = one_batch(store, submit)
    assert admitted_a.admitted and admitted_z.admitted and admitted_y.admitted
    assert isinstance(early, TeloError) and early.code == "ERR_DURABLE_RUN_NOT_FOUND"
    assert isinstance(completed_y, TeloError) and completed_y.code == "ERR_DURABLE_RUN_NOT_FOUND"
    assert stored(store, "y").status == "running"
    assert store.read_entries("z") == [late] and store.read_entries("a") == [entry_a]


def test_a_failing_barrier_does_not_move_or_undo_its_neighbours(store: SqliteStore) -> None:
    sql = store._sql

    def half_done(conn: sqlite3.Connection) -> None:
        conn.execute(f"UPDATE {sql.runs} SET workflow = 'half' WHERE run = 'a'")
        raise RuntimeError("boom after a write")

    def count(conn: sqlite3.Connection) -> int:
        return int(conn.execute(f"SELECT count(*) FROM {sql.entries} WHERE run = 'a'").fetchone()[0])

    def submit() -> list[asyncio.Future[Any]]:
        return [store.admit_async(Admission.of("a")),
                store.submit_append_async("a", Entry.decided("p0", "value", 0)),
                store._writer.submit_async(half_done),
                store._writer.submit_async(count),
                store.submit_append_async("a", Entry.decided("p1", "value", 1)),
                store._writer.submit_async(count)]

    admitted, first, failed, before, second, after = one_batch(store, submit)
    assert admitted.admitted and isinstance(failed, RuntimeError)
    assert (before, after) == (1, 2)
    assert first.seq < second.seq
    assert stored(store, "a").workflow is None  # the barrier's own write was undone, alone
    assert [e.path for e in store.read_entries("a")] == ["p0", "p1"]


# --- the plan itself ---------------------------------------------------------------------------------------------

KINDS: tuple[type, ...] = (AdmitOp, AppendOp, CompleteOp)


def fake(store: SqliteStore, kind: str, run: str, n: int = 0) -> Callable[[sqlite3.Connection], Any]:
    """A real operation object (never run: plan looks only at its type and its run)."""
    if kind == "admit":
        return AdmitOp(store._sql, Admission.of(run), 0)
    if kind == "append":
        return AppendOp(store._sql, run, Entry.decided(f"p{n}", "value", n), None, 0)
    if kind == "complete":
        return CompleteOp(store._sql, run, (), None)
    return lambda conn: None  # a barrier


def plan_of(store: SqliteStore, fns: list[Callable[[sqlite3.Connection], Any]]
            ) -> list[tuple[list[int], GroupRunner | None]]:
    return plan(fns, store._writer._executor._groups)


def test_plan_groups_kind_by_kind_between_barriers(store: SqliteStore) -> None:
    groups = store._writer._executor._groups
    admit, append, complete = (groups[k] for k in KINDS)
    ops = [("admit", "a"), ("append", "a"), ("admit", "b"), ("append", "a"), ("complete", "a"), ("append", "b"),
           ("barrier", ""), ("append", "b"), ("complete", "b"), ("admit", "c"), ("append", "c"), ("complete", "c")]
    plan = plan_of(store, [fake(store, kind, run, i) for i, (kind, run) in enumerate(ops)])
    assert plan == [([0, 2], admit), ([1, 3, 5], append), ([4], complete), ([6], None),
                    ([9], admit), ([7, 10], append), ([8, 11], complete)]


def test_plan_takes_a_run_out_of_the_usual_order_in_rounds(store: SqliteStore) -> None:
    groups = store._writer._executor._groups
    admit, append, complete = (groups[k] for k in KINDS)
    ops = [("complete", "a"), ("append", "a"), ("admit", "b"), ("append", "b"), ("admit", "a"), ("complete", "b")]
    plan = plan_of(store, [fake(store, kind, run, i) for i, (kind, run) in enumerate(ops)])
    # round 1: b's admission, b's append, a's and b's completions; round 2: a's append; round 3: a's admission
    assert plan == [([2], admit), ([3], append), ([0, 5], complete), ([1], append), ([4], admit)]


def test_plan_invariants_on_random_batches(store: SqliteStore) -> None:
    groups = store._writer._executor._groups
    kind_of_runner = {id(groups[k]): k for k in KINDS}
    names = ["admit", "append", "complete", "barrier"]
    rng = random.Random(20261130)
    for _ in range(300):
        size = rng.randint(1, 40)
        ops = [(rng.choices(names, weights=[3, 6, 3, 1])[0], f"r{rng.randint(0, 5)}") for _ in range(size)]
        fns = [fake(store, kind, run, i) for i, (kind, run) in enumerate(ops)]
        plan = plan_of(store, fns)
        order = [k for positions, _ in plan for k in positions]
        assert sorted(order) == list(range(size)), (ops, plan)  # each operation exactly once
        for positions, runner in plan:
            if runner is None:
                assert len(positions) == 1 and ops[positions[0]][0] == "barrier"
            else:
                assert {type(fns[k]) for k in positions} == {kind_of_runner[id(runner)]}
        for k, (kind, _) in enumerate(ops):
            if kind == "barrier":
                assert order.index(k) == k, (ops, plan)  # all before it before, all after it after
        for run in {run for kind, run in ops if kind != "barrier"}:
            mine = [k for k in order if ops[k][1] == run and ops[k][0] != "barrier"]
            assert mine == sorted(mine), (run, ops, plan)  # the run's own order
        for (_, r1), (_, r2) in pairwise(plan):
            assert r1 is None or r1 is not r2, (ops, plan)  # one group per kind per round
        # a run's operations in the usual order (admit, appends, complete) in each segment: one group per kind
        segment: list[tuple[list[int], GroupRunner | None]] = []
        for entry in [*plan, ([], None)]:
            if entry[1] is not None:
                segment.append(entry)
                continue
            per_run: dict[str, list[int]] = {}
            for positions, _ in segment:
                for k in positions:
                    per_run.setdefault(ops[k][1], []).append(names.index(ops[k][0]))
            if all(kinds == sorted(kinds) for kinds in per_run.values()):
                runners = [runner for _, runner in segment]
                assert len(runners) == len(set(runners)), (ops, plan)
            segment = []


# --- seq bases remembered between batches (SeqBases) ----------------------------------------------------------


def _seqs_of(store: SqliteStore, run: str) -> list[int]:
    return [e.seq or 0 for e in store.read_entries(run)]


def _append_batch(store: SqliteStore, run: str, paths: list[str], *extra: Callable[[sqlite3.Connection], Any]
                  ) -> list[Any]:
    """Append ``paths`` to ``run`` as ONE batch — then run ``extra`` operations in it — formed WITHOUT a
    barrier: the writer thread is kept waiting on its connection lock (a Gate's own operation would be a
    barrier, which makes the writer forget the seq bases)."""

    async def main() -> list[Any]:
        batches = store.stats.commits + store.stats.failed_batches
        lock = store._writer._conn_lock
        lock.acquire()
        try:
            futures: list[asyncio.Future[Any]] = [
                store.submit_append_async(run, Entry.decided(p, "value", p)) for p in paths]
            futures += [store._writer.submit_async(fn) for fn in extra]
        finally:
            lock.release()
        out = await asyncio.gather(*futures, return_exceptions=True)
        assert store.stats.commits + store.stats.failed_batches == batches + 1
        return list(out)

    return asyncio.run(main())


def _assert_increasing(store: SqliteStore, run: str, count: int) -> None:
    seqs = _seqs_of(store, run)  # in seq order
    assert len(seqs) == count and len(set(seqs)) == count, seqs


def test_a_group_append_reads_no_seq_base_it_remembers(store: SqliteStore) -> None:
    statements = trace(store)
    store.admit(Admission.of("r"))  # admitted just now: base 0
    _append_batch(store, "r", ["a0", "a1"])
    _append_batch(store, "r", ["b0", "b1"])
    assert not [s for s in statements if "json_group_object" in s]  # every base came from memory
    assert _seqs_of(store, "r") == [1, 2, 3, 4]


def test_entries_another_connection_committed_are_not_overwritten(store: SqliteStore) -> None:
    store.admit(Admission.of("r"))
    _append_batch(store, "r", ["a0", "a1"])  # remembered: base 2
    other = sqlite3.connect(store.path, isolation_level=None)
    try:  # another process appends (its own statement numbers the entry)
        other.execute(store._sql.append, ("r", "x", "decision", "value", None, '"x"', 2, None, None))
    finally:
        other.close()
    _append_batch(store, "r", ["b0", "b1"])
    _assert_increasing(store, "r", 5)
    assert [e.path for e in store.read_entries("r")] == ["a0", "a1", "x", "b0", "b1"]


def test_an_entry_written_by_an_unknown_writer_operation_is_not_overwritten(store: SqliteStore) -> None:
    store.admit(Admission.of("r"))
    _append_batch(store, "r", ["a0", "a1"])
    store._writer.call(lambda conn: conn.execute(store._sql.insert_entry,
                                                 ("r", "legacy", 9, "decision", "value", None, '"l"', 2)))
    _append_batch(store, "r", ["b0"])
    assert _seqs_of(store, "r") == [1, 2, 9, 10]


def test_a_group_with_an_ignored_row_leaves_no_seq_to_reuse(store: SqliteStore) -> None:
    store.admit(Admission.of("r"))
    _append_batch(store, "r", ["a0", "a1"])
    _append_batch(store, "r", ["b0", "a1", "b1"])  # a1 is there already (first writer wins)
    _append_batch(store, "r", ["c0", "c1"])
    _assert_increasing(store, "r", 6)


def test_a_lost_batch_leaves_nothing_to_reuse(store: SqliteStore) -> None:
    store.admit(Admission.of("r"))
    _append_batch(store, "r", ["a0"])

    def fail(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("boom")

    def lose_the_batch(conn: sqlite3.Connection) -> None:
        conn.execute("ROLLBACK")  # as SQLite does on SQLITE_FULL or an I/O error
        raise sqlite3.OperationalError("disk I/O error")

    outcomes = _append_batch(store, "r", ["b0", "b1"], lose_the_batch)
    assert all(isinstance(o, TeloError) for o in outcomes)  # the whole batch failed: nothing of it committed
    assert _seqs_of(store, "r") == [1]
    _append_batch(store, "r", ["c0"])
    _assert_increasing(store, "r", 2)  # numbered anew or above the lost batch's seqs: never below or reused
