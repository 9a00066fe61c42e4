"""The step interpreter (reference §3) and what it journals (spec §4, reference §4).

Replay is re-running the step list while the run handle returns recorded values instead of computing them
(spec §1). So every value that could steer the engine to a different step goes through ``decide`` at the
path the reference's table names, and every effect goes through ``step``; with no handle (outside a durable
run, or inside a collapsed region) the same code computes everything and records nothing.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from telo import paths
from telo.clock import SYSTEM_CLOCK, Clock
from telo.engine.context import ON_UNCONFIRMED, RESUME_ATTEMPT, RETRIED, current, derive, entered
from telo.engine.dispatch import EventBus, Invocable, InvokeError, dispatch
from telo.engine.handle import RunHandle
from telo.engine.journaling import journal_for
from telo.engine.steps import (
    Evaluable,
    IfStep,
    InvokeStep,
    RetryPolicy,
    Step,
    StepsWithDuplicate,
    SwitchStep,
    ThrowStep,
    TryStep,
    ValueStep,
    WhileStep,
)
from telo.engine.suspend import ParkUntil, ParkWhere, Suspension
from telo.engine.zones import NO_SUSPEND
from telo.errors import ERR_DUPLICATE_STEP_NAME, Code, PredicateNotBoolean, SuspendForbidden, TeloError
from telo.journal.model import NO_VALUE

SUSPENDING_BACKOFF_MS = 30_000
# Codes a retry policy never retries (reference §3 "Retry"): contract and resolution failures.
NEVER_RETRIED = frozenset({
    Code.INPUT_INVALID, Code.OUTPUT_INVALID, Code.CONTRACT_UNRESOLVABLE, Code.SCHEMA_PROJECTION_UNRESOLVED,
    Code.RESOURCE_NOT_FOUND, Code.RESOURCE_NOT_INVOKABLE, Code.INVOKE_CANCELLED, Code.PREDICATE_NOT_BOOLEAN,
    Code.DURABLE_SUSPEND_FORBIDDEN, Code.JOURNAL_ENTRY_MISMATCH, Code.DURABLE_UNJOURNALABLE_VALUE,
})


async def _default_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


@dataclass
class Services:
    """What the interpreter needs from the runtime, injectable for tests."""

    events: EventBus = field(default_factory=EventBus)
    clock: Clock = SYSTEM_CLOCK
    rng: random.Random = field(default_factory=random.Random)
    sleep: Callable[[float], Awaitable[None]] = _default_sleep


def step_map(scope: Mapping[str, Any]) -> dict[str, Any]:
    steps = scope.get("steps")
    assert isinstance(steps, dict), "a body's scope carries its steps map"
    return steps


def body_base() -> str:
    """The base of the current body's paths: the dispatching step's path, or ``steps`` at a run's root."""
    return current().path or paths.ROOT


async def run_steps(steps: Sequence[Step], scope: dict[str, Any], services: Services, base: str | None = None) -> None:
    """Run a step list in ``scope`` (whose ``steps`` map the steps write into), under path ``base``."""
    base = base if base is not None else body_base()
    if type(steps) is StepsWithDuplicate and current().handle is not None:
        raise TeloError(
            ERR_DUPLICATE_STEP_NAME,
            f"{steps.where}: two steps are named {steps.duplicate!r}, and this list runs inside durable run "
            f"{current().run_id!r}: both would record under one journal path, and the second would replay the "
            "first's result instead of running",
            hint="rename one of the steps",
            data={"step": steps.duplicate},
        )
    for step in steps:
        await run_step(step, scope, services, paths.child(base, step.name))


async def run_step(step: Step, scope: dict[str, Any], sv: Services, path: str) -> None:
    if isinstance(step, InvokeStep):
        await _invoke(step, scope, sv, path)
    elif isinstance(step, IfStep):
        await _if(step, scope, sv, path)
    elif isinstance(step, WhileStep):
        await _while(step, scope, sv, path)
    elif isinstance(step, SwitchStep):
        await _switch(step, scope, sv, path)
    elif isinstance(step, TryStep):
        await _try(step, scope, sv, path)
    elif isinstance(step, ThrowStep):
        _throw(step, scope)
    elif isinstance(step, ValueStep):
        await _value(step, scope, path)
    else:  # pragma: no cover - the compiler builds only the kinds above
        raise TypeError(f"unknown step {step!r}")


