"""The step interpreter (reference §3) and what it journals (spec §4, reference §4).

Replay is re-running the step list while the run handle returns recorded values instead of computing them
(spec §1). So every value that could steer the engine to a different step goes through ``decide`` at the
path the reference's table names, and every effect goes through ``step``; with no handle (outside a durable
run, or inside a collapsed region) the same code computes everything and records nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from telo import paths
from telo.engine.context import ON_UNCONFIRMED, current, derive, entered
from telo.engine.dispatch import Invocable, InvokeError
from telo.engine.handle import RunHandle
from telo.engine.journaling import journal_for
from telo.engine.retry import attempts
from telo.engine.services import Services as Services  # (re-exported: the interpreter's callers import it from here)
from telo.engine.steps import (
    Evaluable,
    IfStep,
    InvokeStep,
    Step,
    StepsWithDuplicate,
    SwitchStep,
    ThrowStep,
    TryStep,
    ValueStep,
    WhileStep,
)
from telo.engine.suspend import Suspension
from telo.errors import ERR_DUPLICATE_STEP_NAME, Code, PredicateNotBoolean, TeloError
from telo.journal.model import NO_VALUE


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
        code = exc.code or Code.INTERNAL
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
