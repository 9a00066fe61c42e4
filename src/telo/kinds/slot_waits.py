"""The runs of one ``DurableLocal.Queue`` waiting for a slot in this process, asking for it together (issue 16;
docs/proposals/admission-control.md, step 3: priority).

A start of a queued workflow waits in its process until the journal grants its run (:mod:`telo.kinds.queued`).
Each waiter asking for its own run alone would defeat ``priority``: when a slot frees, whichever waiter happens
to ask first takes it. So every ask names all the runs of the queue waiting here (for one claim holder), and the
journal grants them in the queue's order — priority, then admission (:func:`telo.journal.queues.queue_order`) —
leaving a run granted for another waiter in :attr:`SlotWaits.granted` until that waiter takes it (woken at
once). Waits in other processes ask for their own runs; a worker's sweep grants the queue's due runs in order.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from telo.journal.claims import Fence
from telo.journal.queues import QueueLimits

if TYPE_CHECKING:
    from telo.clock import Clock
    from telo.durable.aio import AsyncStore


class Counted(Protocol):
    """What of the queue an ask uses (``telo.kinds.queue.Queue``, which imports this module)."""

    name: str
    executing: int

    def limits(self) -> QueueLimits: ...


@dataclass
class SlotWaits:
    """The waiting runs, each with its claim holder (``runs``); ``granted``: a grant an ask made for another
    waiter's run, until that waiter takes it. ``lock``: one ask at a time — what it grants is counted toward
    ``workerConcurrency`` before the next ask computes what is free. ``named``: the ask that last named a run
    (``asks`` counts them), so a waiter named by another's ask since it last looked does not ask again."""

    runs: dict[str, str] = field(default_factory=dict)
    granted: dict[str, Fence] = field(default_factory=dict)
    named: dict[str, int] = field(default_factory=dict)
    asks: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    woken: dict[str, asyncio.Event] = field(default_factory=dict)

    async def take(self, store: AsyncStore, clock: Clock, queue: Counted, run: str,
                   looked: int) -> tuple[Fence | None, int]:
        """``run``'s grant if an ask — its own, unless another named it since ``looked`` — granted it; and the
        asks so far (the caller's next ``looked``). A grant is counted toward ``workerConcurrency`` at once."""
        async with self.lock:
            fence = self.granted.pop(run, None)
            if fence is None and self.named.get(run, -1) <= looked:
                holder = self.runs[run]
                named = sorted(r for r, h in self.runs.items() if h == holder and r not in self.granted)
                self.asks += 1
                self.named.update(dict.fromkeys(named, self.asks))
                limits, reserved = reserve(queue, len(named))
                try:
                    granted = await store.claim_due(holder, clock.now_ms(), len(named), only=named,
                                                    queues={queue.name: limits})
                finally:
                    queue.executing -= reserved
                queue.executing += len(granted)
                for record, got in granted:
                    self.granted[record.run] = got
                    if record.run in self.woken:
                        self.woken[record.run].set()
                fence = self.granted.pop(run, None)
            return fence, self.asks

    async def pause(self, run: str, seconds: float) -> None:
        """Wait until ``run``'s next ask is due — cut short when another waiter's ask grants it."""
        event = self.woken.setdefault(run, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)
        event.clear()

    def leave(self, run: str) -> Fence | None:
        """``run`` waits no more; a grant made for it that it did not take (the caller gives it back)."""
        self.runs.pop(run, None)
        self.named.pop(run, None)
        self.woken.pop(run, None)
        return self.granted.pop(run, None)


def reserve(queue: Counted, wanted: int) -> tuple[QueueLimits, int]:
    """The queue's limits for an ask of up to ``wanted`` runs, and the share of the process's free
    ``workerConcurrency`` reserved for it (counted in ``queue.executing`` until the ask returns; the caller takes
    it back, then counts what was granted). Why: asks made at once — a queued start's own
    (``telo.kinds.queued.admit_queued``) while the waiters' ask is out — must not each count the same free slots."""
    limits = queue.limits()
    if limits.worker_free is None:
        return limits, 0
    reserved = min(limits.worker_free, wanted)
    queue.executing += reserved
    return replace(limits, worker_free=reserved), reserved
