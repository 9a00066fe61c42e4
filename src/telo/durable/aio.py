"""Async access to a synchronous journal store.

Store calls block (a file fsync, a SQLite group commit, a PostgreSQL round trip), so the event loop hands
them to worker threads; a SQLite store's ``submit_append`` returns a future directly, so a hundred runs
appending at once wait on one group commit without holding a thread each. The memory store does no I/O and
is called inline.

Two measured exceptions (benchmarks/durable.py) for the SQLite store:

- a run-record read (``read_run``, made before every step's effect for the cancel check) is called inline: it
  is one primary-key read on a pooled WAL connection, which never waits for the writer — cheaper than the
  two thread hand-offs of ``to_thread``, which cost more than the read itself and far more on a loaded machine;
- the other blocking calls go to a dedicated pool with room for many: a lifecycle write (claim, complete,
  ...) blocks its thread until its group commit, so the default executor's few threads (cores + 4) would cap
  how many runs' writes share one commit.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from telo.clock import SYSTEM_CLOCK
from telo.journal.chain import WriteChain
from telo.journal.claims import DEFAULT_TTL_MS, Fence
from telo.journal.model import Admission, AdmitResult, Claim, Entry, Outcome, Parked, RunRecord
from telo.journal.store import Store

T = TypeVar("T")

# Threads mostly wait (on a group commit, a socket); created on demand, so the size costs nothing idle.
_STORE_THREADS = ThreadPoolExecutor(max_workers=128, thread_name_prefix="telo-store")


class AsyncStore:
    def __init__(self, store: Store) -> None:
        self.sync = store
        self._inline = store.kind == "memory"
        self._inline_reads = self._inline or store.kind == "sqlite"
        self._submit = getattr(store, "submit_append", None)
        self._submit_async = getattr(store, "submit_append_async", None)
        self._status_async = getattr(store, "status_async", None)
        self._lifecycle_async = getattr(store, "lifecycle_async", None)
        self._submit_deferred = getattr(store, "submit_deferred", None)
        self._commit_queued = getattr(store, "commit_queued", None)

    @property
    def claim_ttl_ms(self) -> int:
        """The lease of this journal's claims (its ``claimTtl``; 60 s by default)."""
        return int(getattr(self.sync, "claim_ttl_ms", DEFAULT_TTL_MS))

    def chain(self, run: str, fence: Fence | None = None) -> WriteChain | None:
        """A chain for one execution's deferred appends (telo.journal.chain), or None when this store
        cannot defer them (it has no ordered group commit): then every append is awaited."""
        return WriteChain(run, fence) if self._submit_deferred is not None else None

    def commit_queued(self) -> None:
        """Commit the queued writes right here, on the loop's thread, if the store's writer is idle — for an
        execution about to wait for them while no other runs in this process (the loop has nothing else to
        do; a thread hand-off, and under the GIL the writer's wait to run at all, would only add latency)."""
        if self._commit_queued is not None:
            self._commit_queued()

    def append_deferred(self, run: str, entry: Entry, chain: WriteChain) -> asyncio.Future[Entry]:
        """Queue an append of ``chain`` for the group commit without waiting for it (call on the loop thread);
        the future settles once its batch committed. Only for a store :meth:`chain` returned a chain for."""
        assert self._submit_deferred is not None
        future: asyncio.Future[Entry] = self._submit_deferred(run, entry, chain)
        return future

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._inline:
            return fn(*args, **kwargs)
        # as asyncio.to_thread, on the store pool: the call sees this task's context (an ambient transaction)
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(_STORE_THREADS, call)

    async def append(self, run: str, entry: Entry, fence: Fence | None = None) -> Entry:
        if self._submit_async is not None:
            # Called on the loop thread, so the store sees this task's ambient transaction, if any; the future
            # is settled with the rest of its group commit in one loop wake-up.
            appended: Entry = await self._submit_async(run, entry, fence=fence)
            return appended
        if self._submit is not None:
            # Called on the loop thread, so the store sees this task's ambient transaction, if any.
            stored: Entry = await asyncio.wrap_future(self._submit(run, entry, fence=fence))
            return stored
        return await self._call(self.sync.append, run, entry, fence=fence)

    async def _lifecycle(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A lifecycle write: submitted to a SQLite store's group commit (no thread), else on a thread."""
        if self._lifecycle_async is not None:
            return await self._lifecycle_async(method, *args, **kwargs)
        return await self._call(getattr(self.sync, method), *args, **kwargs)

    async def admit(self, admission: Admission) -> AdmitResult:
        admitted: AdmitResult = await self._lifecycle("admit", admission)
        return admitted

    @property
    def admits_queued(self) -> bool:
        """Whether :meth:`submit_admission` can queue an admission (the store has an asynchronous group commit)."""
        return self._lifecycle_async is not None

    def submit_admission(self, admission: Admission, holder: str, now_ms: int) -> asyncio.Future[AdmitResult]:
        """Queue a new run's admission, claimed by ``holder`` (fencing token 1) for the journal's lease, for the
        group commit and return at once (only when :attr:`admits_queued`): the future settles once it
        committed — admitted means claimed. The body's own writes, queued after it, commit after it (FIFO per
        run)."""
        assert self._lifecycle_async is not None
        admitting: asyncio.Future[AdmitResult] = self._lifecycle_async(
            "admit", admission, claim=Claim(holder, now_ms + self.claim_ttl_ms))
        return admitting

    async def read_run(self, run: str) -> RunRecord | None:
        if self._inline_reads:
            return self.sync.read_run(run)
        return await self._call(self.sync.read_run, run)

    async def run_status(self, run: str, *, shared: bool = True) -> str | None:
        """The run's status, None if unknown: what a cancel check reads (SQLite: one read per loop iteration
        answers every run that asks in it — unless not ``shared``: a lone execution reads at once, rather
        than let the loop iterate, and the writer thread take the GIL, in the middle of its body)."""
        if self._inline_reads and not shared:
            record = self.sync.read_run(run)
            return None if record is None else record.status
        if self._status_async is not None:
            status: str | None = await self._status_async(run)
            return status
        record = await self.read_run(run)
        return None if record is None else record.status

    async def read_entries(self, run: str) -> list[Entry]:
        return await self._call(self.sync.read_entries, run)

    async def park(self, run: str, parked: Parked, chain: WriteChain | None = None,
                   fence: Fence | None = None) -> RunRecord:
        if chain is not None:  # only a store that made the chain takes it (and its fence)
            return await self._lifecycle_async("park", run, parked, chain=chain)  # type: ignore[no-any-return,misc]
        record: RunRecord = await self._lifecycle("park", run, parked, fence=fence)
        return record

    async def unpark(self, run: str) -> bool:
        unparked: bool = await self._lifecycle("unpark", run)
        return unparked

    def submit_complete(self, run: str, outcome: Outcome, chain: WriteChain) -> asyncio.Future[RunRecord]:
        """Queue the completion behind ``chain``'s deferred appends: it commits only if they all did, and
        needs no wait for them first (FIFO group commit). Only for a store :meth:`chain` returned a chain for."""
        assert self._lifecycle_async is not None
        future: asyncio.Future[RunRecord] = self._lifecycle_async("complete", run, outcome, chain=chain)
        return future

    async def complete(self, run: str, outcome: Outcome, fence: Fence | None = None) -> RunRecord:
        record: RunRecord = await self._lifecycle("complete", run, outcome, fence=fence)
        return record

    async def claim(self, run: str, holder: str, now_ms: int) -> Fence | None:
        """Take the claim for the journal's lease: the fence an execution then writes through, or None if
        refused."""
        asked = SYSTEM_CLOCK.monotonic()  # real time, as the renewals that count the lease from it (renewals.py)
        token: int | None = await self._lifecycle("claim", run, holder, self.claim_ttl_ms, now_ms)
        return None if token is None else Fence(holder, token, asked)

    async def renew(self, run: str, fence: Fence, now_ms: int) -> bool:
        renewed: bool = await self._call(self.sync.renew, run, fence, self.claim_ttl_ms, now_ms)
        return renewed

    async def release(self, run: str, fence: Fence) -> None:
        """Release the claim ``fence`` holds (nothing if it holds it no more)."""
        await self._call(self.sync.release, run, fence.holder, fence.token)

    async def update_run(self, run: str, *, fence: Fence | None = None, **fields: Any) -> RunRecord:
        return await self._call(lambda: self.sync.update_run(run, fence=fence, **fields))

    async def deliver(self, token: str, value: str | None, v: int | None) -> str | None:
        return await self._call(self.sync.deliver, token, value, v)

    async def due_runs(self, now_ms: int, limit: int) -> list[str]:
        return await self._call(self.sync.due_runs, now_ms, limit)

    async def run_parked_on(self, token: str) -> RunRecord | None:
        return await self._call(self.sync.run_parked_on, token)

    def writes_inside(self, zone: Any) -> bool:
        return self.sync.writes_inside(zone)
