"""Claim renewal for executing runs (reference §6 "Claims": renew every 20 s, TTL 60 s).

Every execution on an event loop registers its claim here, and ONE timer per loop renews those held for a
renewal period. Why not a timer (or a task) per execution: most runs finish long before their first renewal,
and setting and cancelling a timer per run was a measurable share of a short run's cost (benchmarks/durable.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from typing import ClassVar, Final

from telo import faults
from telo.clock import Clock
from telo.durable.aio import AsyncStore
from telo.journal.claims import DEFAULT_TTL_MS, RENEW_EVERY_MS

log = logging.getLogger("telo.durable")

_PERIOD_S: Final = RENEW_EVERY_MS / 1000


class Renewal:
    """One execution's claim, renewed until :meth:`stop`."""

    __slots__ = ("clock", "due", "holder", "renewals", "renewing", "run", "store")

    def __init__(self, renewals: _Renewals, store: AsyncStore, run: str, holder: str, clock: Clock,
                 due: float) -> None:
        self.renewals = renewals  # the loop's, which renews this claim
        self.store, self.run, self.holder, self.clock = store, run, holder, clock
        self.due = due  # loop time of the next renewal
        self.renewing: asyncio.Task[None] | None = None

    async def stop(self) -> None:
        """Stop renewing (the execution ended); waits for a renewal in flight to be cancelled."""
        self.renewals.held.pop(self, None)
        renewing, self.renewing = self.renewing, None
        if renewing is not None:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

    async def renew(self) -> None:
        faults.point("before-claim-renewal")
        try:
            if not await self.store.claim(self.run, self.holder, DEFAULT_TTL_MS, self.clock.now_ms()):
                log.warning("durable.claim.lost", extra={"durable.run": self.run, "durable.holder": self.holder})
        except Exception:  # a transient journal error must not kill the body; the next renewal retries
            log.warning("durable.claim.renew_failed", extra={"durable.run": self.run}, exc_info=True)
        finally:
            self.renewing = None


def renew_while_executing(store: AsyncStore, run: str, holder: str, clock: Clock) -> Renewal:
    """Register an execution's claim; call :meth:`Renewal.stop` when the execution ends."""
    return _Renewals.of(asyncio.get_running_loop()).add(store, run, holder, clock)


class _Renewals:
    """The claims held on one loop, in the order they come due (a dict as an ordered set), and its timer."""

    _by_loop: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Renewals]] = weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.held: dict[Renewal, None] = {}
        self.timer: asyncio.TimerHandle | None = None

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> _Renewals:
        renewals = cls._by_loop.get(loop)
        if renewals is None:
            renewals = cls._by_loop[loop] = cls(loop)
        return renewals

    def add(self, store: AsyncStore, run: str, holder: str, clock: Clock) -> Renewal:
        renewal = Renewal(self, store, run, holder, clock, self.loop.time() + _PERIOD_S)
        self.held[renewal] = None  # due after every claim held already: the dict stays in due order
        if self.timer is None:
            self.timer = self.loop.call_at(renewal.due, self._tick)
        return renewal

    def _tick(self) -> None:
        self.timer = None
        now = self.loop.time()
        for renewal in list(self.held):
            if renewal.due > now:
                break
            del self.held[renewal]  # re-added at the end: due again a period from now
            renewal.due = now + _PERIOD_S
            self.held[renewal] = None
            if renewal.renewing is None:  # (one still in flight after a period: skip this round)
                renewal.renewing = self.loop.create_task(renewal.renew())
        if self.held:
            self.timer = self.loop.call_at(next(iter(self.held)).due, self._tick)
