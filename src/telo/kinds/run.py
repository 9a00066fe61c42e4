"""The ``run`` module's kinds (reference §3): ``Run.Sequence`` and the composers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from telo.engine.composers import Catch, Choice, IterationSpec, LoopSpec, run_choice, run_iteration, run_loop
from telo.engine.context import derive, entered, root
from telo.engine.dispatch import dispatch
from telo.engine.interpreter import run_steps
from telo.engine.steps import Evaluable, Step, compile_steps
from telo.runtime.contracts import contract_for
from telo.runtime.resource import Resource, as_invocable

if TYPE_CHECKING:
    from telo.runtime.app import Application


class _Body(Resource):
    """A resource whose config holds a step body, compiled at init."""

    owner_kind = "Sequence"

    def __init__(self, app: Application, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self.contract = contract_for(app, config)
        self.steps: tuple[Step, ...] = ()

    def _value(self, key: str) -> Evaluable | None:
        node = self.config.get(key)
        return None if node is None else self.app.compiler.value(node, where=f"{self.kind} {self.name!r}.{key}")

    async def init(self) -> None:
        self.steps = compile_steps(self.config.get("steps", []), self.app.compiler,
                                   where=f"{self.kind} {self.name!r}.steps")


class Sequence(_Body):
    kind = "Run.Sequence"

    async def init(self) -> None:
        await super().init()
        self.outputs = self._value("outputs")

    async def invoke(self, inputs: Any) -> Any:
        scope: dict[str, Any] = {**self.app.module_scope(), "inputs": inputs if inputs is not None else {},
                                 "steps": {}}
        await run_steps(self.steps, scope, self.app.services)
        return self.outputs.evaluate(scope) if self.outputs is not None else scope["steps"]

    async def run(self) -> None:
        await dispatch(as_invocable(self), self.app.inputs, events=self.app.events)


class Value(Resource):
    kind = "Run.Value"

    async def init(self) -> None:
        self.contract = contract_for(self.app, self.config)
        self.value = self.app.compiler.value(self.config.get("value"), where=f"Run.Value {self.name!r}.value")
        self.bindings = {k: self.app.compiler.value(v, where=f"Run.Value {self.name!r}.bindings.{k}")
                         for k, v in (self.config.get("bindings") or {}).items()}

    async def invoke(self, inputs: Any) -> Any:
        scope: dict[str, Any] = {**self.app.module_scope(), "inputs": inputs if inputs is not None else {}}
        for name, ev in self.bindings.items():  # bindings see the inputs and the bindings before them
            scope[name] = ev.evaluate(scope)
        return self.value.evaluate(scope)


def _catches(app: Application, raw: Any, where: str) -> tuple[Catch, ...]:
    out = []
    for i, c in enumerate(raw or []):
        when = c.get("when")
        out.append(Catch(app.compiler.value(when, where=f"{where}[{i}].when") if when is not None else None,
                         app.compiler.value(c.get("value"), where=f"{where}[{i}].value")))
    return tuple(out)


class Iteration(_Body):
    kind = "Run.Iteration"
    projection = False

    async def init(self) -> None:
        await super().init()
        where = f"{self.kind} {self.name!r}"
        collection = self._value("collection")
        assert collection is not None, "the schema requires `collection`"
        self.spec = IterationSpec(
            self.name, collection, self.steps, int(self.config.get("concurrency", 1)), self._value("outputs"),
            self.projection, _catches(self.app, self.config.get("catches"), f"{where}.catches"),
        )

    async def invoke(self, inputs: Any) -> Any:
        return await run_iteration(self.spec, inputs if inputs is not None else {}, self.app.module_scope(),
                                   self.app.services)


class Projection(Iteration):
    kind = "Run.Projection"
    projection = True


class Loop(_Body):
    kind = "Run.Loop"

    async def init(self) -> None:
        await super().init()
        max_iterations = self.config.get("maxIterations")
        self.spec = LoopSpec(self.name, self.steps, self._value("condition"),
                             int(max_iterations) if max_iterations is not None else None, self._value("outputs"),
                             _catches(self.app, self.config.get("catches"), f"{self.kind} {self.name!r}.catches"))

    async def invoke(self, inputs: Any) -> Any:
        return await run_loop(self.spec, inputs if inputs is not None else {}, self.app.module_scope(),
                              self.app.services)


class ChoiceKind(Resource):
    kind = "Run.Choice"

    async def init(self) -> None:
        c = self.app.compiler
        where = f"Run.Choice {self.name!r}"
        self.choices = [Choice(c.value(x.get("when"), where=f"{where}.choices[{i}].when"),
                               c.value(x.get("value"), where=f"{where}.choices[{i}].value"))
                        for i, x in enumerate(self.config.get("choices") or [])]
        default = self.config.get("default")
        self.default = c.value(default.get("value"), where=f"{where}.default") if isinstance(default, Mapping) else None
        self.bindings = {k: c.value(v, where=f"{where}.bindings.{k}")
                         for k, v in (self.config.get("bindings") or {}).items()}

    async def invoke(self, inputs: Any) -> Any:
        scope: dict[str, Any] = {**self.app.module_scope(), "inputs": inputs if inputs is not None else {}}
        for name, ev in self.bindings.items():
            scope[name] = ev.evaluate(scope)
        return run_choice(self.name, self.choices, self.default, scope)


class Detach(Resource):
    """Fire-and-forget: the dispatch starts on a ROOT context (no run handle, no path, no zones; spec §3)."""

    kind = "Run.Detach"

    async def invoke(self, inputs: Any) -> Any:
        target = self.app.resource_for(self.config["invoke"])

        async def detached() -> None:
            with entered(derive(root())):
                await dispatch(as_invocable(target), inputs if inputs is not None else {}, events=self.app.events)

        self.app.hold(detached())
        return {"detached": True}
