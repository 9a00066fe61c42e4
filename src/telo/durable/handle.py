"""The local backend's run handle (spec §2, §4, §5; reference §4 "Handle operations", §9).

Opening reads the run's log once and folds it (:func:`telo.journal.eventlog.fold`): at each path the first
effective entry wins. ``step`` and ``decide`` return the recorded value when there is one — decoded from its
frame, so the first pass and a replay hand the engine identical values — and otherwise compute, append
(first writer wins) and return what the store holds. ``park`` writes the park record BEFORE unwinding.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn

from telo import faults, paths
from telo.clock import SYSTEM_CLOCK, Clock
from telo.durable import effects, failures, parks, shutdown, unconfirmed
from telo.durable.aio import AsyncStore
from telo.durable.appends import DEFERRED_STEPS as DEFERRED_STEPS  # (re-exported: tests import it from here)
from telo.durable.appends import DeferredAppends
from telo.durable.cancelling import CancelPoll
from telo.durable.halting import halts
from telo.durable.observers import StepObserver
from telo.durable.regions import RegionReports
from telo.durable.renewals import Renewal
from telo.engine.context import ON_UNCONFIRMED, RESUME_ATTEMPT, RETRIED, current, derive, entered
from telo.engine.dispatch import EventBus
from telo.engine.handle import Execute
from telo.engine.suspend import ExecutionHalted, ParkUntil, ParkWhere, Suspension
from telo.engine.zones import Zone, ZoneReport
from telo.errors import (
    JournalEntryMismatch,
    LegacyUnencodable,
    TeloError,
    TypedFrameUnencodable,
    UnjournalableValue,
)
from telo.journal.chain import ChainBroken
from telo.journal.claims import Fence
from telo.journal.compat import writer_for
from telo.journal.eventlog import RunState, storage_path
from telo.journal.model import CODEC_VERSION, Entry, Parked
from telo.targets import targets_match
from telo.values import Timestamp
from telo.values.replica import UNSUPPORTED, replica

log = logging.getLogger("telo.durable")

_FIRST_ATTEMPT: Final = (0, None)  # RESUME_ATTEMPT of an effect not started before: attempt 0, no wait

_WAITED_KINDS = frozenset({"attempt", "retry"})


class LocalRunHandle:
    """A :class:`telo.engine.handle.RunHandle` over a journal store, for one execution of one run."""

    def __init__(self, store: AsyncStore, state: RunState, *, clock: Clock = SYSTEM_CLOCK,
                 fence: Fence | None = None) -> None:
        self.run_id = state.run
        # Whose id its effects' idempotency keys carry: a fork made with keep-keys records its root's in the
        # journal (telo.journal.lineage), so every execution of it — this process's or another's — hands out the same.
        self.key_run = state.key_run
        self.store = store
        self.clock = clock
        self.epoch = state.epoch
        self.entries: dict[str, Entry] = dict(state.entries)
        self.replayed_steps = 0
        self.executed_steps = 0
        self.latched: Suspension | None = None
        self.parked: Parked | None = None  # the park this execution recorded (telo.durable.parks)
        self.parks = 0  # how many branches parked in this execution
        self.regions = RegionReports(self.run_id)
        # The claim this execution holds: every write goes through it (telo.journal.claims "Fencing"), and its
        # renewal (telo.durable.renewals) is checked before each effect.
        self.fence = fence
        self.renewal: Renewal | None = None
        self.halted: ExecutionHalted | None = None  # latched like a suspension: see halt
        self.opened = frozenset(state.entries)  # what earlier executions recorded (intents without receipts)
        self.consumed: set[str] = set()  # recorded paths this execution read back (telo.durable.gates asks)
        self.started: set[str] = set()  # steps whose effect this execution began (unconfirmed.stop_before_effect)
        # Receives of one topic, and writes to one stream, of parallel branches take turns (telo.durable.inbox)
        self.serial: dict[tuple[str, str], asyncio.Lock] = {}
        self.policy_for: Callable[[Mapping[str, str] | None], effects.EffectPolicy] = lambda target: \
            effects.EffectPolicy()
        self.observers: tuple[StepObserver, ...] = ()  # (telo.durable.observers; usually none)
        self.events: EventBus | None = None  # the application's, told how unconfirmed effects are resolved
        self.flush_before_effects = False  # durability: eager (see eager())
        self.appends = DeferredAppends(store, self.run_id, store.chain(self.run_id, fence))
        self._policies: dict[tuple[str | None, str | None, str | None] | None, effects.EffectPolicy] = {}
        self.cancel_poll = CancelPoll(store, self.run_id)
        # How this journal takes values (telo.journal.compat); for a runtime that predates the codec (legacy) the
        # epoch-ms numbers the runtime decides (a sleep's wakeAt, a deadline, a retry's due time) are doubles, as
        # that runtime holds them (telo.engine.handle.epoch_ms_value).
        self.writer = writer_for(store.sync)
        self.epoch_ms_as_double = self.writer.legacy

    def policy(self, target: Mapping[str, str] | None) -> effects.EffectPolicy:
        """The target's unconfirmed-effect policy, asked once per target and execution."""
        key = (target.get("kind"), target.get("name"), target.get("module")) if target is not None else None
        policy = self._policies.get(key)
        if policy is None:
            policy = self._policies[key] = self.policy_for(target)
        return policy

    def observe(self, observer: StepObserver) -> None:
        """Tell ``observer`` about each journaled step of this execution from now on."""
        self.observers = (*self.observers, observer)

    def eager(self) -> None:
        """The workflow's ``durability: eager``: before any effect starts, everything recorded before it is
        durable — the previous step's receipt, and the intent of this one — so a finished step never runs
        again (docs/guarantees.md "Durability modes"). One commit per step: the receipt of a step and the
        intent of the next share it, made by the wait before the next effect (nothing outside the run can
        tell the two moments apart: between them the body only computes its next inputs)."""
        self.flush_before_effects = True

    # --- recording ------------------------------------------------------------------------------------

    def recorded(self, path: str) -> Entry | None:
        self.consumed.add(path)
        return self.entries.get(path)

    def delivered(self, path: str) -> bool:
        """Is the entry at ``path`` a delivery (a step entry written by a deliverer, with no target)?"""
        entry = self.entries.get(path)
        return entry is not None and entry.kind == "step" and entry.target is None

    def _entry(self, path: str, make: Callable[[str], Entry]) -> Entry:
        try:
            return make(self._storage(path))
        except TypedFrameUnencodable as exc:
            legacy = exc if isinstance(exc, LegacyUnencodable) else None  # (what journal compat legacy cannot carry)
            raise UnjournalableValue(
                f"the value produced at {path!r} of run {self.run_id!r} cannot be journaled: {exc.message}",
                hint=exc.hint if legacy else "return CEL values only (null, bool, int, double, string, bytes, "
                "list, map, timestamp, duration, Telo.Url); convert objects to maps",
                data={"run": self.run_id, "path": path, "valuePath": exc.path,
                      **({"type": legacy.type_name, "journalCompat": "legacy"} if legacy else {})},
            ) from exc

    def _storage(self, path: str) -> str:
        return storage_path(self.epoch, path)

    async def _append(self, path: str, entry: Entry, value: Any, *, wait: bool = False) -> Any:
        """Record ``entry`` — written from ``value`` — at ``path`` and return its value as a replay would read
        it.

        Unless ``wait``, the append is DEFERRED when the store allows: queued for the group commit, which makes
        it durable within a commit or two while the body goes on (docs/guarantees.md "When entries are durable").
        The body waits for its pending appends at each barrier (telo.durable.appends): before an effect whose
        intent must be durable, before a park, and with the run's completion."""
        appends = self.appends
        chain = appends.chain
        if chain is not None and not wait:
            future = self.store.append_deferred(self.run_id, entry, chain)
            if not future.done():  # (inside an ambient transaction it ran at once)
                logical = entry if entry.path == path else \
                    Entry(path, entry.kind, entry.value, entry.v, entry.decision, entry.target, None)
                self.entries[path] = logical
                if appends.add(entry, future):
                    await appends.settle_oldest()
                return self._read_back(logical, value)
            stored = appends.settled(entry, future)
        else:
            if appends.queued:
                await appends.flush()  # an awaited append never commits over a failed deferred one
            stored = await self.store.append(self.run_id, entry, self.fence)
        logical = Entry(path, stored.kind, stored.value, stored.v, stored.decision, stored.target, stored.seq)
        self.entries[path] = logical
        if stored.value != entry.value or stored.v != entry.v:  # an earlier execution's (first writer wins)
            return logical.decode(self.run_id)
        return self._read_back(logical, value)

    def _read_back(self, entry: Entry, value: Any) -> Any:
        """What a replay will read at ``entry``, written from ``value`` just now (spec §5.2): a replica of the
        value rather than the frame decoded, unless the replica is unsure (telo.values.replica)."""
        copy = replica(value)
        return entry.decode(self.run_id) if copy is UNSUPPORTED else copy

    async def flush(self) -> None:
        """A barrier: return once every pending append is durable (:meth:`DeferredAppends.flush`)."""
        await self.appends.flush()

    async def step(self, path: str, target: Mapping[str, str] | None, inputs: Any, execute: Execute) -> Any:
        observers = self.observers  # (told inline, not by a wrapper: no observers cost no frame)
        if observers:
            for observer in observers:
                observer.step_started(path, target)
        error: BaseException | None = None
        self.consumed.add(path)  # entered: its own records (intent, attempts, a park) are this execution's now
        try:
            existing = self.entries.get(path)
            if existing is not None:
                if existing.target is not None and target is not None and not targets_match(existing.target,
                                                                                            target):
                    raise _mismatch(self.run_id, path, existing.target, target)
                self.replayed_steps += 1
                for observer in observers:
                    observer.step_answered(path, target, replayed=True)
                return self._read(existing)
            failed = self.entries.get(paths.failure_path(path)) if self.opened else None
            if failed is not None:  # its failure receipt: the same error, the effect not executed again
                self.replayed_steps += 1
                for observer in observers:
                    observer.step_answered(path, target, replayed=True)
                raise failures.replayed(self._read(failed))
            try:
                return await self._execute_step(path, target, execute, observers)
            except TeloError as exc:
                if halts(exc):  # (never an effect's own failure: telo.durable.halting.body_failure)
                    self.halt(exc)
                raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            if observers:
                for observer in reversed(observers):
                    observer.step_ended(path, target, error)

    async def _execute_step(self, path: str, target: Mapping[str, str] | None, execute: Execute,
                            observers: tuple[StepObserver, ...]) -> Any:
        """A step with no entry: settle an unconfirmed earlier attempt, make sure this execution still holds
        the run, execute, record the receipt."""
        await self.check_cancelled_async()
        resume: tuple[int, int | None] = _FIRST_ATTEMPT
        policy = self.policy(target)
        if self.opened and paths.inputs_path(path) in self.opened:  # an earlier execution's intent, no receipt
            state = effects.effect_state(path, self.entries, self.run_id)
            if state.unconfirmed and not policy.implicit:
                known = await unconfirmed.resolve(self, path, target, state)
                if known is not None:
                    return await self._append(path, self._entry(path, lambda p: Entry.step(
                        p, target, known[0], writer=self.writer)), known[0])
            resume = (state.next_attempt, state.due_at)
        ctx = current()
        guarded = (policy.mode != effects.REDRIVE or policy.lookup is not None
                   or ctx.extra(ON_UNCONFIRMED) not in (None, effects.REDRIVE))
        if (guarded or self.flush_before_effects) and self.appends.queued:
            # An effect that must not be repeated blindly: its intent (and everything before it) is durable
            # before it starts, so a crash inside it is seen as unconfirmed (event-log spec §2). A redriven
            # effect needs no such wait: a crash before its intent is durable re-executes it with the same
            # idempotency key, exactly what its policy does after a crash inside it. (Eager: every effect waits,
            # for the receipts before it — see eager().)
            await self.flush()
        renewal = self.renewal
        if (self.appends.chain is not None and self.appends.chain.broken is not None) or \
                (renewal is not None and (renewal.lost is not None or renewal.lease_unsure())):
            await self._still_holding()  # (checked inline first: the common case costs no coroutine)
        if shutdown.draining():  # (after the flush above: what this execution finished is durable)
            await unconfirmed.stop_before_effect(self, path, guarded)  # (raises ERR_DURABLE_SHUTTING_DOWN)
        for observer in observers:
            observer.step_answered(path, target, replayed=False)
        faults.point("before-effect")
        self.started.add(path)
        try:
            if resume == _FIRST_ATTEMPT and ctx.extra(RESUME_ATTEMPT, _FIRST_ATTEMPT) == _FIRST_ATTEMPT:
                value = await execute()  # (what the context says already: nothing to derive, the common case)
            else:
                with entered(derive(ctx, extra=(RESUME_ATTEMPT, resume))):
                    value = await execute()
            faults.point("after-effect-before-entry")
            self.executed_steps += 1
            receipt = self._entry(path, lambda p: Entry.step(p, target, value, writer=self.writer))
        except Exception as exc:  # the effect's outcome is a failure: that is its receipt
            if ctx.extra(RETRIED) is None:  # (inside a retried step, its next attempt may run this one again)
                await self._record_failure(path, exc, wait=guarded)
            raise
        # Its receipt too, for such an effect: the window in which a crash leaves it unconfirmed — for an
        # operator or a lookup to resolve — stays one commit long, as it was before the effect began.
        stored = await self._append(path, receipt, value, wait=guarded)
        if faults.armed("after-entry"):
            await self.flush()
        faults.point("after-entry")
        return stored

    async def _record_failure(self, path: str, exc: Exception, *, wait: bool) -> None:
        """Record the failure receipt of the step at ``path`` (telo.durable.failures), then let the caller
        re-raise — the rebuilt error instead of ``exc`` when the record had to leave something out."""
        record, error = failures.failure_of(exc)
        where = paths.failure_path(path)
        await self._append(where, self._entry(where, lambda p: Entry.decided(p, failures.FAILURE_DECISION, record)),
                           record, wait=wait)
        if error is not exc:
            raise error from exc

    async def _still_holding(self) -> None:
        """Before an effect: stop (ClaimLost) if a deferred write already told that the run is another
        execution's, or if the lease may have lapsed unseen and renewing it now finds it taken."""
        chain = self.appends.chain
        if chain is not None and chain.broken is not None:
            await self.flush()  # raises what broke the chain
        if self.renewal is not None:
            await self.renewal.check()

    def _read(self, entry: Entry) -> Any:
        """A recorded entry's value; an entry this runtime cannot read halts the execution (HALTING_CODES)."""
        try:
            return entry.decode(self.run_id)
        except TeloError as exc:
            if halts(exc):
                self.halt(exc)
            raise

    def halt(self, exc: BaseException) -> NoReturn:
        """Stop this execution: latched first, so that a body swallowing the signal is caught out (as a park)."""
        halt = ExecutionHalted(exc)
        if self.halted is None:
            self.halted = halt
        raise halt from exc

    async def decide(self, path: str, kind: str, compute: Callable[[], Any], *, wait: bool = False) -> Any:
        existing = self.entries.get(path)
        if existing is not None:
            self.consumed.add(path)
            return self._read(existing)
        if kind == "attempt" and shutdown.draining():  # a retry's next attempt is a new effect: not now
            self.halt(shutdown.refusal(self.run_id, path))
        value = compute()
        if inspect.isawaitable(value):
            value = await value
        # A retry's start marker and verdict are durable before the attempt (or its backoff) begins: a crash
        # mid-retry then neither resets the budget nor repeats a delay, and an attempt of an effect that must
        # not be repeated blindly is seen as started (event-log spec §2). Retries are rare: no cost to speak of.
        wait = wait or kind in _WAITED_KINDS
        try:
            stored = await self._append(path, self._entry(path, lambda p: Entry.decided(
                p, kind, value, writer=self.writer)), value, wait=wait)
        except TeloError as exc:
            if halts(exc):
                self.halt(exc)
            raise
        if kind == "inputs" and faults.armed("after-inputs-decision"):
            await self.flush()
            faults.point("after-inputs-decision")
        return stored

    async def record_decision(self, path: str, kind: str, value: Any, frame: str) -> None:
        """Record a decision whose frame is known already — the same in every run of a workflow (its manifest
        digest) — as it is, rather than encode it again. Nothing when one is recorded at ``path`` already."""
        if path not in self.entries:
            try:
                await self._append(path, Entry(self._storage(path), "decision", frame, CODEC_VERSION, kind, None),
                                   value)
            except TeloError as exc:
                if halts(exc):
                    self.halt(exc)
                raise

    async def park(self, where: ParkWhere, until: ParkUntil) -> NoReturn:
        signal = Suspension(self.run_id, where, until)
        self.latched = signal  # latched first: an absorber between here and the workflow cannot hide it
        faults.point("before-park-record")
        # Queued behind the pending appends and refused if one failed: no wait for them first.
        parked = parks.merged(self.parked, Parked(self._storage(where.path), where.resource, until.token, until.at,
                                                  where.reason))
        self.parked, self.parks = parked, self.parks + 1  # (a sibling branch parking next merges with it)
        # A fenced park keeps the claim: this body may still be running sibling branches of a fan-out (spec
        # §7.8), so the run stays claimed until the whole body has unwound (the execution then releases it),
        # and no worker woken by a delivery executes those branches a second time meanwhile.
        try:
            chain = self.appends.chain
            if self.appends.queued and chain is not None:
                try:
                    await self.store.park(self.run_id, parked, chain)
                except ChainBroken:
                    await self.flush()  # raises what broke the chain
                    raise
                await self.flush()
            else:
                await self.store.park(self.run_id, parked, fence=self.fence)
        except TeloError as exc:
            if halts(exc):
                self.halt(exc)
            raise
        faults.point("after-park-record")
        log.info("durable.park", extra={"durable.run": self.run_id, "durable.path": where.path,
                                        "durable.resource": where.resource, "durable.token": until.token,
                                        "durable.due_at": None if until.at is None else
                                        Timestamp.from_epoch_millis(until.at).to_text()})
        raise signal

    def entries_mark(self) -> int:
        """A mark for :meth:`forget_since`: entries known now stay, those recorded later can be forgotten."""
        return len(self.entries)

    def forget_since(self, mark: int, prefix: str | None = None) -> None:
        """Forget entries recorded after ``mark`` (under ``prefix``, when given): a journal transaction that
        rolled back took them with it (spec §8.2), so a retry of that region must execute them again rather
        than replay results whose effects were rolled back."""
        for path in list(self.entries)[mark:]:
            # (with the turns dispatched at `prefix`: a Durable.Consume batch's steps are `<prefix>[k]/…`)
            if prefix is None or paths.is_within(path, prefix, include_turns=True):
                del self.entries[path]

    # --- zones and collapse ---------------------------------------------------------------------------

    def writes_inside(self, zone: Zone) -> bool:
        return self.store.writes_inside(zone)

    def report_zone(self, report: ZoneReport) -> None:
        """One ``durable.zone.mode`` record per REGION (telo.durable.regions)."""
        self.regions.report(report)

    # --- cancellation ---------------------------------------------------------------------------------

    def check_cancelled(self) -> None:
        self.cancel_poll.raise_if_cancelled()

    async def check_cancelled_async(self) -> None:
        """Before each effect: has the run been cancelled? (telo.durable.cancelling)"""
        await self.cancel_poll.check(shared=DeferredAppends.executing > 1)


def _mismatch(run: str, path: str, recorded: Mapping[str, str], reached: Mapping[str, str]) -> JournalEntryMismatch:
    return JournalEntryMismatch(
        f"replay of run {run!r} reached {_describe(reached)} at {path!r}, but the journal records "
        f"{_describe(recorded)} there",
        hint="the manifest changed under a live run; restore the previous manifest, or fork/restore the run to a "
        "checkpoint before this step",
        data={"run": run, "path": path, "recorded": dict(recorded), "reached": dict(reached)},
    )


def _describe(target: Mapping[str, str]) -> str:
    module = f" from {target['module']}" if target.get("module") else ""
    return f"{target.get('kind')} {target.get('name')!r}{module}"
