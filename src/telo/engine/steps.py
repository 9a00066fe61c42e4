"""The step grammar as typed, pre-compiled objects (reference §3).

A manifest's step list (plain data with ``!cel`` leaves) is compiled ONCE, at load time, into these
objects: expressions become :class:`Evaluable` values, so a CEL compile or type error is reported before
anything runs, and executing a step never re-parses anything. Which kind a step is follows the upstream
order of keys: ``invoke``, ``if``, ``while``, ``switch``, ``try``, ``throw``, ``value``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from telo import paths
from telo.errors import Code, EngineError
from telo.specs.durations import duration_ms


class Evaluable(Protocol):
    """A compiled expression or value template; ``where`` names it in messages (``file:line:col``)."""

    where: str

    def evaluate(self, scope: Mapping[str, Any]) -> Any: ...


class TargetRef(Protocol):
    """What an ``invoke:`` slot names, resolved at DISPATCH (spec §5.3: a reference, not an instance)."""

    where: str

    def resolve(self, scope: Mapping[str, Any]) -> Any: ...


class StepCompiler(Protocol):
    """Turns manifest nodes into evaluables; supplied by the runtime (it owns CEL and the resource graph)."""

    def value(self, node: Any, *, where: str) -> Evaluable: ...

    def target(self, node: Any, *, where: str, step_path: Sequence[str | int], step_name: str) -> TargetRef: ...


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``retry:`` (reference §3): backoff before re-attempt k (0-based) = min(maxDelay, initial × factor^k)."""

    attempts: int = 0
    initial_delay_ms: float = 250.0
    factor: float = 2.0
    max_delay_ms: float = 32_000.0
    jitter: str = "full"
    non_retryable: frozenset[str] = frozenset()

    def backoff_ms(self, k: int) -> float:
        return min(self.max_delay_ms, self.initial_delay_ms * self.factor**k)


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    where: str


@dataclass(frozen=True, slots=True)
class InvokeStep(Step):
    target: TargetRef
    inputs: Evaluable | None = None
    when: Evaluable | None = None
    retry: RetryPolicy | None = None
    timeout_ms: float | None = None
    on_unconfirmed: str | None = None


@dataclass(frozen=True, slots=True)
class Branch:
    condition: Evaluable
    body: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class IfStep(Step):
    if_: Branch
    elseifs: tuple[Branch, ...] = ()
    else_: tuple[Step, ...] | None = None


@dataclass(frozen=True, slots=True)
class WhileStep(Step):
    condition: Evaluable
    body: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class SwitchStep(Step):
    key: Evaluable
    cases: Mapping[str, tuple[Step, ...]]
    default: tuple[Step, ...] | None = None


@dataclass(frozen=True, slots=True)
class TryStep(Step):
    body: tuple[Step, ...]
    catch: tuple[Step, ...] | None = None
    finally_: tuple[Step, ...] | None = None
    when: Evaluable | None = None


@dataclass(frozen=True, slots=True)
class ThrowStep(Step):
    error: Evaluable


@dataclass(frozen=True, slots=True)
class ValueStep(Step):
    value: Evaluable


STEP_KEYS = ("invoke", "if", "while", "switch", "try", "throw", "value")


