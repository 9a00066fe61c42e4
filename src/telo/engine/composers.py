"""Composers: kinds that DRIVE a step body (reference §3 "Other composers"; spec §4 last two rows).

A composer evaluates the collection it walks and the condition it tests per turn before it hands a step list
over, so the engine never sees either: each composer journals them itself through ``decide``, under a path
qualified by its dispatch and by the turn (``<dispatch>/collection``, ``<dispatch>/while[n]``, turn n's body
under ``<dispatch>[n]/…``). Fan-out parks the BRANCH (spec §7.8): every branch settles — resolved, rejected
or parked — before the region reports, a failure stops new items from starting, a park does not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from telo import paths
from telo.engine.context import current
from telo.engine.interpreter import decide, error_shape, predicate, run_steps
from telo.engine.journaling import journal_for
from telo.engine.services import Services
from telo.engine.steps import Evaluable, Step
from telo.engine.suspend import ExecutionHalted, Suspension
from telo.errors import Code, TeloError
from telo.journal.model import NO_VALUE


def dispatch_path(resource: str) -> str:
    """The path of the step that dispatched this composer; a composer reached outside any step falls back to
    ``steps/<resourceName>`` (reference §4)."""
    return current().path or paths.fallback_path(resource)


@dataclass(frozen=True, slots=True)
class Catch:
    """A whole-operation fallback (``catches:``): the first entry whose ``when`` holds returns its value."""

    when: Evaluable | None
    value: Evaluable


def apply_catches(catches: Sequence[Catch], exc: Exception, inputs: Any, base: Mapping[str, Any]) -> Any:
    scope = {**base, "error": error_shape(exc, ""), "inputs": inputs}
    for c in catches:
        if c.when is None or predicate(c.when, scope, "catches.when"):
            return c.value.evaluate(scope)
    raise exc


@dataclass(frozen=True, slots=True)
class IterationSpec:
    """``Run.Iteration`` / ``Run.Projection``: ``collection``, ``concurrency``, ``steps``, ``outputs``."""

    resource: str
    collection: Evaluable
    steps: tuple[Step, ...]
    concurrency: int = 1
    outputs: Evaluable | None = None
    projection: bool = False
    catches: tuple[Catch, ...] = ()


async def run_iteration(spec: IterationSpec, inputs: Any, module_scope: Mapping[str, Any], sv: Services) -> Any:
    here = dispatch_path(spec.resource)
    base_scope = {**module_scope, "inputs": inputs}
    try:
        collection = await decide(journal_for(), paths.collection_path(here), "collection",
                                  lambda: spec.collection.evaluate(base_scope))
        if not isinstance(collection, list):
            raise TeloError(Code.COLLECTION_INVALID, f"{spec.collection.where}: the collection must be a list, got "
                            f"{type(collection).__name__}", data={"resource": spec.resource})
        if type(spec.concurrency) is not int or spec.concurrency < 1:
            raise TeloError(Code.CONCURRENCY_INVALID, f"{spec.resource}: concurrency must be an integer ≥ 1, got "
                            f"{spec.concurrency!r}")
        results = await _fan_out(spec, collection, base_scope, here, sv)
    except Suspension:
        raise
    except Exception as exc:
        if spec.catches:
            return apply_catches(spec.catches, exc, inputs, module_scope)
        raise
    return results if spec.projection else NO_VALUE


async def _fan_out(spec: IterationSpec, items: list[Any], base_scope: Mapping[str, Any], here: str,
                   sv: Services) -> list[Any]:
    outputs: list[Any] = [None] * len(items)
    failures: list[tuple[int, BaseException]] = []
    parks: list[tuple[int, Suspension]] = []
    halts: list[ExecutionHalted] = []
    next_index = 0
    lock = asyncio.Lock()

    async def branch(i: int) -> None:
        scope = {**base_scope, "item": items[i], "index": i, "items": items, "steps": {}}
        try:
            await run_steps(spec.steps, scope, sv, paths.turn_body(here, i))
            outputs[i] = spec.outputs.evaluate(scope) if spec.outputs is not None else scope["steps"]
        except Suspension as s:
            parks.append((i, s))
        except ExecutionHalted as h:
            halts.append(h)
        except Exception as exc:
            failures.append((i, exc))

    async def worker() -> None:
        nonlocal next_index
        while True:
            async with lock:
                if failures or halts or next_index >= len(items):
                    return  # a failure (or a halt) stops NEW items; in-flight ones finish
                i = next_index
                next_index += 1
            await branch(i)

    await asyncio.gather(*(worker() for _ in range(min(spec.concurrency, max(len(items), 1)))))
    if halts:  # the execution stops: neither the failure nor the park of a branch is its outcome
        raise halts[0]
    if failures:
        raise min(failures, key=lambda f: f[0])[1]  # a failure beats a park
    if parks:
        raise min(parks, key=lambda p: p[0])[1]
    return outputs


@dataclass(frozen=True, slots=True)
class LoopSpec:
    """``Run.Loop``: ``condition`` checked before each turn, ``maxIterations``, ``steps``, ``outputs``."""

    resource: str
    steps: tuple[Step, ...]
    condition: Evaluable | None = None
    max_iterations: int | None = None
    outputs: Evaluable | None = None
    catches: tuple[Catch, ...] = ()


async def run_loop(spec: LoopSpec, inputs: Any, module_scope: Mapping[str, Any], sv: Services) -> Any:
    if spec.condition is None and spec.max_iterations is None:
        raise TeloError(Code.LOOP_INVALID, f"{spec.resource}: a loop needs `condition`, `maxIterations`, or both")
    here = dispatch_path(spec.resource)
    previous: Any = None
    last: dict[str, Any] = {}
    turn = 0
    try:
        while spec.max_iterations is None or turn < spec.max_iterations:
            scope = {**module_scope, "inputs": inputs, "iteration": turn, "previous": previous, "steps": {}}
            if spec.condition is not None:
                cond = spec.condition
                if not await decide(journal_for(), paths.while_path(here, turn), "condition",
                                    lambda c=cond, s=scope: predicate(c, s, "condition")):  # type: ignore[misc]
                    break
            await run_steps(spec.steps, scope, sv, paths.turn_body(here, turn))
            previous = last = scope["steps"]
            turn += 1
    except Suspension:
        raise
    except Exception as exc:
        if spec.catches:
            return apply_catches(spec.catches, exc, inputs, module_scope)
        raise
    if spec.outputs is not None:
        return spec.outputs.evaluate({**module_scope, "inputs": inputs, "steps": last, "previous": previous,
                                      "iteration": turn})
    return last


@dataclass(frozen=True, slots=True)
class Choice:
    when: Evaluable
    value: Evaluable


def run_choice(resource: str, choices: Sequence[Choice], default: Evaluable | None, scope: Mapping[str, Any]) -> Any:
    """``Run.Choice``: a first-match decision table; a non-boolean ``when`` is ``ERR_INVALID_PREDICATE``."""
    for c in choices:
        v = c.when.evaluate(scope)
        if type(v) is not bool:
            raise TeloError(Code.INVALID_PREDICATE, f"{c.when.where}: a choice's `when` must be a boolean",
                            data={"resource": resource})
        if v:
            return c.value.evaluate(scope)
    if default is None:
        raise TeloError(Code.NO_MATCH, f"{resource}: no choice matched and there is no default",
                        hint="add `default: {value: …}`")
    return default.evaluate(scope)