# --- decisions ---------------------------------------------------------------------------------------------


async def decide(h: RunHandle | None, path: str, kind: str, compute: Callable[[], Any]) -> Any:
    return compute() if h is None else await h.decide(path, kind, compute)


def describe_value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, str):
        return f"the string {v!r}"
    if isinstance(v, bool):
        return f"the bool {v}"
    if isinstance(v, int | float):
        return f"the number {v!r}"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, Mapping):
        return "a map"
    return f"a {type(v).__name__}"


def type_name(v: Any) -> str:
    from telo.values import Duration, Timestamp, Uint

    t = type(v)
    names = {type(None): "null", bool: "bool", int: "int", Uint: "uint", float: "double", str: "string",
             bytes: "bytes", list: "list", Timestamp: "timestamp", Duration: "duration"}
    return names.get(t, "map" if isinstance(v, Mapping) else t.__name__)


def predicate(ev: Evaluable, scope: Mapping[str, Any], site: str) -> bool:
    """Evaluate a predicate; anything but a real boolean is refused before it is recorded (spec §4)."""
    v = ev.evaluate(scope)
    if type(v) is not bool:
        raise PredicateNotBoolean(
            f"{ev.where}: the {site} predicate must produce a boolean, but produced {describe_value(v)}",
            hint="compare explicitly, e.g. `x == 'yes'` or `size(items) > 0`; predicates are never read by truthiness",
            data={"site": ev.where, "produced": type_name(v)},
        )
    return v


# --- invoke ------------------------------------------------------------------------------------------------


def target_identity(target: Invocable) -> dict[str, str]:
    out = {"kind": target.kind, "name": target.name}
    if target.module:
        out["module"] = target.module
    return out


def publish(scope: dict[str, Any], name: str, result: Any) -> None:
    step_map(scope)[name] = {} if result is NO_VALUE else {"result": result}


async def _invoke(step: InvokeStep, scope: dict[str, Any], sv: Services, path: str) -> None:
    h = journal_for()
    when, inputs_ev = step.when, step.inputs
    # Without a handle nothing is recorded, so the decision paths are not even built (decide() would drop them).
    if when is not None:
        guard = functools.partial(predicate, when, scope, "when")
        if not (guard() if h is None else await h.decide(paths.guard_path(path), "predicate", guard)):
            return
    if h is None:
        inputs = inputs_ev.evaluate(scope) if inputs_ev is not None else {}
    else:
        inputs = await h.decide(paths.inputs_path(path), "inputs",
                                lambda: inputs_ev.evaluate(scope) if inputs_ev is not None else {})
    target = step.target.resolve(scope)

    async def execute() -> Any:
        return await attempts(step, target, inputs, sv, path)

    if h is None:
        result = await execute()
    elif step.on_unconfirmed is not None:
        with entered(derive(extra=(ON_UNCONFIRMED, step.on_unconfirmed))):
            result = await h.step(path, target_identity(target), inputs, execute)
    else:
        result = await h.step(path, target_identity(target), inputs, execute)
    if h is not None and result is not NO_VALUE:
        check = getattr(target, "check_delivery", None)  # a wait whose result is a delivered payload
        if check is not None and getattr(h, "delivered", _never)(path):
            result = check(result)
    publish(scope, step.name, result)


def _never(path: str) -> bool:
    return False


_NO_RETRY = RetryPolicy()


def retryable(exc: TeloError, policy: RetryPolicy) -> bool:
    return exc.code not in NEVER_RETRIED and exc.code not in policy.non_retryable


def suspend_allowed(resource: str) -> None:
    """Parking inside a ``noSuspend`` zone is refused, quoting that zone's own reason (spec §9)."""
    for zone in reversed(current().zones):
        if zone.has(NO_SUSPEND):
            raise SuspendForbidden(
                f"{resource!r} would park inside {zone.kind} {zone.resource or ''}, which forbids suspending: "
                f"{zone.reason(NO_SUSPEND)}".replace("  ", " "),
                hint="move the wait or the long retry outside the region, or shorten the backoff below 30 s",
                data={"resource": resource, "zone": zone.kind, "reason": zone.reason(NO_SUSPEND)},
            )


