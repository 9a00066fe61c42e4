"""Async access to a synchronous journal store.

Store calls block (a file fsync, a SQLite group commit, a PostgreSQL round trip), so the event loop hands
them to worker threads. A store that declares :class:`~telo.journal.store.GroupCommitStore` (SQLite) has its
appends, admissions, claims, parks, unparks and completions queued for its group commit from the loop's own
thread instead, each returning an asyncio future: a hundred runs writing at once wait on one commit without
holding a thread each. A store whose calls never block (``Store.inline_calls``: the memory store) is called
inline.

Two measured rules (benchmarks/durable.py) for the other calls:

- a run-record read (``read_run``, made before every step's effect for the cancel check) is called inline when
  the store says it never waits for a writer (``Store.inline_reads``: SQLite's pooled WAL readers) — cheaper
  than the two thread hand-offs of ``to_thread``, which cost more than the read itself and far more on a loaded
  machine;
- the other blocking calls go to a dedicated pool with room for many: a SQLite write made there (a renewal,
  an update) blocks its thread until its group commit, so the default executor's few threads (cores + 4)
  would cap how many runs' writes share one commit.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from telo.clock import SYSTEM_CLOCK
from telo.journal.chain import WriteChain
from telo.journal.claims import Fence
from telo.journal.model import Admission, AdmitResult, Claim, Entry, Outcome, Parked, RunRecord
from telo.journal.queues import QueueLimits
from telo.journal.store import GroupCommitStore, Store

T = TypeVar("T")

# Threads mostly wait (on a group commit, a socket); created on demand, so the size costs nothing idle.
_STORE_THREADS = ThreadPoolExecutor(max_workers=128, thread_name_prefix="telo-store")


class AsyncStore:
    def __init__(self, store: Store) -> None:
        self.sync = store
        self._inline = store.inline_calls
        self._inline_reads = store.inline_calls or store.inline_reads
        # The store's group-commit operations, if it has them (checked once: a run's every step uses them).
        self._group: GroupCommitStore | None = store if isinstance(store, GroupCommitStore) else None

    @property
    def claim_ttl_ms(self) -> int:
        """The lease of this journal's claims (its ``claimTtl``; 60 s by default)."""
        return self.sync.claim_ttl_ms

    def chain(self, run: str, fence: Fence | None = None) -> WriteChain | None:
        """A chain for one execution's deferred appends (telo.journal.chain), or None when this store
        cannot defer them (it has no ordered group commit): then every append is awaited."""
        return WriteChain(run, fence) if self._group is not None else None

    def commit_queued(self) -> bool:
        """Commit the queued writes right here, on the loop's thread, if the store's writer is idle — for an
        execution about to wait for them while no other runs in this process (the loop has nothing else to
        do; a thread hand-off, and under the GIL the writer's wait to run at all, would only add latency).
        True if it committed them (their futures settle in the loop's next iteration)."""
        return self._group is not None and self._group.commit_queued()

    def append_deferred(self, run: str, entry: Entry, chain: WriteChain) -> asyncio.Future[Entry]:
        """Queue an append of ``chain`` for the group commit without waiting for it (call on the loop thread);
        the future settles once its batch committed. Only for a store :meth:`chain` returned a chain for."""
        assert self._group is not None
        return self._group.submit_deferred(run, entry, chain)

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._inline:
            return fn(*args, **kwargs)
        # as asyncio.to_thread, on the store pool: the call sees this task's context (an ambient transaction)
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(_STORE_THREADS, call)

    # The writes below go to the group commit when the store has one (no thread), else to a thread. Queued on
    # the loop thread, they see this task's ambient transaction, if any; their futures are settled with the
    # rest of their batch in one loop wake-up.

    async def append(self, run: str, entry: Entry, fence: Fence | None = None) -> Entry:
        if self._group is not None:
            return await self._group.submit_append_async(run, entry, fence=fence)
        return await self._call(self.sync.append, run, entry, fence=fence)

    async def admit(self, admission: Admission) -> AdmitResult:
        if self._group is not None:
            return await self._group.admit_async(admission)
        return await self._call(self.sync.admit, admission)

    async def admit_granted(self, admission: Admission, holder: str, now_ms: int, queues: Mapping[str, QueueLimits],
                            granted: Callable[[RunRecord, Fence], None]) -> AdmitResult:
        """A queued start's admission and its first grant in one journal operation (:meth:`Store.admit_granted`,
        issue 16): the admission, once durable; ``granted(record, fence)`` is called if the queue granted the run —
        on SQLite as soon as the writer decided it, before the commit (the execution's writes queue behind it)."""
        asked = SYSTEM_CLOCK.monotonic()  # real time, as in claim()
        told = False
        if self._group is not None:
            decided: asyncio.Future[tuple[AdmitResult, RunRecord | None]] = asyncio.get_running_loop().create_future()
            committed = self._group.admit_granted_async(admission, holder, self.claim_ttl_ms, now_ms, queues,
                                                        decided=decided)
            await asyncio.wait((decided, committed), return_when=asyncio.FIRST_COMPLETED)
            early = decided.result()[1] if decided.done() else None
            if early is not None:
                told = True
                granted(early, Fence(holder, early.fence, asked))
            admitted, record = await committed
        else:
            admitted, record = await self._call(self.sync.admit_granted, admission, holder, self.claim_ttl_ms,
                                                now_ms, queues)
        if record is not None and not told:
            granted(record, Fence(holder, record.fence, asked))
        return admitted

    @property
    def admits_queued(self) -> bool:
        """Whether :meth:`submit_admission` can queue an admission (the store has an asynchronous group commit)."""
        return self._group is not None

    def submit_admission(self, admission: Admission, holder: str, now_ms: int) -> asyncio.Future[AdmitResult]:
        """Queue a new run's admission, claimed by ``holder`` (fencing token 1) for the journal's lease, for the
        group commit and return at once (only when :attr:`admits_queued`): the future settles once it
        committed — admitted means claimed. The body's own writes, queued after it, commit after it (FIFO per
        run)."""
        assert self._group is not None
        return self._group.admit_async(admission, claim=Claim(holder, now_ms + self.claim_ttl_ms))

    async def read_run(self, run: str) -> RunRecord | None:
        if self._inline_reads:
            return self.sync.read_run(run)
        if self._group is not None:
            return await self._group.read_run_async(run)
        return await self._call(self.sync.read_run, run)

    async def run_status(self, run: str, *, shared: bool = True) -> str | None:
        """The run's status, None if unknown: what a cancel check reads (SQLite: one read per loop iteration
        answers every run that asks in it — unless not ``shared``: a lone execution reads at once, rather
        than let the loop iterate, and the writer thread take the GIL, in the middle of its body)."""
        if self._inline_reads and not shared:
            record = self.sync.read_run(run)
            return None if record is None else record.status
        if self._group is not None:
            return await self._group.status_async(run)
        record = await self.read_run(run)
        return None if record is None else record.status

    async def runs_of_queue(self, queue: str) -> list[RunRecord]:
        """:meth:`Store.runs_of_queue` (what may hold the queue's slots; telo.kinds.fair_share reads it)."""
        if self._inline_reads:
            return self.sync.runs_of_queue(queue)
        return await self._call(self.sync.runs_of_queue, queue)

    async def read_entries(self, run: str) -> list[Entry]:
        return await self._call(self.sync.read_entries, run)

    async def read_entries_in_order(self, run: str) -> list[Entry]:
        return await self._call(self.sync.read_entries_in_order, run)

    async def park(self, run: str, parked: Parked, chain: WriteChain | None = None,
                   fence: Fence | None = None) -> RunRecord:
        if self._group is not None:  # a chain (only a group-commit store makes one) brings its fence
            return await self._group.park_async(run, parked, chain=chain, fence=fence)
        return await self._call(self.sync.park, run, parked, fence=fence)

    async def unpark(self, run: str) -> bool:
        if self._group is not None:
            return await self._group.unpark_async(run)
        return await self._call(self.sync.unpark, run)

    def submit_complete(self, run: str, outcome: Outcome, chain: WriteChain) -> asyncio.Future[RunRecord]:
        """Queue the completion behind ``chain``'s deferred appends: it commits only if they all did, and
        needs no wait for them first (FIFO group commit). Only for a store :meth:`chain` returned a chain for."""
        assert self._group is not None
        return self._group.complete_async(run, outcome, chain=chain)

    async def complete(self, run: str, outcome: Outcome, fence: Fence | None = None) -> RunRecord:
        if self._group is not None:
            return await self._group.complete_async(run, outcome, fence=fence)
        return await self._call(self.sync.complete, run, outcome, fence=fence)

    async def claim(self, run: str, holder: str, now_ms: int) -> Fence | None:
        """Take the claim for the journal's lease: the fence an execution then writes through, or None if
        refused."""
        asked = SYSTEM_CLOCK.monotonic()  # real time, as the renewals that count the lease from it (renewals.py)
        if self._group is not None:
            token = await self._group.claim_async(run, holder, self.claim_ttl_ms, now_ms)
        else:
            token = await self._call(self.sync.claim, run, holder, self.claim_ttl_ms, now_ms)
        return None if token is None else Fence(holder, token, asked)

    async def claim_due(self, holder: str, now_ms: int, limit: int, *, only: Sequence[str] | None = None,
                        workflows: Sequence[str] | None = None, skip: Collection[str] = (),
                        queues: Mapping[str, QueueLimits] | None = None) -> list[tuple[RunRecord, Fence]]:
        """Dequeue up to ``limit`` due runs for the journal's lease (:meth:`Store.claim_due`; ``queues``: the limits
        of the queues whose runs it may grant, issue 16): each started run's record, with the fence its execution
        then writes through."""
        asked = SYSTEM_CLOCK.monotonic()  # real time, as in claim()
        if self._group is not None:
            granted = await self._group.claim_due_async(holder, self.claim_ttl_ms, now_ms, limit, only=only,
                                                        workflows=workflows, skip=skip, queues=queues)
        else:
            granted = await self._call(self.sync.claim_due, holder, self.claim_ttl_ms, now_ms, limit, only=only,
                                       workflows=workflows, skip=skip, queues=queues)
        return [(record, Fence(holder, record.fence, asked)) for record in granted]

    async def renew(self, run: str, fence: Fence, now_ms: int) -> bool:
        renewed: bool = await self._call(self.sync.renew, run, fence, self.claim_ttl_ms, now_ms)
        return renewed

    async def release(self, run: str, fence: Fence) -> None:
        """Release the claim ``fence`` holds (nothing if it holds it no more)."""
        await self._call(self.sync.release, run, fence.holder, fence.token)

    async def update_run(self, run: str, *, fence: Fence | None = None, **fields: Any) -> RunRecord:
        if self._group is not None:
            return await self._group.update_run_async(run, fence=fence, **fields)
        return await self._call(lambda: self.sync.update_run(run, fence=fence, **fields))

    async def deliver(self, token: str, value: str | None, v: int | None) -> str | None:
        return await self._call(self.sync.deliver, token, value, v)

    async def due_runs(self, now_ms: int, limit: int) -> list[str]:
        return await self._call(self.sync.due_runs, now_ms, limit)

    async def run_parked_on(self, token: str) -> RunRecord | None:
        return await self._call(self.sync.run_parked_on, token)

    def writes_inside(self, zone: Any) -> bool:
        return self.sync.writes_inside(zone)
