"""The ``run`` module's kinds (reference §3): ``Run.Sequence`` and the composers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from telo.engine.composers import Catch, Choice, IterationSpec, LoopSpec, run_choice, run_iteration, run_loop
from telo.engine.context import derive, entered, root
from telo.engine.dispatch import dispatch
from telo.engine.interpreter import run_steps
from telo.engine.steps import Evaluable, Step, compile_steps
from telo.errors import Code, TeloError
from telo.runtime.contracts import contract_for
from telo.runtime.resource import SCOPED_RESOURCES, Resource, as_invocable

if TYPE_CHECKING:
    from telo.runtime.resource import Host


class _Body(Resource):
    """A resource whose config holds a step body, compiled at init."""

    owner_kind = "Sequence"

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self.contract = contract_for(app, config)
        self.steps: tuple[Step, ...] = ()

    async def init(self) -> None:
        self.steps = compile_steps(self.config.get("steps", []), self.app.compiler,
                                   where=f"{self.kind} {self.name!r}.steps")


class Sequence(_Body):
    kind = "Run.Sequence"

    async def init(self) -> None:
        await super().init()
        self.outputs = self.field("outputs")

    async def invoke(self, inputs: Any) -> Any:
        scope: dict[str, Any] = {**self.app.module_scope(), "inputs": inputs if inputs is not None else {},
                                 "steps": {}}
        decl = self.app.decls.get(self.name)
        if decl is None or not decl.scoped:
            await run_steps(self.steps, scope, self.app.services)
        else:
            await self._with_scope(decl.scoped, scope)
        return self.outputs.evaluate(scope) if self.outputs is not None else scope["steps"]

    async def _with_scope(self, declared: Mapping[str, Any], scope: dict[str, Any]) -> None:
        """``with:`` (reference §3): resources created for this one run of the sequence, reached by name
        before module-level ones, their ``targets:`` run concurrently before the steps, all torn down after."""
        import asyncio

        table = self.app.controllers
        created = {name: table[d.kind](self.app, name, d.config, d.module) for name, d in declared.items()
                   if d.kind in table}
        outer = dict(derive().extra(SCOPED_RESOURCES) or {})
        try:
            with entered(derive(extra=(SCOPED_RESOURCES, {**outer, **created}))):
                for resource in created.values():
                    await resource.init()
                scope["resources"] = {**scope.get("resources", {}),
                                      **{n: r.snapshot() for n, r in created.items()}}
                runners = [self.app.resource_for(ref) for ref in self.config.get("targets") or []]
                background = [asyncio.ensure_future(r.run()) for r in runners if r.runnable]  # type: ignore[attr-defined]
                try:
                    await run_steps(self.steps, scope, self.app.services)
                finally:
                    for task in background:
                        task.cancel()
                    await asyncio.gather(*background, return_exceptions=True)
        finally:
            for resource in reversed(list(created.values())):
                await resource.teardown()

    async def run(self) -> None:
        await dispatch(as_invocable(self), self.app.inputs, events=self.app.events)


class Bindings:
    """``bindings:`` of Run.Value / Run.Choice (reference §3): named expressions the other expressions read as
    bare names. Lazy — one is computed only when an expression about to be evaluated reads it, at most once
    per call — and in dependency order, whatever their order in the manifest; a cycle is refused at init."""

    def __init__(self, app: Host, raw: Any, where: str) -> None:
        raw = dict(raw) if isinstance(raw, Mapping) else {}
        self.app = app
        self.names = tuple(raw)
        c = app.compiler
        self.evaluables = {n: c.value(v, where=f"{where}.bindings.{n}", names=self.names) for n, v in raw.items()}
        self.reads = {n: c.reads(v, self.names) for n, v in raw.items()}
        cycle = _cycle(self.reads)
        if cycle:
            raise TeloError(Code.MANIFEST_VALIDATION_FAILED,
                            f"{where}.bindings: {' → '.join(cycle)} read each other in a cycle",
                            hint="a binding may read other bindings, but not itself through them")

    def compile(self, node: Any, where: str) -> Evaluable:
        """An expression that may read the bindings: evaluating it first computes the ones it reads."""
        ev = self.app.compiler.value(node, where=where, names=self.names)
        reads = self.app.compiler.reads(node, self.names)
        return _Lazy(ev.where, ev, reads, self) if reads else ev

    def ensure(self, scope: dict[str, Any], wanted: frozenset[str]) -> None:
        """Compute the ``wanted`` bindings (and those they read) into ``scope``, each once per call."""
        done: set[str] = scope.setdefault(_DONE, set())
        for name in self.names:
            if name in wanted and name not in done:
                self.ensure(scope, self.reads[name])
                scope[name] = self.evaluables[name].evaluate(scope)
                done.add(name)


_DONE = "@bindings"  # scope key of the bindings computed in this call (not a CEL identifier: never read)


@dataclass(slots=True)  # not frozen: the Evaluable protocol's `where` is a plain attribute
class _Lazy:
    where: str
    inner: Evaluable
    reads: frozenset[str]
    bindings: Bindings

    def evaluate(self, scope: Mapping[str, Any]) -> Any:
        assert isinstance(scope, dict), "a bindings scope is the call's own dict"
        self.bindings.ensure(scope, self.reads)
        return self.inner.evaluate(scope)


def _cycle(reads: Mapping[str, frozenset[str]]) -> list[str]:
    """A dependency cycle among bindings, as the names along it (empty when there is none)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        path.append(name)
        for dep in sorted(reads.get(name, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep):], dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[name] = 2
        return []

    for name in reads:
        if name not in state and (found := visit(name)):
            return found
    return []


