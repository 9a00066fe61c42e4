"""Executing one durable run: the code path shared by a start, a resubmission and a worker (reference §6
``execute``; spec §7.1, §7.3, §7.7).

The body starts on a ROOT context — no enclosing zone, no caller cancellation — with the workflow's
``replayed`` zone and the run handle layered on. Its outcome settles the run: a suspension leaves it parked
(the park was recorded before the signal unwound), cancellation leaves the cancelled record alone, an error
settles ``failed``, and a body that returned normally while a suspension is latched fails with
``ERR_DURABLE_SUSPENSION_SWALLOWED`` before anything is settled as completed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from telo import paths
from telo.clock import SYSTEM_CLOCK, Clock
from telo.durable.aio import AsyncStore
from telo.durable.appends import DeferredAppends
from telo.durable.digest import (
    DIGEST_PATH,
    Digest,
    changes,
    describe_changes,
    held_path,
    hold_path,
    value_of,
)
from telo.durable.effects import EffectPolicy
from telo.durable.halting import RunCancelled, halts
from telo.durable.handle import LocalRunHandle
from telo.durable.inbox import wake_after_sibling_parks
from telo.durable.observers import ExecutionWatch, execution_observers
from telo.durable.renewals import Renewal, renew_while_executing
from telo.engine.context import derive, entered, root
from telo.engine.interpreter import run_steps
from telo.engine.services import Services
from telo.engine.steps import Evaluable, Step
from telo.engine.suspend import ExecutionHalted, ParkUntil, ParkWhere, Suspension
from telo.engine.zones import REPLAYED, Zone
from telo.errors import ERR_DURABLE_SUSPENSION_SWALLOWED, Code, TeloError
from telo.journal import eventlog
from telo.journal.claims import Fence
from telo.journal.model import NO_VALUE, Outcome, RunRecord
from telo.journal.snapshot_rows import state_hash

log = logging.getLogger("telo.durable")

REPLAYED_REASON = "a durable workflow's body is replayed from its journal on resume"
_EMPTY_HASH = state_hash({})

HandleObserver = Callable[[LocalRunHandle], None]
_observer: contextvars.ContextVar[HandleObserver | None] = contextvars.ContextVar("telo_handle_observer",
                                                                                  default=None)


@contextlib.contextmanager
def observing_handles(observer: HandleObserver) -> Iterator[None]:
    """Hand every run handle :func:`execute_run` opens in this context — and in the tasks started from it —
    to ``observer`` before the body runs. ``telo run`` watches steps for its progress view this way (a step
    observer on each handle), without threading a listener through the application and workflows."""
    token = _observer.set(observer)
    try:
        yield
    finally:
        _observer.reset(token)


@dataclass(frozen=True, slots=True)
class WorkflowBody:
    """What a workflow runs: its steps, its ``inputs:`` mapping, and the module scope expressions see."""

    name: str
    steps: tuple[Step, ...]
    inputs: Evaluable | None = None
    module_scope: Callable[[], Mapping[str, Any]] = dict
    kind: str = "DurableLocal.Workflow"
    effect_policy: Callable[[Mapping[str, str] | None], EffectPolicy] | None = None
    digest: Digest | None = None
    durability: str = "deferred"  # or "eager": everything recorded durable before each effect starts


@dataclass
class Execution:
    """How one execution ended."""

    run: str
    status: str  # completed | failed | parked | cancelled | running (interrupted by the process)
    result: Any = NO_VALUE
    error: Mapping[str, Any] | None = None
    replayed_steps: int = 0
    executed_steps: int = 0
    collapsed_regions: int = 0
    collapse_reasons: list[str] = field(default_factory=list)
    record: RunRecord | None = None

    @property
    def replayed(self) -> bool:
        return self.replayed_steps > 0


def _result_value(steps: Mapping[str, Any]) -> dict[str, Any]:
    return {"steps": dict(steps)}


@dataclass(frozen=True, slots=True)
class ExecutionSettings:
    """What one execution of one run works with, from :func:`execute_run` down to its body."""

    store: AsyncStore
    run: str
    body: WorkflowBody
    call_inputs: Any
    fence: Fence  # the claim the caller holds: every write of the execution goes through it
    services: Services
    clock: Clock
    fresh: bool  # admitted just now: its journal is known to be empty (nothing to read)
    watches: tuple[ExecutionWatch, ...] = ()  # the execution observers' (telo.durable.observers)
    # the run's record as the caller read it under its claim (the digest check's fields change only through the
    # claim holder or an operator's resume, which needs the claim too): None to read it when needed
    record: RunRecord | None = None


async def execute_run(
    store: AsyncStore,
    run: str,
    body: WorkflowBody,
    call_inputs: Any,
    *,
    fence: Fence,
    services: Services | None = None,
    clock: Clock = SYSTEM_CLOCK,
    fresh: bool = False,
    record: RunRecord | None = None,
) -> Execution:
    """Execute (or continue) ``run``; the caller has admitted it and holds its claim, ``fence``: every write of
    the execution goes through it, and the execution stops should the run be granted to another.

    ``fresh``: the caller admitted the run just now, so its journal is known to be empty (nothing to read);
    ``record``: its record as the caller read it under the claim (not read again).
    The execution runs inside the context of each execution observer (telo.durable.observers: tracing)."""
    settings = ExecutionSettings(store, run, body, call_inputs, fence, services or Services(clock=clock), clock,
                                 fresh, record=record)
    observers = execution_observers()
    if not observers:
        return await _execute(settings)
    with contextlib.ExitStack() as stack:
        watches = tuple(stack.enter_context(observer.execution(run, body.name)) for observer in observers)
        execution = await _execute(replace(settings, watches=watches))
        for watch in watches:
            watch.finish(execution)
        return execution


async def _execute(settings: ExecutionSettings) -> Execution:
    # Renewed from here on, the lease counted from its grant (Fence.granted): the recovery read below may take
    # a while on a long journal, and the run's completion waits for its pending writes.
    store = settings.store
    renewal = renew_while_executing(store.sync, settings.run, settings.fence, settings.clock, store.claim_ttl_ms)
    try:
        return await _execute_recovered(settings, renewal)
    finally:
        renewal.stop()


async def _execute_recovered(settings: ExecutionSettings, renewal: Renewal) -> Execution:
    store, run = settings.store, settings.run
    try:
        if settings.fresh:
            state = eventlog.RunState(run, None, {}, 0, 0, _EMPTY_HASH)
        elif not store.sync.inline_calls:  # replaying a long journal reads a file or a database
            state = await asyncio.to_thread(eventlog.recover, store.sync, run, settings.record)
        else:
            state = eventlog.recover(store.sync, run, settings.record)
    except TeloError as exc:  # its journal cannot be read now (damaged, newer, the journal unreachable)
        if not halts(exc):
            raise
        empty = eventlog.RunState(run, None, {}, 0, 0, _EMPTY_HASH)
        return await _halted(store, run, LocalRunHandle(store, empty, clock=settings.clock, fence=settings.fence), exc)
    handle = LocalRunHandle(store, state, clock=settings.clock, fence=settings.fence)
    handle.renewal = renewal
    handle.events = settings.services.events
    if settings.body.durability == "eager":
        handle.eager()
    if settings.body.effect_policy is not None:
        handle.policy_for = settings.body.effect_policy
    for watch in settings.watches:
        handle.observe(watch)
    observer = _observer.get()
    if observer is not None:
        observer(handle)
    DeferredAppends.executing += 1
    try:
        return await _run_body(settings, handle)
    finally:
        DeferredAppends.executing -= 1
        handle.appends.drain()


async def _run_body(settings: ExecutionSettings, handle: LocalRunHandle) -> Execution:
    """The body on its root context, then the run settled by how it ended."""
    store, run, body, call_inputs = settings.store, settings.run, settings.body, settings.call_inputs
    zone = Zone(body.kind, {REPLAYED: REPLAYED_REASON}, resource=body.name)
    ctx = derive(root(), handle=handle, zone=zone, run_id=run, path=None)
    scope: dict[str, Any] = {}

    def counts() -> dict[str, Any]:
        return {"replayed_steps": handle.replayed_steps, "collapsed_regions": handle.regions.collapsed,
                "collapse_reasons": tuple(handle.regions.reasons)}

    try:
        with entered(ctx):
            if body.digest is not None:
                if settings.fresh:  # the admission recorded the digest and its scope in the run record
                    await handle.record_decision(DIGEST_PATH, "digest", body.digest.record(), body.digest.frame)
                else:
                    await _check_digest(store, handle, run, body.digest, body.name, settings.record)
            module = dict(body.module_scope())
            inputs_ev = body.inputs
            inputs = await handle.decide(
                paths.WORKFLOW_INPUTS, "inputs",
                lambda: inputs_ev.evaluate({**module, "inputs": call_inputs}) if inputs_ev is not None else {},
            )
            scope = {**module, "inputs": inputs, "steps": {}}
            await run_steps(body.steps, scope, settings.services, paths.ROOT)
    except Suspension:
        # The park record kept the claim while other branches ran on (see LocalRunHandle.park); the body has
        # now unwound, so the run is free for whoever wakes it — at once, when a sibling's park overwrote the
        # wake of a message (telo.durable.inbox.wake_after_sibling_parks).
        try:
            if handle.parks > 1 and await wake_after_sibling_parks(store, run, handle.entries):
                log.info("durable.park.rewoken", extra={"durable.run": run})
            await store.release(run, settings.fence)
        except TeloError as exc:  # the claim lapses after its lease instead; the park itself is durable
            if not halts(exc):
                raise
            log.warning("durable.claim.release_failed", extra={"durable.run": run, "error.code": exc.code})
        return _done(run, "parked", handle)
    except ExecutionHalted as halt:
        return await _halted(store, run, handle, halt.cause)
    except TeloError as exc:
        if halts(exc):  # raised outside a step (the digest check's reads and updates)
            return await _halted(store, run, handle, exc)
        return await _fail(store, run, handle, exc.code, exc.message, counts())
    except Exception as exc:
        log.exception("durable.body.crashed", extra={"durable.run": run})
        return await _fail(store, run, handle, Code.INTERNAL, f"{type(exc).__name__}: {exc}", counts())
    if handle.halted is not None:  # something in the body swallowed the halt: it stops all the same
        return await _halted(store, run, handle, handle.halted.cause)
    if handle.latched is not None:
        where = handle.latched.where
        return await _fail(
            store, run, handle, ERR_DURABLE_SUSPENSION_SWALLOWED,
            f"the body of run {run!r} returned normally although it parked at {where.path!r} "
            f"(waiting on {where.resource!r}): something between the park and the workflow swallowed the "
            "suspension signal, which would turn a park into a completed step", counts())
    try:
        # a cancel seen by now wins over completion (one written by another process in the last
        # POLL_MS is not distinguishable from one written just after the completion)
        await handle.check_cancelled_async()
    except RunCancelled:
        return _done(run, "cancelled", handle)
    result = _result_value(scope.get("steps", {}))
    try:
        outcome = Outcome.completed(result, collapsed_regions=handle.regions.collapsed,
                                    collapse_reasons=tuple(handle.regions.reasons),
                                    replayed_steps=handle.replayed_steps, writer=handle.writer)
    except TeloError as exc:  # the run's result cannot be framed: the run fails, visibly
        return await _fail(store, run, handle, Code.DURABLE_UNJOURNALABLE_VALUE, exc.message, counts())
    try:
        record = await handle.appends.complete(outcome, handle.fence)
    except TeloError as exc:
        if not halts(exc):
            raise
        return await _halted(store, run, handle, exc)
    execution = _done(run, "completed", handle)
    execution.result, execution.record = result, record
    return execution


async def _check_digest(store: AsyncStore, handle: LocalRunHandle, run: str, current: Digest, workflow: str,
                        known: RunRecord | None) -> None:
    """Hold a run whose reachable manifest changed since it started (spec §9 ERR_DURABLE_MANIFEST_CHANGED),
    unless an operator accepted exactly this change (``telo resume --force``)."""
    recorded = await handle.decide(DIGEST_PATH, "digest", current.record)
    if not isinstance(recorded, Mapping):
        return
    old_value, old_map = recorded.get("digest"), recorded.get("resources") or {}
    journaled = {e.target["name"] for e in handle.entries.values()
                 if e.kind == "step" and e.target is not None and "name" in e.target}
    if journaled - set(current.resources) and recorded.get("manifest") is not None:
        # A journaled target lies outside the reachable set: compare the whole manifest (spec §5.2).
        current = current.widened()
        old_map = recorded["manifest"]
        old_value = value_of(old_map)
    if old_value == current.value:
        record = known if known is not None else await store.read_run(run)
        if record is not None and record.digest_scope != current.scope:
            await store.update_run(run, fence=handle.fence, manifest_digest=current.value,
                                   digest_scope=current.scope)
        return
    holds = 0
    while handle.recorded(held_path(holds)) is not None:
        held = handle.recorded(held_path(holds))
        accepted = handle.recorded(hold_path(holds))
        if held is not None and accepted is not None and held.decode(run).get("digest") == current.value:
            record = known if known is not None else await store.read_run(run)
            if record is not None and record.manifest_digest != current.value:
                await store.update_run(run, fence=handle.fence, manifest_digest=current.value,
                                       digest_scope=current.scope)
            return  # accepted by an operator: continue with the new manifest
        holds += 1
    diff = changes(old_map, current.resources)
    await handle.decide(held_path(holds), "digest",
                        lambda: {"digest": current.value, "was": old_value, "scope": current.scope, **diff})
    log.warning("durable.manifest.changed", extra={"durable.run": run, "durable.changes": describe_changes(diff)})
    await handle.park(
        ParkWhere(hold_path(holds), workflow,
                  f"{Code.DURABLE_MANIFEST_CHANGED}: the manifest changed since run {run!r} started "
                  f"({describe_changes(diff)}), so resuming would replay it against different code; restore the "
                  "previous manifest and resume, or continue with the new one: "
                  f"`telo resume {shlex.quote(run)} --force`"),
        ParkUntil(),
    )


async def _halted(store: AsyncStore, run: str, handle: LocalRunHandle, cause: BaseException) -> Execution:
    """This execution stops without settling the run (telo.engine.suspend.ExecutionHalted): it was cancelled,
    or its claim is no longer its own, or a write of it failed, so what it did since is not (all) in the journal.
    The run continues from the journal — in the execution holding its claim, or when it is next resumed."""
    if isinstance(cause, RunCancelled):
        return _done(run, "cancelled", handle)
    with contextlib.suppress(Exception):  # a cancel clears the claim: its writes are refused as ClaimLost
        record = await store.read_run(run)
        if record is not None and record.status == "cancelled":
            return _done(run, "cancelled", handle)
    code = str(getattr(cause, "code", Code.INTERNAL))
    message = str(getattr(cause, "message", cause))
    log.warning("durable.execution.interrupted", extra={"durable.run": run, "error.code": code,
                                                         "error.message": message})
    if code in _WHY_KEPT:
        # Say on the record why the run is still running (telo status shows it), for an operator and for the
        # next executor, which overwrites it when it settles the run. Best effort: the journal may be what failed.
        with contextlib.suppress(TeloError):
            await store.update_run(run, fence=handle.fence, error={"code": code, "message": message,
                                                                   "stopped": "the run is left running"})
    execution = _done(run, "running", handle)
    execution.error = {"code": code, "message": message}
    return execution


# Halts whose reason is worth keeping on the run record: not a lost claim (another execution holds the run and
# writes its own) nor a shutdown (the next worker continues at once).
_WHY_KEPT = frozenset({Code.JOURNAL_WRITE_FAILED, Code.JOURNAL_UNAVAILABLE, Code.JOURNAL_FAILED,
                       Code.DURABLE_ENTRY_UNDECODABLE, Code.DURABLE_JOURNAL_CORRUPT})


def _done(run: str, status: str, handle: LocalRunHandle) -> Execution:
    return Execution(run, status, replayed_steps=handle.replayed_steps, executed_steps=handle.executed_steps,
                     collapsed_regions=handle.regions.collapsed, collapse_reasons=list(handle.regions.reasons))


async def _fail(store: AsyncStore, run: str, handle: LocalRunHandle, code: str, message: str,
                counts: Mapping[str, Any]) -> Execution:
    code = str(code)  # a Code member becomes the exact str the run record's value domain takes
    try:
        record = await store.complete(run, Outcome("failed", None, None, {"code": code, "message": message},
                                                   **counts), handle.fence)
    except TeloError as exc:  # another execution holds the run now, or the journal refused the write
        if not halts(exc):
            raise
        return await _halted(store, run, handle, exc)
    execution = _done(run, "failed", handle)
    execution.error, execution.record = {"code": code, "message": message}, record
    return execution