async def attempts(step: InvokeStep, target: Invocable, inputs: Any, sv: Services, path: str) -> Any:
    """One step's effect with its retry policy and per-attempt timeout (reference §3 "Retry", "Timeout").

    Retry runs INSIDE the step's effect, so the journal records one outcome per step; a backoff long enough
    to park journals its due time at ``<step>/retry[k]`` so a resumed run keeps its budget (spec §7.9).
    """
    policy = step.retry or _NO_RETRY
    ctx = current()
    k, resume_due = ctx.extra(RESUME_ATTEMPT, (0, None))
    journal = journal_for() if ctx.handle is not None else None
    if resume_due is not None:  # a resumed retry: wait out what is left of the recorded backoff, not all of it
        await _wait_until(step, path, k - 1, resume_due, sv, "resumed retry")
    while True:
        if journal is not None and k > 0:
            await journal.decide(paths.attempt_path(path, k), "attempt", functools.partial(dict, attempt=k))
        try:
            # Usually the enclosing context already says attempt 1: then there is nothing to derive.
            here = current()
            if policy.attempts > 0 and here.extra(RETRIED) is None:  # (steps inside may run again: no receipts)
                here = derive(here, extra=(RETRIED, path))
            with entered(here if here.attempt == k + 1 else derive(here, attempt=k + 1)):
                call = dispatch(target, inputs, events=sv.events, path=path)
                if step.timeout_ms is None:
                    return await call
                try:
                    return await asyncio.wait_for(call, step.timeout_ms / 1000)
                except TimeoutError:
                    raise InvokeError(
                        Code.STEP_TIMEOUT,
                        f"{step.where}: attempt {k + 1} did not finish within {step.timeout_ms:g} ms",
                        data={"step": step.name, "timeout": step.timeout_ms},
                    ) from None
        except TeloError as exc:
            if k >= policy.attempts or not retryable(exc, policy):
                raise
            backoff = policy.backoff_ms(k)
            delay = backoff if policy.jitter == "none" else sv.rng.uniform(0, backoff)
            due_at = sv.clock.now_ms() + int(delay)
            if journal is not None:  # the verdict: a crash from here on resumes at attempt k+1, at due_at
                verdict = {"attempt": k, "code": exc.code, "message": exc.message, "backoffMs": int(delay),
                           "dueAt": due_at}
                recorded = await journal.decide(paths.retry_verdict_path(path, k), "retry",
                                                functools.partial(dict, verdict))
                due_at = recorded.get("dueAt", due_at) if isinstance(recorded, Mapping) else due_at
            handle = current().handle
            if backoff >= SUSPENDING_BACKOFF_MS and handle is not None:
                # The upstream record of a suspending retry (reference §3), read by upstream runtimes too.
                due = await handle.decide(paths.retry_path(path, k), "value", functools.partial(int, due_at))
                await _wait_until(step, path, k, due if isinstance(due, int) else due_at, sv,
                                  f"retry {k + 1} of {policy.attempts} after {exc.code}")
            else:
                await sv.sleep(delay / 1000)
            k += 1


async def _wait_until(step: InvokeStep, path: str, k: int, due: int, sv: Services, reason: str) -> None:
    """Wait for a retry's due time: in process when short, parked at ``<step>/retry[k]`` when long (§7.9)."""
    remaining = due - sv.clock.now_ms()
    if remaining <= 0:
        return
    handle = current().handle
    if remaining >= SUSPENDING_BACKOFF_MS and handle is not None:
        suspend_allowed(step.name)
        await handle.park(ParkWhere(paths.retry_path(path, max(k, 0)), step.name, reason), ParkUntil(at=due))
    await sv.sleep(remaining / 1000)


# --- control flow ------------------------------------------------------------------------------------------


async def _if(step: IfStep, scope: dict[str, Any], sv: Services, path: str) -> None:
    h = journal_for()
    branches = [(paths.if_path(path), step.if_, paths.then_body(path))]
    branches += [(paths.elseif_path(path, i), b, paths.elseif_then_body(path, i)) for i, b in enumerate(step.elseifs)]
    for site, branch, body in branches:
        cond = branch.condition
        if await decide(h, site, "predicate", lambda c=cond: predicate(c, scope, "if")):  # type: ignore[misc]
            await run_steps(branch.body, scope, sv, body)
            return
    if step.else_ is not None:
        await run_steps(step.else_, scope, sv, paths.else_body(path))


async def _while(step: WhileStep, scope: dict[str, Any], sv: Services, path: str) -> None:
    turn = 0
    while True:
        h = journal_for()
        if not await decide(h, paths.while_path(path, turn), "condition",
                            lambda: predicate(step.condition, scope, "while")):
            return
        await run_steps(step.body, scope, sv, paths.do_body(path, turn))
        turn += 1


