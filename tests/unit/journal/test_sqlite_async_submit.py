"""SQLite journal: appends submitted from an event loop (``submit_append_async``), whose asyncio futures the
writer settles a whole batch at a time — results, per-append errors, abandoned awaits, a closed loop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from telo.errors import TeloError
from telo.journal.model import Entry
from telo.journal.sqlite import SqliteStore
from tests.unit.journal.batches import Gate
from tests.unit.journal.test_sqlite import _admit


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(str(tmp_path / "journal.db")) as s:
        yield s


def test_a_batch_of_async_appends_resolves_in_order(store: SqliteStore) -> None:
    _admit(store)

    async def main() -> list[Entry]:
        gate = Gate(store)  # everything submitted now forms the next batch
        futures = [store.submit_append_async("r1", Entry.decided(f"p{i}", "value", i)) for i in range(50)]
        await asyncio.to_thread(gate.open)
        stored = await asyncio.gather(*futures)
        assert store.stats.max_batch == 50  # ... and it committed as one
        return stored

    stored = asyncio.run(main())
    assert [e.path for e in stored] == [f"p{i}" for i in range(50)]
    assert [e.seq for e in stored] == sorted(e.seq or 0 for e in stored)
    assert store.read_entries("r1") == stored


def test_an_append_that_fails_fails_alone(store: SqliteStore) -> None:
    _admit(store)

    async def main() -> tuple[list[Entry], BaseException]:
        gate = Gate(store)
        ok1 = store.submit_append_async("r1", Entry.decided("a", "value", 1))
        ghost = store.submit_append_async("ghost", Entry.decided("a", "value", 1))  # no such run
        ok2 = store.submit_append_async("r1", Entry.decided("b", "value", 2))
        await asyncio.to_thread(gate.open)
        with pytest.raises(TeloError) as exc:
            await ghost
        return [await ok1, await ok2], exc.value

    stored, error = asyncio.run(main())
    assert [e.path for e in stored] == ["a", "b"]
    assert isinstance(error, TeloError)
    assert [e.path for e in store.read_entries("r1")] == ["a", "b"]


def test_an_append_abandoned_before_its_batch_is_not_written(store: SqliteStore) -> None:
    _admit(store)

    async def main() -> Entry:
        gate = Gate(store)
        dropped = store.submit_append_async("r1", Entry.decided("dropped", "value", 1))
        kept = store.submit_append_async("r1", Entry.decided("kept", "value", 2))
        dropped.cancel()
        await asyncio.to_thread(gate.open)
        return await kept

    assert asyncio.run(main()).path == "kept"
    assert [e.path for e in store.read_entries("r1")] == ["kept"]


def test_a_loop_closed_before_its_batch_settles_does_not_stop_the_writer(store: SqliteStore) -> None:
    _admit(store)
    gate = Gate(store)
    loop = asyncio.new_event_loop()

    async def submit() -> asyncio.Future[Entry]:
        return store.submit_append_async("r1", Entry.decided("orphan", "value", 1))

    loop.run_until_complete(submit())
    loop.close()
    gate.open()  # the batch commits; settling on the closed loop is skipped
    assert store.append("r1", Entry.decided("after", "value", 2)).path == "after"
    assert [e.path for e in store.read_entries("r1")] == ["orphan", "after"]


def test_inside_a_transaction_the_append_joins_it(store: SqliteStore) -> None:
    _admit(store)

    async def main() -> None:
        with pytest.raises(RuntimeError), store.transaction():
            fut = store.submit_append_async("r1", Entry.decided("rolled", "value", 1))
            assert fut.done() and (await fut).path == "rolled"
            raise RuntimeError("roll back")
        kept = store.submit_append_async("r1", Entry.decided("kept", "value", 2))
        assert (await kept).path == "kept"

    asyncio.run(main())
    assert [e.path for e in store.read_entries("r1")] == ["kept"]


# --- statuses asked for from an event loop (the per-step cancel check) ---------------------------------------


def test_statuses_asked_in_one_loop_iteration_share_one_read(store: SqliteStore,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for run in ("a", "b", "c"):
        _admit(store, run)
    store.update_run("b", status="cancelled")
    reads: list[list[str]] = []
    real = store.read_statuses

    def counted(runs: list[str]) -> dict[str, str]:
        reads.append(list(runs))
        return real(runs)

    monkeypatch.setattr(store, "read_statuses", counted)

    async def main() -> list[str | None]:
        return list(await asyncio.gather(*(store.status_async(r) for r in ("a", "b", "c", "a", "ghost"))))

    assert asyncio.run(main()) == ["running", "cancelled", "running", "running", None]
    assert reads == [["a", "b", "c", "ghost"]]


def test_a_status_read_that_fails_fails_every_asker(store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(runs: list[str]) -> dict[str, str]:
        raise TeloError("ERR_JOURNAL_READ_FAILED", "disk gone")

    monkeypatch.setattr(store, "read_statuses", broken)

    async def main() -> list[object]:
        return list(await asyncio.gather(store.status_async("a"), store.status_async("b"), return_exceptions=True))

    assert all(isinstance(e, TeloError) for e in asyncio.run(main()))


def test_a_status_inside_a_transaction_is_read_at_once(store: SqliteStore) -> None:
    _admit(store)

    async def main() -> None:
        with store.transaction():
            fut = store.status_async("r1")
            assert fut.done() and fut.result() == "running"

    asyncio.run(main())


# --- lifecycle writes from an event loop -----------------------------------------------------------------------


def test_lifecycle_writes_from_a_loop_share_the_group_commit(store: SqliteStore) -> None:
    from telo.journal.model import Admission, Outcome

    async def main() -> None:
        admitted = await asyncio.gather(*(store.admit_async(Admission.of(f"r{i}")) for i in range(20)))
        assert all(a.admitted for a in admitted)
        again = await store.admit_async(Admission.of("r0"))
        assert not again.admitted and again.record.run == "r0"
        assert await store.claim_async("r1", "holder-a", 60_000, 1)
        assert not await store.claim_async("r1", "holder-b", 60_000, 2)
        record = await store.complete_async("r1", Outcome.completed({"ok": True}))
        assert record.status == "completed"
        with pytest.raises(TeloError):  # the operation's own error reaches its caller
            await store.complete_async("ghost", Outcome.completed(1))

    asyncio.run(main())
    assert store.stats.max_batch > 1
    record = store.read_run("r1")
    assert record is not None and record.status == "completed"


def test_the_store_declares_its_group_commit_and_the_async_runner_uses_it(store: SqliteStore) -> None:
    from telo.durable.aio import AsyncStore
    from telo.journal.memory import MemoryStore
    from telo.journal.store import GroupCommitStore

    assert isinstance(store, GroupCommitStore)
    assert not isinstance(MemoryStore(), GroupCommitStore)
    assert AsyncStore(store).admits_queued and not AsyncStore(MemoryStore()).admits_queued


def test_lifecycle_writes_from_a_loop_refuse_an_ambient_transaction_at_once(store: SqliteStore) -> None:
    from telo.journal.model import Admission, Outcome, Parked

    async def main() -> None:
        _admit(store)
        queued = (lambda: store.admit_async(Admission.of("r2")),
                  lambda: store.claim_async("r1", "holder", 60_000, 1),
                  lambda: store.park_async("r1", Parked("p", "res", "tok", None)),
                  lambda: store.unpark_async("r1"),
                  lambda: store.complete_async("r1", Outcome.completed(1)))
        for submit in queued:
            with store.transaction(), pytest.raises(TeloError) as exc:
                submit()
            assert exc.value.code == "ERR_JOURNAL_IN_TRANSACTION"

    asyncio.run(main())
    record = store.read_run("r1")
    assert record is not None and record.status == "running" and record.claim is None
    assert store.read_run("r2") is None


def test_commit_queued_commits_on_the_calling_thread_in_fifo_order(store: SqliteStore) -> None:
    """A lone run about to wait for its queued writes commits them itself (no hand-off to the writer)."""
    _admit(store)

    async def main() -> list[Entry]:
        # Queued while the writer thread is held: the writer is busy, so nothing is taken from under it.
        gate = Gate(store)
        first = [store.submit_append_async("r1", Entry.decided(f"a{i}", "value", i)) for i in range(3)]
        assert store.commit_queued() is False
        await asyncio.to_thread(gate.open)
        await asyncio.gather(*first)
        while store._writer._busy:  # it settles a batch's futures before it lets go of the batch
            await asyncio.sleep(0.001)
        inline = store.stats.inline_commits
        later = [store.submit_append_async("r1", Entry.decided(f"b{i}", "value", i)) for i in range(5)]
        assert store.commit_queued() is True  # the writer is idle: committed right here ...
        assert store.stats.inline_commits == inline + 1
        assert all(not f.done() for f in later)  # ... and settled on this loop's next iteration
        return list(await asyncio.gather(*first, *later))

    stored = asyncio.run(main())
    assert [e.path for e in stored] == [f"a{i}" for i in range(3)] + [f"b{i}" for i in range(5)]
    assert [e.seq for e in store.read_entries("r1")] == sorted(e.seq or 0 for e in stored)
    assert store.commit_queued() is False  # nothing queued


def test_what_a_loop_queues_in_one_go_is_committed_once_by_the_writer(store: SqliteStore) -> None:
    """Writes queued from a loop wake the writer thread once, at the loop's next iteration (its kick): the
    writer commits them all in one batch — unless the loop committed them itself first."""
    _admit(store)

    inline = store.stats.inline_commits

    async def main() -> tuple[list[Entry], int]:
        commits = store.stats.commits
        futures = [store.submit_append_async("r1", Entry.decided(f"p{i}", "value", i)) for i in range(20)]
        assert not any(f.done() for f in futures)
        assert store._writer.stats.commits == commits  # not woken yet: the writer committed nothing
        stored = await asyncio.wait_for(asyncio.gather(*futures), 10)  # the loop iterates: the kick wakes it
        return stored, store.stats.commits - commits

    stored, commits = asyncio.run(main())
    assert [e.path for e in stored] == [f"p{i}" for i in range(20)]
    assert commits == 1 and store.stats.inline_commits == inline  # by the writer thread


def test_what_the_loop_commits_itself_leaves_the_writer_asleep(store: SqliteStore) -> None:
    _admit(store)

    async def main() -> int:
        commits, inline = store.stats.commits, store.stats.inline_commits
        futures = [store.submit_append_async("r1", Entry.decided(f"p{i}", "value", i)) for i in range(5)]
        assert store.commit_queued()  # the lone execution's way: on the loop's own thread
        await asyncio.gather(*futures)
        await asyncio.sleep(0.05)  # the kick runs: nothing queued any more, so it wakes nobody
        assert store.stats.inline_commits == inline + 1
        return store.stats.commits - commits

    assert asyncio.run(main()) == 1
    assert [e.path for e in store.read_entries("r1")] == [f"p{i}" for i in range(5)]
