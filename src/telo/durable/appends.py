"""An execution's deferred appends (telo.journal.chain; docs/guarantees.md "When entries are durable").

A deferred append is queued for the group commit, which makes it durable within a commit or two while the
body goes on. This module keeps the ones not yet known durable, in append order, and is where the body
waits for them: at a barrier (:meth:`DeferredAppends.flush`: before an effect whose intent must be durable,
before a park, with the run's completion), and whenever it races too far ahead of its journal.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, ClassVar

from telo.durable.aio import AsyncStore
from telo.journal.chain import ChainBroken, WriteChain, lost_race
from telo.journal.claims import Fence
from telo.journal.model import Entry, Outcome, RunRecord

# How far an execution may run ahead of its journal's commits (deferred appends not yet known durable):
# - DEFERRED_STEPS step entries (receipts) — a crash re-executes at most this many FINISHED steps of a run
#   (each with its own idempotency key), besides the steps it interrupted;
# - DEFERRED_LIMIT entries of any kind — bounds the memory a run racing ahead of a stalled disk holds.
# On reaching either, the body waits for the oldest before going on.
DEFERRED_STEPS = 16
DEFERRED_LIMIT = 64


class DeferredAppends:
    """The deferred appends of one execution of run ``run`` that are not yet known durable."""

    __slots__ = ("appended", "chain", "queued", "run", "steps", "store")

    #: bodies executing in this process now (telo.durable.execute keeps the count): a lone one may commit
    #: its queued writes on the loop's thread when it must wait for them
    executing: ClassVar[int] = 0

    def __init__(self, store: AsyncStore, run: str, chain: WriteChain | None) -> None:
        self.store, self.run = store, run
        # None when the store cannot defer (it has no ordered group commit): every append is then awaited
        self.chain = chain
        # (number, entry, future) in append order; numbers let concurrent branches wait for "up to here"
        self.queued: deque[tuple[int, Entry, asyncio.Future[Entry]]] = deque()
        self.appended = 0
        self.steps = 0  # step entries among them

    def add(self, entry: Entry, future: asyncio.Future[Entry]) -> bool:
        """Keep a deferred append until it settles; True when the body must now wait (:meth:`settle_oldest`)."""
        self.appended += 1
        self.queued.append((self.appended, entry, future))
        if entry.kind == "step":
            self.steps += 1
        return self.steps >= DEFERRED_STEPS or len(self.queued) >= DEFERRED_LIMIT

    def settled(self, entry: Entry, future: asyncio.Future[Entry]) -> Entry:
        """What the store holds for a settled append of ``entry``: its own error if it failed,
        ``ERR_DURABLE_CLAIM_LOST`` if another execution's value was found at its path."""
        stored = future.result()
        if not entry.same_record(stored):
            raise lost_race(self.run, entry.path)
        return stored

    async def settle_oldest(self) -> None:
        """Over a limit: wait for the oldest pending step entry when over DEFERRED_STEPS, else the oldest."""
        upto = self.queued[0][0]
        if self.steps >= DEFERRED_STEPS:
            upto = next((number for number, entry, _ in self.queued if entry.kind == "step"), upto)
        await self._settle(upto)

    async def _settle(self, upto: int) -> None:
        """Wait until the pending appends numbered up to ``upto`` settled, checking each. Concurrent branches
        may settle the same ones: whichever finds one at the head pops and checks it."""
        queued = self.queued
        while queued and queued[0][0] <= upto:
            _, entry, future = queued[0]
            if not future.done():  # settled in batch order: waiting for the head waits for no later batch
                if self.commit_if_alone():
                    # Committed on this thread: the batch's futures settle in the loop's next iteration, already
                    # scheduled; one bare yield gets there. asyncio.wait's waiter and callbacks cost more: eager
                    # sequential 2,300 -> 2,350 steps/s, ~15 us less CPU a step (benchmarks/durable.py's
                    # workload, three A/B pairs).
                    await asyncio.sleep(0)
                else:
                    await asyncio.wait((future,))
                continue  # another branch may have popped it meanwhile: look at the head again
            queued.popleft()
            if entry.kind == "step":
                self.steps -= 1
            self.settled(entry, future)

    def commit_if_alone(self) -> bool:
        """About to wait for queued writes: when no other body executes in this process, commit them on the
        loop's thread (the loop has nothing else to run; the writer thread would wait for the GIL). True if it
        committed them."""
        return DeferredAppends.executing == 1 and self.store.commit_queued()

    async def flush(self) -> None:
        """A barrier: return once every pending append is durable; raise the first that failed, or
        ``ERR_DURABLE_CLAIM_LOST`` if one found another execution's value at its path (or was refused because
        the run's claim is no longer this execution's)."""
        if self.queued:
            await self._settle(self.queued[-1][0])

    async def complete(self, outcome: Outcome, fence: Fence | None) -> RunRecord:
        """Settle the run completed once every pending append is durable: the completion is queued right
        behind them (one group commit more at most, rather than a wait for them and then a commit of its own),
        and is refused should one of them have failed."""
        if self.chain is None or not self.queued:
            return await self.store.complete(self.run, outcome, fence)
        completing = self.store.submit_complete(self.run, outcome, self.chain)
        self.commit_if_alone()
        try:
            record = await completing
        except ChainBroken:
            await self.flush()  # raises what broke the chain
            raise
        await self.flush()
        return record

    def drain(self) -> None:
        """Pending appends nobody will wait for (the body raised): forget them, let them finish, and read
        their errors so that asyncio does not report them as never retrieved."""
        futures = [future for _, _, future in self.queued]
        self.queued.clear()
        self.steps = 0
        for future in futures:
            if future.done():
                _retrieve(future)
            else:
                future.add_done_callback(_retrieve)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