class Value(Resource):
    kind = "Run.Value"

    async def init(self) -> None:
        self.contract = contract_for(self.app, self.config)
        where = f"Run.Value {self.name!r}"
        self.value = Bindings(self.app, self.config.get("bindings"), where).compile(self.config.get("value"),
                                                                                     f"{where}.value")

    async def invoke(self, inputs: Any) -> Any:
        return self.value.evaluate({**self.app.module_scope(), "inputs": inputs if inputs is not None else {}})


def _catches(app: Host, raw: Any, where: str) -> tuple[Catch, ...]:
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
        collection = self.field("collection")
        assert collection is not None, "the schema requires `collection`"
        # `concurrency` may be CEL over {inputs} (x-telo-eval: runtime): evaluated per call; run_iteration
        # refuses anything but an integer >= 1 with INVALID_CONCURRENCY
        self.concurrency = self.app.compiler.value(self.config.get("concurrency", 1), where=f"{where}.concurrency")
        self.spec = IterationSpec(
            self.name, collection, self.steps, 1, self.field("outputs"),
            self.projection, _catches(self.app, self.config.get("catches"), f"{where}.catches"),
        )

    async def invoke(self, inputs: Any) -> Any:
        inputs = inputs if inputs is not None else {}
        module = self.app.module_scope()
        spec = replace(self.spec, concurrency=self.concurrency.evaluate({**module, "inputs": inputs}))
        return await run_iteration(spec, inputs, module, self.app.services)


class Projection(Iteration):
    kind = "Run.Projection"
    projection = True


class Loop(_Body):
    kind = "Run.Loop"

    async def init(self) -> None:
        await super().init()
        self.max_iterations = self.field("maxIterations")  # may be CEL over {inputs}: evaluated per call
        self.spec = LoopSpec(self.name, self.steps, self.field("condition"), None, self.field("outputs"),
                             _catches(self.app, self.config.get("catches"), f"{self.kind} {self.name!r}.catches"))

    async def invoke(self, inputs: Any) -> Any:
        inputs = inputs if inputs is not None else {}
        module = self.app.module_scope()
        spec = self.spec
        if self.max_iterations is not None:
            cap = self.max_iterations.evaluate({**module, "inputs": inputs})
            if type(cap) is not int or cap < 1:
                raise TeloError(Code.LOOP_INVALID, f"{self.max_iterations.where}: maxIterations must be an integer "
                                f">= 1, got {cap!r}", data={"resource": self.name})
            spec = replace(spec, max_iterations=cap)
        return await run_loop(spec, inputs, module, self.app.services)


class ChoiceKind(Resource):
    kind = "Run.Choice"

    async def init(self) -> None:
        where = f"Run.Choice {self.name!r}"
        b = Bindings(self.app, self.config.get("bindings"), where)
        self.choices = [Choice(b.compile(x.get("when"), f"{where}.choices[{i}].when"),
                               b.compile(x.get("value"), f"{where}.choices[{i}].value"))
                        for i, x in enumerate(self.config.get("choices") or [])]
        default = self.config.get("default")
        self.default = b.compile(default.get("value"), f"{where}.default") if isinstance(default, Mapping) else None

    async def invoke(self, inputs: Any) -> Any:
        scope: dict[str, Any] = {**self.app.module_scope(), "inputs": inputs if inputs is not None else {}}
        return run_choice(self.name, self.choices, self.default, scope)


class Detach(Resource):
    """Fire-and-forget: the dispatch starts on a ROOT context (no run handle, no path, no zones; spec §3)."""

    kind = "Run.Detach"

    async def init(self) -> None:
        node = self.config.get("inputs")  # the target's inputs, against {inputs}; default the call inputs
        self.inputs = None if node is None else self.app.compiler.value(node, where=f"Run.Detach {self.name!r}.inputs")

    async def invoke(self, inputs: Any) -> Any:
        target = self.app.resource_for(self.config["invoke"])
        if self.inputs is not None:
            inputs = self.inputs.evaluate({**self.app.module_scope(), "inputs": inputs if inputs is not None else {}})

        async def detached() -> None:
            with entered(derive(root())):
                await dispatch(as_invocable(target), inputs if inputs is not None else {}, events=self.app.events)

        self.app.hold(detached())
        return {"detached": True}