def switch_key(value: Any) -> str:
    """The case a switch value selects: converted to a string as upstream does (``true``, ``3``, ``1.5``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        from telo.values.numbers import double_text

        return double_text(value)
    return str(value)


async def _switch(step: SwitchStep, scope: dict[str, Any], sv: Services, path: str) -> None:
    h = journal_for()
    key = switch_key(await decide(h, paths.switch_path(path), "switch", lambda: step.key.evaluate(scope)))
    if key in step.cases:
        await run_steps(step.cases[key], scope, sv, paths.case_body(path, key))
    elif step.default is not None:
        await run_steps(step.default, scope, sv, paths.default_body(path))
    else:
        # The manifest's omission, not a bug in telo: the code Run.Choice raises in the same case (upstream
        # raises a plain error here, which a catch sees as INTERNAL_ERROR; telo-reference §3 switch).
        raise TeloError(Code.NO_MATCH, f"{step.where}: no matching case for {key!r} and no default",
                        hint="add a `default:` branch", data={"step": step.name, "key": key})


def error_shape(exc: BaseException, step: str) -> dict[str, Any]:
    """The ``error`` a catch or finally sees: ``{code, message, data?, step}`` (reference §2)."""
    if isinstance(exc, TeloError):
        code = exc.code or Code.INTERNAL.value
        shape: dict[str, Any] = {"code": code, "message": exc.message or code, "step": step}
        if exc.data:
            shape["data"] = exc.data
        return shape
    return {"code": Code.INTERNAL.value, "message": str(exc) or type(exc).__name__, "step": step}


async def _try(step: TryStep, scope: dict[str, Any], sv: Services, path: str) -> None:
    if step.when is not None:
        when = step.when
        h = journal_for()
        if not await decide(h, paths.try_guard_path(path), "predicate", lambda: predicate(when, scope, "when")):
            return
    try:
        await run_steps(step.body, scope, sv, paths.try_body(path))
    except Suspension:
        raise
    except Exception as exc:
        failure: BaseException = exc
        if step.catch is not None:
            try:
                await _with_error(scope, error_shape(exc, step.name), step.catch, sv, paths.catch_body(path))
            except Suspension:
                raise
            except Exception as again:
                await _finally(step, scope, sv, path, again)
                raise
            await _finally(step, scope, sv, path, None)
            return
        await _finally(step, scope, sv, path, failure)
        raise
    await _finally(step, scope, sv, path, None)


async def _with_error(scope: dict[str, Any], error: dict[str, Any] | None, body: Sequence[Step], sv: Services,
                      base: str) -> None:
    had, previous = "error" in scope, scope.get("error")
    scope["error"] = error
    try:
        await run_steps(body, scope, sv, base)
    finally:
        if had:
            scope["error"] = previous
        else:
            scope.pop("error", None)


async def _finally(step: TryStep, scope: dict[str, Any], sv: Services, path: str, exc: BaseException | None) -> None:
    if step.finally_ is not None:
        await _with_error(scope, None if exc is None else error_shape(exc, step.name), step.finally_, sv,
                          paths.finally_body(path))


def _throw(step: ThrowStep, scope: Mapping[str, Any]) -> None:
    spec = step.error.evaluate(scope)
    code = spec.get("code") if isinstance(spec, Mapping) else None
    if not isinstance(code, str) or not code:
        raise TeloError(Code.THROW_STEP_INVALID, f"{step.where}: `throw.code` must be a non-empty string, got "
                        f"{describe_value(code)}", hint="write e.g. `throw: {code: ERR_OUT_OF_STOCK, message: …}`")
    message = spec.get("message") if isinstance(spec, Mapping) else None
    data = spec.get("data") if isinstance(spec, Mapping) else None
    raise InvokeError(code, message if isinstance(message, str) and message else code,
                      data=data if isinstance(data, Mapping) else None)


async def _value(step: ValueStep, scope: dict[str, Any], path: str) -> None:
    h = journal_for()

    def compute() -> Any:
        try:
            return step.value.evaluate(scope)
        except TeloError as exc:
            raise InvokeError(exc.code, f'Step "{step.name}": {exc.message}',
                              data={"step": step.name, "data": exc.data}) from exc

    publish(scope, step.name, await decide(h, path, "value", compute))
