"""Test doubles for the engine: evaluables from Python lambdas, targets, and a recording run handle."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from telo.engine.context import current
from telo.engine.steps import Evaluable, StepCompiler, TargetRef
from telo.engine.suspend import ParkUntil, ParkWhere, Suspension
from telo.engine.zones import Zone, ZoneReport
from telo.journal.model import NO_VALUE


@dataclass
class Fn:
    """An evaluable backed by a lambda over the scope (stands in for a compiled CEL expression)."""

    fn: Callable[[Mapping[str, Any]], Any]
    where: str = "test"

    def evaluate(self, scope: Mapping[str, Any]) -> Any:
        return self.fn(scope)


@dataclass
class Const:
    value: Any
    where: str = "test"

    def evaluate(self, scope: Mapping[str, Any]) -> Any:
        return self.value


@dataclass
class Target:
    """An invocable recording each call; ``fn`` computes the result from the inputs."""

    name: str
    fn: Callable[[Any], Any] = lambda inputs: inputs
    kind: str = "Test.Target"
    module: str | None = "file:///test.yaml"
    calls: list[Any] = field(default_factory=list)
    paths_seen: list[str | None] = field(default_factory=list)

    async def invoke(self, inputs: Any) -> Any:
        self.calls.append(inputs)
        self.paths_seen.append(current().path)
        return self.fn(inputs)


@dataclass
class Ref:
    target: Any
    where: str = "test"

    def resolve(self, scope: Mapping[str, Any]) -> Any:
        return self.target


class DictCompiler(StepCompiler):
    """Compiles test step dicts: callables become Fn, ``Target`` objects become refs, others constants."""

    def value(self, node: Any, *, where: str) -> Evaluable:
        if callable(node):
            return Fn(node, where)
        return Const(node, where)

    def target(self, node: Any, *, where: str, step_path: Sequence[str | int], step_name: str) -> TargetRef:
        return Ref(node, where)


@dataclass
class RecordingHandle:
    """A run handle that records every journaling call and replays what ``recorded`` holds."""

    run_id: str = "run-1"
    recorded: dict[str, Any] = field(default_factory=dict)
    calls: list[tuple[str, str, str | None]] = field(default_factory=list)  # (op, path, kind)
    reports: list[ZoneReport] = field(default_factory=list)
    attest: bool = False
    latched: Suspension | None = None

    async def step(self, path: str, target: Mapping[str, str] | None, inputs: Any, execute: Any) -> Any:
        self.calls.append(("step", path, target["name"] if target else None))
        if path in self.recorded:
            return self.recorded[path]
        value = await execute()
        self.recorded[path] = value
        return value

    async def decide(self, path: str, kind: str, compute: Callable[[], Any]) -> Any:
        self.calls.append(("decide", path, kind))
        if path in self.recorded:
            return self.recorded[path]
        value = compute()
        self.recorded[path] = value
        return value

    async def park(self, where: ParkWhere, until: ParkUntil) -> NoReturn:
        self.calls.append(("park", where.path, where.resource))
        self.latched = Suspension(self.run_id, where, until)
        raise self.latched

    def writes_inside(self, zone: Zone) -> bool:
        return self.attest

    def report_zone(self, report: ZoneReport) -> None:
        self.reports.append(report)

    def check_cancelled(self) -> None:
        return None

    def paths(self, op: str | None = None) -> list[str]:
        return [p for o, p, _ in self.calls if op is None or o == op]


__all__ = ["NO_VALUE", "Const", "DictCompiler", "Fn", "RecordingHandle", "Ref", "Target"]
