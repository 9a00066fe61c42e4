"""Claim renewal for executing runs (reference §6 "Claims"; :mod:`telo.journal.claims` "Fencing").

Every execution registers its claim here, and ONE thread per journal store renews those held for a renewal
period (a third of the journal's lease), each through its fence. Why a thread, not the event loop: a body that
blocks its loop (a synchronous call inside an ``async def`` step, a long CPU-bound stretch) would otherwise
stop renewals, and its claim would lapse while its holder is alive and about to run its next effect. Why one
thread for many claims, not a timer per execution: most runs finish long before their first renewal, and
setting and cancelling a timer per run was a measurable share of a short run's cost (benchmarks/durable.py);
registering costs a dict insert under a lock. The claims coming due together are renewed together, in one
journal transaction (:meth:`telo.journal.store.Store.renew_many`).

A renewal can still fail to happen in time: the whole process was paused (SIGSTOP, a VM freeze), or the
journal was unreachable. So the execution itself checks, before each effect, that its lease has not run out
unseen (:meth:`Renewal.check`): when the last renewal known to have succeeded is older than two thirds of the
lease, it renews on the spot, through its fence, and stops with ``ERR_DURABLE_CLAIM_LOST`` if the run was
granted to another execution meanwhile. A lapse nobody took advantage of is harmless: the fence proves it.

Leases are counted on the REAL monotonic clock (``telo.clock.SYSTEM_CLOCK``), never the execution's injected
one: the keeper thread waits real seconds, and another process takes the run over once the lease lapses in
real time — a test's FakeClock, frozen or jumped ahead, must neither keep a lease looking fresh past its real
lapse nor make every lease look lapsed. The timestamps written to the journal (``now_ms`` of a renewal) come
from the execution's clock, like every time the journal records.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from typing import ClassVar

from telo import faults
from telo.clock import SYSTEM_CLOCK, Clock
from telo.errors import Code, TeloError
from telo.journal.claims import ClaimLost, Fence, fence_refused, renew_every_ms
from telo.journal.store import Store

log = logging.getLogger("telo.durable")


class Renewal:
    """One execution's claim, renewed by its store's keeper thread until :meth:`stop`."""

    __slots__ = ("clock", "confirmed", "due", "fence", "keeper", "lost", "run", "stopped", "ttl_s")

    def __init__(self, keeper: _Keeper, run: str, fence: Fence, clock: Clock, ttl_ms: int) -> None:
        self.keeper = keeper
        self.run, self.fence, self.clock = run, fence, clock
        self.ttl_s = ttl_ms / 1000
        # monotonic time at which the lease last started for sure: its grant (as the claimant measured it; now
        # if unknown), then each successful renewal's start
        self.confirmed = fence.granted or SYSTEM_CLOCK.monotonic()
        self.due = self.confirmed + keeper.period_s  # monotonic time of the next renewal
        self.lost: ClaimLost | None = None  # set once a renewal found the claim another's
        self.stopped = False

    def stop(self) -> None:
        """Stop renewing (the execution ended). A renewal in flight may still land: it is fenced, so it
        extends nothing once the claim was released or granted again — and is not reported as a loss."""
        self.stopped = True
        self.keeper.remove(self)

    def lease_unsure(self) -> bool:
        """Has the lease possibly run out since it was last known renewed (a pause, a failing journal)?"""
        return SYSTEM_CLOCK.monotonic() - self.confirmed > self.ttl_s * 2 / 3

    async def check(self) -> None:
        """Before an effect: raise ``ClaimLost`` if the claim is known lost, or — when the lease may have
        lapsed unseen — unless renewing it now through the fence succeeds."""
        if self.lost is None and self.lease_unsure():
            try:
                await asyncio.to_thread(self.renew_now)  # (in this context: it sees an open journal transaction)
            except TeloError as exc:
                # Inside a Sql.Transaction on the journal's own SQLite database nothing can be renewed until it
                # ends; its writes are fenced inside it, so they check the claim themselves.
                if exc.code != Code.JOURNAL_IN_TRANSACTION:
                    raise
        if self.lost is not None:
            raise self.lost

    def renew_now(self) -> bool:
        """Renew through the fence (on the calling thread); False, with :attr:`lost` set, if refused."""
        store = self.keeper.store()
        if store is None or self.stopped:
            return True  # the execution (or its store) is gone: nothing to renew, nothing to say
        started = SYSTEM_CLOCK.monotonic()
        faults.point("before-claim-renewal")
        return self.settle(store, store.renew(self.run, self.fence, int(self.ttl_s * 1000), self.clock.now_ms()),
                           started)

    def until_ms(self) -> int:
        """The claim's new end, were it renewed now (on the execution's clock, as the journal records time)."""
        return self.clock.now_ms() + int(self.ttl_s * 1000)

    def settle(self, store: Store, renewed: bool, started: float) -> bool:
        """What a renewal asked for at ``started`` (monotonic) and answered ``renewed`` means: the lease
        confirmed, or — refused — the claim lost to another execution (False, :attr:`lost` set)."""
        if renewed:
            self.confirmed = max(self.confirmed, started)
            return True
        if self.stopped:  # refused because the execution just released or settled the run: not a loss
            return True
        record = store.read_run(self.run)
        claim = None if record is None else record.claim
        granted_since = record is not None and record.fence > self.fence.token
        if claim is None and not granted_since:  # released or settled by this execution, racing its renewal,
            return True  # or by an operator: nobody else was granted the run — the next fenced write says what happened
        # Held by another execution — or granted to one since ours, which has already settled or released it (a
        # process paused past its lease finds the run finished by its successor): lost all the same, so the
        # effect about to start must not.
        self.lost = fence_refused(self.run, self.fence, "renewing the claim", claim.holder if claim else None,
                                  None if record is None else record.fence)
        log.warning("durable.claim.lost", extra={"durable.run": self.run, "durable.holder": self.fence.holder,
                                                  "durable.fence": self.fence.token,
                                                  "error.code": Code.DURABLE_CLAIM_LOST.value})
        return False


_IDLE_PERIODS = 3  # a keeper's thread ends after this many renewal periods with no claim to renew


def store_kind(keeper: _Keeper) -> str:
    store = keeper.store()
    return "closed" if store is None else store.kind


def renew_while_executing(store: Store, run: str, fence: Fence, clock: Clock, ttl_ms: int) -> Renewal:
    """Register an execution's claim with its store's keeper; call :meth:`Renewal.stop` when it ends."""
    return _Keeper.of(store, ttl_ms).add(run, fence, clock, ttl_ms)


class _Keeper:
    """The claims held through one store, in the order they come due (a dict as an ordered set), and the
    thread renewing them."""

    _by_store: ClassVar[weakref.WeakKeyDictionary[Store, _Keeper]] = weakref.WeakKeyDictionary()
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, store: Store, ttl_ms: int) -> None:
        # Weakly: the keeper (a value of _by_store) must not keep its store alive, nor its thread outlive both.
        self.store: weakref.ref[Store] = weakref.ref(store)
        self.period_s = renew_every_ms(ttl_ms) / 1000
        self.held: dict[Renewal, None] = {}
        self.wake = threading.Condition(threading.Lock())
        self.thread: threading.Thread | None = None

    @classmethod
    def of(cls, store: Store, ttl_ms: int) -> _Keeper:
        with cls._lock:
            keeper = cls._by_store.get(store)
            if keeper is None:
                keeper = cls._by_store[store] = cls(store, ttl_ms)
            return keeper

    def add(self, run: str, fence: Fence, clock: Clock, ttl_ms: int) -> Renewal:
        renewal = Renewal(self, run, fence, clock, ttl_ms)
        with self.wake:
            self.held[renewal] = None  # due after every claim held already: the dict stays in due order
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name=f"telo-claims:{store_kind(self)}",
                                               daemon=True)
                self.thread.start()
        # No notify: an idle keeper looks again within a period, before this renewal is due. Waking it for
        # every run cost sequential runs ~10 % (a thread wake-up and a GIL hand-off per run; benchmarks/durable.py).
        return renewal

    def remove(self, renewal: Renewal) -> None:
        with self.wake:
            self.held.pop(renewal, None)

    def _loop(self) -> None:
        while True:
            with self.wake:
                idle = 0
                while not self.held:
                    self.wake.wait(self.period_s)
                    idle += 1
                    if not self.held and (idle >= _IDLE_PERIODS or self.store() is None):
                        self.thread = None  # (under the lock: add() starts a new thread when it finds none)
                        return
                first = next(iter(self.held))
                now = SYSTEM_CLOCK.monotonic()
                delay = first.due - now
                if delay > 0:
                    self.wake.wait(delay)
                    continue
                # Every claim coming due within a tenth of a period is renewed now, with this one: one
                # journal transaction (Store.renew_many) for a worker's hundred runs, not a hundred.
                horizon = now + self.period_s / 10
                due = []
                for renewal in self.held:  # (in due order)
                    if renewal.due > horizon:
                        break
                    due.append(renewal)
                for renewal in due:  # re-added at the end, due a period from now, unless lost
                    del self.held[renewal]
                    renewal.due = now + self.period_s
                    self.held[renewal] = None
            self._renew(due)

    def _renew(self, due: list[Renewal]) -> None:
        store = self.store()
        live = [r for r in due if not r.stopped]
        if store is None or not live:
            return
        try:
            started = SYSTEM_CLOCK.monotonic()
            faults.point("before-claim-renewal")
            renewed = store.renew_many([(r.run, r.fence, r.until_ms()) for r in live])
            for renewal, ok in zip(live, renewed, strict=True):
                if not renewal.settle(store, ok, started):
                    self.remove(renewal)
        except Exception:  # a transient journal error: the next period retries, and the body checks its lease
            log.warning("durable.claim.renew_failed", extra={"durable.runs": [r.run for r in live]}, exc_info=True)
