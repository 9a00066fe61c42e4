"""``Scheduler.Cron`` and ``Scheduler.Interval`` (issue 17; upstream module ``scheduler``, usually imported as
``Schedule``): run something on a cron expression or every interval.

Two forms, chosen by what ``invoke`` names:

- **durable** — ``invoke`` is a ``DurableLocal.Workflow``. Each tick starts one run with the id
  ``<schedule>@<RFC 3339 tick>``, admitted ``scheduled`` at the tick (plus its ``jitter``) and executed by
  whichever worker claims it, so a tick fires exactly once across processes and crashes. What was done with each
  tick — fired, buffered, skipped and why — is decided by one process at a time (the holder of the
  schedule's ledger claim) and recorded in the ledger (:mod:`telo.kinds.schedule_ledger`) under the policies of
  :mod:`telo.kinds.schedule_plan`. ``telo worker`` (and ``App.serve``) runs every durable schedule of its
  manifest; named as a target of ``telo run``, a durable schedule also serves its workflow's due runs.
- **in process** — anything else invocable: upstream's semantics. Each process runs its own timer and
  invokes the body on each tick; a failing tick is logged and the schedule goes on; ticks never overlap in one
  process; a tick missed while the process is down is lost.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from telo.durable import shutdown
from telo.durable.operator import cancel_run
from telo.errors import Code, TeloError
from telo.journal.claims import Fence, Holder
from telo.journal.compat import writer_for
from telo.journal.model import Admission
from telo.runtime.resource import Resource

from . import schedule_ledger as ledger
from .cron import CronTicks, IntervalTicks, Ticks, local_text, tick_text
from .queued import queue_fields
from .schedule_config import policy_of, target_of
from .schedule_plan import Policy, plan
from .workflow import Workflow

if TYPE_CHECKING:
    from telo.runtime.resource import Host

log = logging.getLogger("telo.schedule")

# The ledger's lease: the journal's claimTtl, at most this — a dead or stalled holder's schedule is taken over
# within it, so its ticks are still decided on time (telo.kinds.schedule_plan.ON_TIME_MS).
LEAD_TTL_MS: Final = 15_000
POLL_S: Final = 5.0  # how often, at most, a process looks at the ledger between ticks (operator actions, leases)


class Schedule(Resource):
    """What both kinds share; subclasses say where the ticks fall (:meth:`ticks`)."""

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self.holder = Holder.for_this_process(f"schedule-{name}").to_text()
        self._fence: Fence | None = None
        self._ensured = False
        self._stopped = False
        self.decided = 0  # decisions this process recorded (tests and the log read it)
        self.changes = 0  # what its beats wrote: decisions, admissions, pauses (an idle worker beats until none)
        self.wakers: list[Callable[[str], None]] = []  # told each tick run it admits (a resumer claims it at once)

    async def init(self) -> None:
        where = f"{self.kind} {self.name!r}"
        self.target = target_of(self.app, self.config, where)
        self.durable = isinstance(self.target, Workflow)
        self.policy: Policy = policy_of(self.app, self.config, where, durable=self.durable)
        when, inputs = self.config.get("when"), self.config.get("inputs")
        compiler = self.app.compiler
        self.when_ev = None if when is None else compiler.value(when, where=f"{where}.when", names=("tick",))
        self.inputs_ev = None if inputs is None else compiler.value(inputs, where=f"{where}.inputs", names=("tick",))

    def ticks(self, anchor_ms: int) -> Ticks:
        raise NotImplementedError

    def anchor(self, state: ledger.LedgerState, now_ms: int) -> int:
        """Where an interval's ticks count from: ``startAt``, else the schedule's first beat (its ledger's
        ``created``), else now. (A cron expression ignores it.)"""
        if self.policy.start_at_ms is not None:
            return self.policy.start_at_ms
        return state.created_ms or now_ms

    @property
    def lease_ms(self) -> int:
        """How long the ledger's claim lasts unrenewed: the journal's ``claimTtl``, at most :data:`LEAD_TTL_MS`."""
        return min(self.workflow.journal.store.claim_ttl_ms, LEAD_TTL_MS)

    @property
    def poll_ms(self) -> int:
        if not self.durable:
            return int(POLL_S * 1000)
        return max(100, min(int(POLL_S * 1000), self.lease_ms // 3))

    @property
    def timezone(self) -> str:
        return str(self.config.get("timezone", "UTC"))

    @property
    def workflow(self) -> Workflow:
        assert isinstance(self.target, Workflow), "a durable schedule invokes a workflow"
        return self.target

    # --- one tick's scope ------------------------------------------------------------------------------

    def tick_scope(self, tick_ms: int) -> dict[str, Any]:
        """What ``when`` and ``inputs`` see: ``tick.at`` (RFC 3339 UTC), ``tick.local`` (in the schedule's
        time zone), ``tick.ms`` (epoch ms) and ``tick.schedule``."""
        tick = {"at": tick_text(tick_ms), "local": local_text(tick_ms, self.timezone), "ms": tick_ms,
                "schedule": self.name}
        return {**self.app.module_scope(), "tick": tick}

    def gate(self, tick_ms: int) -> str | None:
        """Why the tick is skipped — ``when`` is false or fails, or its inputs fail to evaluate or fit the workflow's
        ``inputType`` — or None to fire it: a tick whose run could not be admitted is skipped, with the reason,
        never recorded as fired."""
        if self.when_ev is not None:
            try:
                value = self.when_ev.evaluate(self.tick_scope(tick_ms))
            except TeloError as exc:
                return f"when failed: {exc.code}: {exc.message}"
            if value is not True:
                return "when is false"
        if self.durable:
            try:
                self.workflow.checked_inputs(self.inputs_for(tick_ms))
            except TeloError as exc:
                return f"inputs failed: {exc.code}: {exc.message}"
        return None

    def inputs_for(self, tick_ms: int) -> dict[str, Any]:
        """The tick's call inputs: ``inputs`` evaluated with ``tick`` in scope; absent, ``{tick: <RFC 3339>}``."""
        if self.inputs_ev is None:
            return {"tick": tick_text(tick_ms)}
        value = self.inputs_ev.evaluate(self.tick_scope(tick_ms))
        if not isinstance(value, dict):
            raise TeloError(Code.INPUT_INVALID, f"{self.inputs_ev.where}: a tick's inputs must be a map, got "
                            f"{type(value).__name__}", hint="write inputs: { day: !cel \"tick.local\" }",
                            data={"schedule": self.name})
        return value

    def jitter_of(self, tick_ms: int) -> int:
        """The tick's delay within ``jitter``: a hash of the schedule and tick, so every process agrees."""
        if not self.policy.jitter_ms:
            return 0
        digest = hashlib.sha256(f"{self.name}@{tick_ms}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % (self.policy.jitter_ms + 1)

    # --- serving ---------------------------------------------------------------------------------------

    async def run(self) -> None:
        """As a target: the durable form also serves its workflow's due runs here (a worker would)."""
        if self.durable:
            from .resumer import Resumer

            if not any(isinstance(r, Resumer) and r.workflow is self.workflow for r in self.app.resources.values()):
                resumer = Resumer(self.app, f"schedule-{self.name}", {"workflow": self.config["invoke"],
                                                                      "interval": "1s"}, None)
                self.wakers.append(resumer.waker())
                self.app.hold(resumer.loop())
        self.app.hold(self.loop())

    def stop(self) -> None:
        self._stopped = True

    async def loop(self) -> None:
        """Beat until stopped: at each tick, and between ticks every :attr:`poll_ms` (a third of the lease, so
        the holder renews it in time; at most :data:`POLL_S`)."""
        undrain = shutdown.on_drain(self.stop)
        try:
            while not self._stopped and not shutdown.draining():
                try:
                    wake_ms = await (self.beat() if self.durable else self._fire_in_process())
                except TeloError as exc:  # a journal outage, a bad tick: logged, and the schedule goes on
                    log.warning("schedule.beat.failed", extra={"schedule": self.name, "error": exc.message})
                    wake_ms = self.app.clock.now_ms() + self.poll_ms
                delay = max(0.0, min(self.poll_ms, wake_ms - self.app.clock.now_ms()) / 1000)
                await asyncio.sleep(delay)
        finally:
            undrain()
            await self.teardown()

    async def teardown(self) -> None:
        fence, self._fence = self._fence, None
        if fence is not None and self.durable:
            await asyncio.to_thread(self.workflow.journal.store.release, ledger.ledger_id(self.name), fence.holder,
                                    fence.token)

    # --- the durable form ------------------------------------------------------------------------------

    async def beat(self) -> int:
        """Decide and start every due tick if this process holds the ledger (taking it if free); returns when to
        beat next (epoch ms)."""
        return await asyncio.to_thread(self._beat, self.app.clock.now_ms())

    def _beat(self, now: int) -> int:
        store = self.workflow.journal.store
        if not self._ensured:
            ledger.ensure(store, self.name, now)
            self._ensured = True
        fence = self._lead(now)
        state = ledger.read(store, self.name)
        ticks = self.ticks(self.anchor(state, now))
        if fence is None:  # another process decides; look again soon (it may die)
            return now + self.poll_ms
        if self.policy.pause_on_failure and not state.paused:
            self._pause_on_failure(state, fence, now)
            state = ledger.read(store, self.name)
        self._start_waiting(state, now)
        statuses: dict[str, str | None] = {}

        def status(run: str) -> str | None:
            if run not in statuses:
                record = store.read_run(run)
                statuses[run] = None if record is None else record.status
            return statuses[run]

        state = replace(state, chain=_unsettled_tail(state.chain, status))

        planned = plan(ticks, self.policy, state, now, run_of=lambda t: ledger.tick_run_id(self.name, t),
                       status=status, gate=self.gate)
        fired = False
        for decision in planned.decisions:
            stored = ledger.decide(store, self.name, decision, fence)
            self.decided += 1
            self.changes += 1
            fired = fired or stored.action == "fire"
            if stored.action == "fire" and stored.run is not None and self._admitted(stored.run, stored.tick_ms):
                self._wake(stored.run)
            log.info("schedule.tick", extra={"schedule": self.name, "tick": tick_text(stored.tick_ms),
                                             "action": stored.action, "reason": stored.reason})
        if fired:  # (only once a fire is recorded, by this holder: a stale one's decide raised above)
            for run in planned.cancel:
                cancel_run(store, run, f"schedule {self.name!r}: a new tick fired (overlap: cancelRunning)")
        if planned.decisions:
            fresh = ledger.read(store, self.name)
            ledger.compact(store, self.name, replace(fresh, chain=_unsettled_tail(fresh.chain, status)), fence)
        if planned.more:  # (a backlog longer than one beat: go on at once)
            return now
        nxt = ticks.after(max(now, state.cursor_ms or now))
        return min(nxt, now + self.poll_ms)

    def _lead(self, now: int) -> Fence | None:
        """Hold the ledger's claim: renew ours, or take it when free (its former holder died or let go)."""
        store, run = self.workflow.journal.store, ledger.ledger_id(self.name)
        if self._fence is not None and store.renew(run, self._fence, self.lease_ms, now):
            return self._fence
        token = store.claim(run, self.holder, self.lease_ms, now)
        self._fence = None if token is None else Fence(self.holder, token)
        return self._fence

    def _pause_on_failure(self, state: ledger.LedgerState, fence: Fence, now: int) -> None:
        store = self.workflow.journal.store
        for decision in dict.fromkeys((*state.recent, *state.chain)):  # (every run fired or buffered, kept)
            run = decision.run
            if run is None or decision.action == "skip" or run in state.failed_seen:
                continue
            record = store.read_run(run)
            if record is not None and record.status == "failed":
                self.changes += 1
                ledger.record_op(store, self.name, ledger.Operation(
                    "pause", now, "pauseOnFailure", f"{run} failed"), path=f"ops/failed/{run}", fence=fence)
                return

    def _start_waiting(self, state: ledger.LedgerState, now: int) -> None:
        """Admit the fired tick whose admission a crash cut off, and each buffered tick whose run before it has
        settled (in order)."""
        store = self.workflow.journal.store
        before: str | None = None
        for decision in state.chain:
            assert decision.run is not None
            record = store.read_run(decision.run)
            if record is None:
                if before is not None:
                    prior = store.read_run(before)
                    if prior is None or prior.status not in ledger.SETTLED:
                        return
                if self._admitted(decision.run, decision.tick_ms,
                                  due_ms=now if decision.action == "buffer" else None):
                    self._wake(decision.run)
            before = decision.run

    def _admitted(self, run: str, tick_ms: int, *, due_ms: int | None = None) -> bool:
        """:meth:`admit`, a failure logged rather than raised: the inputs were checked when the tick was decided,
        so one failing now (a variable changed since) must not stop the schedule's later ticks."""
        try:
            return self.admit(run, tick_ms, due_ms=due_ms)
        except TeloError as exc:
            log.warning("schedule.admit.failed", extra={"schedule": self.name, "run": run, "error": exc.message})
            return False

    def _wake(self, run: str) -> None:
        for wake in self.wakers:
            wake(run)

    def admit(self, run: str, tick_ms: int, *, due_ms: int | None = None) -> bool:
        """Admit ``run`` ``scheduled`` with a tick's inputs, due at ``due_ms`` (default: the tick plus its
        jitter); False when the run exists already (an id is one tick's, so nothing fires twice)."""
        wf = self.workflow
        inputs = dict(wf.checked_inputs(self.inputs_for(tick_ms)))
        digest = wf.body.digest
        self.changes += 1
        return wf.journal.store.admit(Admission.of(
            run, status="scheduled", due_at=due_ms if due_ms is not None else tick_ms + self.jitter_of(tick_ms),
            inputs=inputs, workflow=wf.name, manifest_digest=digest.value if digest else None,
            digest_scope=digest.scope if digest else None, writer=writer_for(wf.journal.store),
            **queue_fields(wf.queue, inputs))).admitted

    # --- the in-process form ---------------------------------------------------------------------------

    async def _fire_in_process(self) -> int:
        from telo.engine.dispatch import dispatch
        from telo.runtime.resource import as_invocable

        now = self.app.clock.now_ms()
        if not hasattr(self, "_next_ms"):
            self._next_ms = self.ticks(now).after(now)
            self._anchor = now
        if now < self._next_ms:
            return self._next_ms
        tick, self._next_ms = self._next_ms, self.ticks(self._anchor).after(now)
        if self.gate(tick) is None:
            try:
                await dispatch(as_invocable(self.target), self.inputs_for(tick), events=self.app.events)
            except Exception as exc:  # upstream: a failing tick is logged, the schedule goes on
                log.warning("schedule.tick.failed", extra={"schedule": self.name, "tick": tick_text(tick),
                                                           "error": str(exc)})
        return self._next_ms


class Cron(Schedule):
    kind = "Scheduler.Cron"

    async def init(self) -> None:
        await super().init()
        self._cron = CronTicks(str(self.config["cron"]), self.timezone, f"{self.kind} {self.name!r}.cron")

    def ticks(self, anchor_ms: int) -> Ticks:
        return self._cron


class Interval(Schedule):
    kind = "Scheduler.Interval"

    async def init(self) -> None:
        await super().init()
        from .schedule_config import every_ms

        self._every_ms = every_ms(self.app, self.config, f"{self.kind} {self.name!r}.every")

    def ticks(self, anchor_ms: int) -> Ticks:
        return IntervalTicks(self._every_ms, anchor_ms, str(self.config["every"]))


def _unsettled_tail(chain: tuple[ledger.TickDecision, ...],
                    status: Callable[[str], str | None]) -> tuple[ledger.TickDecision, ...]:
    """The chain from its last settled run on: a buffered tick waits only for the run just before it, so the
    settled ones before that say nothing more — dropped, the chain stays as long as what still waits."""
    keep = 0
    for i, decision in enumerate(chain):
        if decision.run is not None and status(decision.run) in ledger.SETTLED:
            keep = i
    return chain[keep:]