@dataclass
class _Compile:
    compiler: StepCompiler
    source: str
    owner_path: list[str | int] = field(default_factory=list)

    def steps(self, raw: Any, segs: list[str | int], where: str) -> tuple[Step, ...]:
        if not isinstance(raw, list):
            raise EngineError(Code.MANIFEST_VALIDATION_FAILED, f"{where}: a step list must be a list")
        compiled = tuple(self.step(s, [*segs, i], f"{where}[{i}]") for i, s in enumerate(raw))
        seen: set[str] = set()
        for step in compiled:
            if step.name in seen:
                return StepsWithDuplicate(compiled, step.name, where)
            seen.add(step.name)
        return compiled

    def step(self, raw: Any, segs: list[str | int], where: str) -> Step:
        if not isinstance(raw, Mapping):
            raise EngineError(Code.MANIFEST_VALIDATION_FAILED, f"{where}: a step must be a mapping")
        name = raw.get("name")
        if name is None:
            raise EngineError(Code.STEP_NAME_REQUIRED, f"{where}: a step needs a name",
                              hint="give every step a `name:` matching " + paths.STEP_NAME_PATTERN)
        name = paths.validate_step_name(name, where=where)
        here = f"{where} (step {name!r})"
        c = self.compiler

        def val(key: str) -> Evaluable | None:
            return c.value(raw[key], where=f"{here}.{key}") if key in raw else None

        if "invoke" in raw:
            return InvokeStep(
                name, here,
                target=c.target(raw["invoke"], where=f"{here}.invoke", step_path=segs, step_name=name),
                inputs=val("inputs"), when=val("when"),
                retry=_retry(raw.get("retry"), here), timeout_ms=_ms(raw.get("timeout"), f"{here}.timeout"),
                on_unconfirmed=raw.get("onUnconfirmed"),
            )
        if "if" in raw:
            elseifs = raw.get("elseif") or []
            return IfStep(
                name, here,
                if_=Branch(c.value(raw["if"], where=f"{here}.if"),
                           self.steps(raw.get("then", []), [*segs, "then"], f"{here}.then")),
                elseifs=tuple(
                    Branch(c.value(b["if"], where=f"{here}.elseif[{i}].if"),
                           self.steps(b.get("then", []), [*segs, "elseif", i, "then"], f"{here}.elseif[{i}].then"))
                    for i, b in enumerate(elseifs)
                ),
                else_=self.steps(raw["else"], [*segs, "else"], f"{here}.else") if "else" in raw else None,
            )
        if "while" in raw:
            return WhileStep(name, here, c.value(raw["while"], where=f"{here}.while"),
                             self.steps(raw.get("do", []), [*segs, "do"], f"{here}.do"))
        if "switch" in raw:
            cases = raw.get("cases") or {}
            return SwitchStep(
                name, here, c.value(raw["switch"], where=f"{here}.switch"),
                {str(k): self.steps(v, [*segs, "cases", str(k)], f"{here}.cases.{k}") for k, v in cases.items()},
                self.steps(raw["default"], [*segs, "default"], f"{here}.default") if "default" in raw else None,
            )
        if "try" in raw:
            return TryStep(
                name, here, self.steps(raw["try"], [*segs, "try"], f"{here}.try"),
                self.steps(raw["catch"], [*segs, "catch"], f"{here}.catch") if "catch" in raw else None,
                self.steps(raw["finally"], [*segs, "finally"], f"{here}.finally") if "finally" in raw else None,
                val("when"),
            )
        if "throw" in raw:
            return ThrowStep(name, here, c.value(raw["throw"], where=f"{here}.throw"))
        if "value" in raw:
            return ValueStep(name, here, c.value(raw["value"], where=f"{here}.value"))
        raise EngineError(
            Code.MANIFEST_VALIDATION_FAILED,
            f"{here}: a step needs one of {', '.join(STEP_KEYS)}",
            hint="an invoke step names its target with `invoke: !ref <resource>`",
        )


class StepsWithDuplicate(tuple):  # type: ignore[type-arg]
    """A step list in which two siblings share a name (``duplicate``). Outside a durable run that is upstream's
    behaviour (the later result overwrites the earlier); inside one both would record under one journal path
    and the second replay the first's result, so the interpreter refuses to run it (ERR_DUPLICATE_STEP_NAME)."""

    duplicate: str
    where: str

    def __new__(cls, steps: tuple[Step, ...], duplicate: str, where: str) -> StepsWithDuplicate:
        made = super().__new__(cls, steps)
        made.duplicate, made.where = duplicate, where
        return made


def compile_steps(raw: Any, compiler: StepCompiler, *, where: str, field_name: str = "steps") -> tuple[Step, ...]:
    """Compile a step list; ``field_name`` is the body field (``steps``) that starts inline-target names."""
    return _Compile(compiler, where).steps(raw, [field_name], where)


def _ms(value: Any, where: str) -> float | None:
    """A step's ``timeout`` or a retry delay in ms: a number of ms or a duration string (``1s``), one reader
    with the static checks (:func:`telo.specs.durations.duration_ms`)."""
    if value is None:
        return None
    try:
        return duration_ms(value)
    except ValueError as exc:
        raise EngineError(Code.INVALID_VALUE, f"{where}: {exc}") from exc


def _retry(raw: Any, where: str) -> RetryPolicy | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise EngineError(Code.INVALID_VALUE, f"{where}.retry: must be a mapping")
    initial = raw.get("initialDelay")
    if initial is None and raw.get("delay") is not None:
        initial = raw["delay"]  # deprecated duration-string spelling
    jitter = raw.get("jitter", "full")
    if jitter not in ("full", "none"):
        raise EngineError(Code.INVALID_VALUE, f"{where}.retry.jitter: must be `full` or `none`, got {jitter!r}")
    initial_ms = _ms(initial, f"{where}.retry.initialDelay")
    max_ms = _ms(raw.get("maxDelay"), f"{where}.retry.maxDelay")
    return RetryPolicy(
        attempts=int(raw.get("attempts", 0)),
        initial_delay_ms=250.0 if initial_ms is None else initial_ms,
        factor=float(raw.get("factor", 2)),
        max_delay_ms=32_000.0 if max_ms is None else max_ms,
        jitter=jitter,
        non_retryable=frozenset(str(c) for c in raw.get("nonRetryable") or ()),
    )
