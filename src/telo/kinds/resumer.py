"""``DurableLocal.Resumer``: the service that claims a workflow's due runs and continues them (reference §6).

Due runs are time parks whose hour has come, deliveries waiting to be picked up, scheduled runs, and runs
whose claim lapsed or whose holder died. A resumer executes at most ``concurrency`` of them at once — the
worker's slots (:class:`telo.durable.slots.Slots`), shared by every resumer of one ``telo worker`` — and
claims only as many as it has free slots (:meth:`telo.journal.store.Store.claim_due`), so the rest stay due
for other workers: four
workers on 600 due runs each take a share, rather than the first one all it can list (issue 14). It claims:

- every ``interval`` (a sweep), as many due runs as it has free slots;
- when a slot frees after a sweep that filled them all, again at once — a busy worker keeps its slots full;
- when a wake-up names a run (PostgreSQL NOTIFY on an unpark or a due admission), that run alone, if a slot is
  free: of the workers woken, the one whose claim lands first gets it (``SKIP LOCKED``), the others pass.

Of a workflow's ``Local.Queue`` with a ``concurrency``, it claims only this process's fair share among the
workers claiming that queue, offers a freed slot to the others now and then, and looks again soon while short
of its share (:mod:`telo.kinds.fair_share`; issue 16) — so four workers on one queue each run about a quarter.

A run this process cannot read (a newer codec, a damaged entry) is reported once and skipped, never failed
(issue 12: corruption is isolated).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from telo.clock import SYSTEM_CLOCK
from telo.durable import shutdown
from telo.durable.aio import AsyncStore
from telo.durable.halting import halts
from telo.durable.slots import DEFAULT_CONCURRENCY, Slots
from telo.errors import ERR_DURABLE_JOURNAL_CORRUPT, TeloError
from telo.journal.claims import Fence, Holder
from telo.journal.model import NO_VALUE, RunRecord
from telo.runtime.resource import Resource

from .fair_share import BLOCKED_POLL_S, GRACE_S, FairShare, share_of
from .queue import Queue
from .queued import slot_done
from .workflow import UNREADABLE, Workflow

if TYPE_CHECKING:
    from telo.runtime.resource import Host

log = logging.getLogger("telo.durable")

class Resumer(Resource):
    """A service that claims due runs of one workflow and continues them (see the module docstring)."""

    kind = "DurableLocal.Resumer"

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None,
                 slots: Slots | None = None) -> None:
        super().__init__(app, name, config, module)
        self.holder = Holder.for_this_process(f"resumer-{name}").to_text()
        self.unreadable: set[str] = set()
        self.slots = slots if slots is not None else Slots(int(config.get("concurrency") or DEFAULT_CONCURRENCY))
        self.slots.on_freed(self._slot_freed)
        self.active: set[asyncio.Task[int]] = set()  # executions this resumer started, still going
        self._woken: set[str] = set()  # runs named by wake-ups since the last claim
        self._refill = False  # a slot freed after a claim that filled them all: claim again at once
        self._saturated = False
        self._wake = asyncio.Event()
        self._stopped = False
        self.resumed = 0
        self._poke: asyncio.TimerHandle | None = None  # a claim deferred for fairness (fair_share), due then
        self._queue_claimed_at = 0.0  # when this resumer last asked the journal for runs of its queue

    @property
    def workflow(self) -> Workflow:
        resource = self.app.resource_for(self.config["workflow"])
        assert isinstance(resource, Workflow)
        return resource

    def interval_s(self) -> float:
        from telo.values.plain import parse_cel_duration

        raw = self.config.get("interval", "5s")
        if isinstance(raw, int | float):
            return float(raw) / 1000
        return parse_cel_duration(str(raw)).total_nanos() / 1e9

    async def run(self) -> None:
        self.app.hold(self.loop())

    async def loop(self) -> None:
        """Claim and continue due runs until stopped (see the module docstring for when it claims)."""
        loop = asyncio.get_running_loop()

        def woken(run: str) -> None:  # (on the listener's thread)
            loop.call_soon_threadsafe(self._on_wake, run)

        unsubscribe = self.workflow.journal.store.subscribe_wake(woken)
        undrain = shutdown.on_drain(self.stop)
        next_sweep = 0.0
        try:
            while not self._stopped and not shutdown.draining():
                self._wake.clear()
                now = SYSTEM_CLOCK.monotonic()  # (real time: how often to look, not what the journal records)
                if now >= next_sweep or self._refill:
                    self._refill = False
                    self._woken.clear()  # a sweep claims those too
                    await self.fill()
                    if now >= next_sweep:
                        next_sweep = now + self.interval_s()
                elif self._woken:
                    woken_runs, self._woken = sorted(self._woken), set()
                    await self.fill(only=woken_runs)
                if self._refill or (self._woken and self.slots.free()):
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), max(0.0, next_sweep - SYSTEM_CLOCK.monotonic()))
        finally:
            undrain()
            if unsubscribe is not None:
                unsubscribe()

    def _on_wake(self, run: str) -> None:
        self._woken.add(run)
        self._wake.set()

    def waker(self) -> Callable[[str], None]:
        """A callback, safe to call from any thread, that names a run just made due (a schedule's tick run): this
        resumer claims it at once, as it does a run a PostgreSQL NOTIFY names, rather than at its next sweep."""
        loop = asyncio.get_running_loop()

        def wake(run: str) -> None:
            loop.call_soon_threadsafe(self._on_wake, run)

        return wake

    async def _fair_cap(self, store: AsyncStore, queue: Queue, share: FairShare) -> int:
        """How many runs of ``queue`` this process may claim now (telo.kinds.fair_share), and when to look again
        if that is fewer than the queue has room for."""
        mono = SYSTEM_CLOCK.monotonic()
        if share.stale(mono):
            share.observe(await store.runs_of_queue(queue.name), self.app.clock.now_ms(), mono, queue.hold_parked)
        cap = share.allowance(mono)
        if share.short():
            self._poke_in(BLOCKED_POLL_S)
        elif share.room_since is not None:
            self._poke_in(max(share.room_since + GRACE_S - mono, 0.0))
        return cap

    def _poke_in(self, delay: float) -> None:
        """Claim again in ``delay`` seconds (or sooner, if a poke is already due sooner)."""
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        if self._poke is not None and not self._poke.cancelled() and self._poke.when() <= when:
            return
        if self._poke is not None:
            self._poke.cancel()
        self._poke = loop.call_at(when, self._poked)

    def _poked(self) -> None:
        self._poke = None
        self._refill = True
        self._wake.set()
        self.slots.nudge()  # (telo worker --until-idle waits on the slots, not on this resumer)

    def _slot_freed(self) -> None:
        # Refill once a quarter of the slots is free, not at every slot: a claim is a statement (on PostgreSQL,
        # two, each reading the due runs), and a busy worker freeing a slot every few hundred microseconds
        # would otherwise claim one run at a time — what two workers then spent on it kept them from scaling.
        if self._saturated and self.slots.free() >= max(1, self.slots.limit // 4):
            self._saturated = False
            self._refill = True
            self._wake.set()

    async def fill(self, *, only: Sequence[str] | None = None) -> list[asyncio.Task[int]]:
        """Claim as many due runs as there are free slots (``only`` those, when given) and start continuing each;
        the executions started (each settles to 1 if it continued its run, 0 if it let it go)."""
        wf = self.workflow
        free = self.slots.free()
        if free <= 0 or self._stopped or shutdown.draining():
            self._saturated = self._saturated or free <= 0
            return []
        store = wf.store
        queue = wf.queue  # its runs are granted only as the queue's limits allow (issue 16)
        share = None
        reserved = 0
        try:
            queues = None
            if queue is not None:
                limits = queue.limits()  # (the manifest's, or an operator's override: telo queues set)
                if limits.concurrency is not None:  # this process's fair share of the queue's slots (fair_share)
                    share = share_of(queue, limits.concurrency, self.holder)
                    cap = await self._fair_cap(store, queue, share)
                    if cap == 0 and SYSTEM_CLOCK.monotonic() - self._queue_claimed_at < self.interval_s():
                        return []  # nothing to ask for (a queued workflow's unqueued runs wait for a sweep)
                    limits = replace(limits, worker_free=cap if limits.worker_free is None
                                     else min(cap, limits.worker_free))
                self._queue_claimed_at = SYSTEM_CLOCK.monotonic()
                queues = {queue.name: limits}
                # reserved while the ask is out, so that an ask made meanwhile in this process (a queued start's,
                # telo.kinds.queued.admit_queued) does not count the same free workerConcurrency
                reserved = min(limits.worker_free or 0, free)
                queue.executing += reserved
            try:
                claimed = await store.claim_due(self.holder, self.app.clock.now_ms(), free, only=only,
                                                workflows=[wf.name], skip=self.unreadable, queues=queues)
            finally:
                if queue is not None:
                    queue.executing -= reserved
        except TeloError as exc:
            if not halts(exc):
                raise
            log.warning("durable.resumer.sweep_failed", extra={"durable.workflow": wf.name,
                                                               "error.code": exc.code, "error.message": exc.message})
            return []
        if only is None:
            self._saturated = len(claimed) >= free
        if share is not None:
            share.claimed(sum(1 for record, _ in claimed if record.queue is not None))
        started = []
        for record, fence in claimed:
            self.slots.busy += 1
            counted = queue if queue is not None and record.queue is not None else None
            if counted is not None:
                counted.executing += 1  # at the grant: workerConcurrency counts it before anything asks again
            task = asyncio.ensure_future(self._execute(wf, store, record, fence, counted))
            self.active.add(task)
            task.add_done_callback(self._ended)
            self.app.hold(task)
            started.append(task)
        return started

    def _ended(self, task: asyncio.Task[int]) -> None:
        self.active.discard(task)
        self.slots.give_back()
        if not task.cancelled() and task.exception() is not None:
            log.error("durable.resumer.execution_crashed", exc_info=task.exception())

    async def sweep(self) -> int:
        """One pass: claim what the free slots allow, continue it all, and wait; how many runs were continued."""
        results = await asyncio.gather(*await self.fill(), return_exceptions=True)
        for outcome in results:  # an unexpected error ends the pass (after the others settled)
            if isinstance(outcome, BaseException):
                raise outcome
        return sum(results)  # type: ignore[arg-type]

    async def _execute(self, wf: Workflow, store: AsyncStore, record: RunRecord, fence: Fence,
                       counted: Queue | None = None) -> int:
        """Continue one claimed run: 1 if it was continued, 0 if skipped (also when the journal failed on the
        way: a later sweep tries again, and the claim lapses if it could not be released). ``counted``: the
        queue whose slot in this process the run took, given back when it rests — and since the queue has room
        again, the next claim is made at once rather than at the next sweep, within this process's fair share
        (the slot may first be offered to the other workers: telo.kinds.fair_share)."""
        run = record.run
        try:
            return await self._continue_claimed(wf, store, record, fence)
        except TeloError as exc:
            if not halts(exc):
                raise
            log.warning("durable.resumer.journal_failed", extra={"durable.run": run, "error.code": exc.code,
                                                                 "error.message": exc.message})
            with contextlib.suppress(TeloError):
                await store.release(run, fence)
            return 0
        finally:
            if counted is not None:
                slot_done(counted)
                share = None if counted.concurrency is None else share_of(counted, counted.concurrency, self.holder)
                offer = 0.0 if share is None else share.rested(SYSTEM_CLOCK.monotonic())
                if offer:
                    self._poke_in(offer)  # the freed slot is offered to the other workers until then (fair_share)
                self._refill = True  # (the queue may have room for this process besides an offered slot)
                self._wake.set()

    async def _continue_claimed(self, wf: Workflow, store: AsyncStore, record: RunRecord, fence: Fence) -> int:
        """``record``: as the claim wrote it (claimed, started), so nothing is read before the execution."""
        run = record.run
        if record.terminal or (record.workflow is not None and record.workflow != wf.name):
            await store.release(run, fence)  # (not due: a grant can still be stale, e.g. an upstream process's)
            return 0
        if record.corrupt is not None:  # damaged: listed and shown, never executed (RunRecord.corrupt)
            await store.release(run, fence)
            self._skip(run, ERR_DURABLE_JOURNAL_CORRUPT, record.corrupt)
            return 0
        log.info("durable.run.continuing", extra={"durable.run": run, "durable.workflow": wf.name,
                                                   "durable.fence": fence.token})
        try:
            inputs = record.decoded_inputs()
            execution = await wf.execute(run, {} if inputs is NO_VALUE else inputs, fence, record=record)
        except TeloError as exc:
            if exc.code in UNREADABLE:
                with contextlib.suppress(TeloError):
                    await store.release(run, fence)
                self._skip(run, exc.code, exc.message)
            elif halts(exc):
                raise  # the journal failed: _execute reports it and lets go
            else:
                log.warning("durable.resumer.run_failed", extra={"durable.run": run}, exc_info=True)
            return 0
        if execution.status == "running" and execution.error is not None \
                and execution.error.get("code") in UNREADABLE:
            self._skip(run, str(execution.error["code"]), str(execution.error.get("message")))
            return 0
        self.resumed += 1
        rested: dict[str, object] = {"durable.run": run, "durable.status": execution.status,
                                     "durable.steps.executed": execution.executed_steps,
                                     "durable.steps.replayed": execution.replayed_steps}
        if execution.error is not None:  # failed, or left running (why)
            rested["error.code"] = str(execution.error.get("code"))
            rested["error.message"] = str(execution.error.get("message"))
        log.info("durable.resumer.resumed", extra=rested)
        return 1

    def _skip(self, run: str, code: str, message: str) -> None:
        """A run this process cannot read (damaged, or written by a newer telo): skipped from now on, said once;
        it stays as it is for an operator (`telo status`, cancel, restore) or a newer worker."""
        if run not in self.unreadable:
            self.unreadable.add(run)
            log.error("durable.resumer.unreadable", extra={"durable.run": run, "error.code": str(code),
                                                            "error.message": message})

    def stop(self) -> None:
        """Claim no more (teardown, or the process is draining: telo.durable.shutdown); executions already
        started finish (the application holds them)."""
        self._stopped = True
        if self._poke is not None:
            self._poke.cancel()
        self._wake.set()

    async def teardown(self) -> None:
        self.stop()
