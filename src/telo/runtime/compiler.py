"""Manifest nodes → engine evaluables (the runtime's :class:`~telo.engine.steps.StepCompiler`).

A configuration value is plain data with ``!cel`` / ``${{ }}`` leaves. Values without expressions compile to
constants; others to a tree whose expression leaves are compiled CEL programs — compiled once, at load time,
so a compile or type error is reported before anything runs, with its ``file:line:col``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from telo.errors import Code, TeloError
from telo.manifest import Cel, Ref, SqlText, Template, expressions_in

if TYPE_CHECKING:
    from telo.cel import CelEnvironment, Program
    from telo.cel.scope import Memo
    from telo.runtime.resource import Host

# A compiled node reads the scope and the memo its template's expressions share (see Tree), or None.
Node = Callable[[Mapping[str, Any], "Memo | None"], Any]


def has_expressions(node: Any) -> bool:
    return next(expressions_in(node), None) is not None


@dataclass(frozen=True, slots=True)
class Constant:
    value: Any
    where: str

    def evaluate(self, scope: Mapping[str, Any]) -> Any:
        return self.value


@dataclass(frozen=True, slots=True)
class Tree:
    """A value template: literal structure with compiled expression leaves, evaluated leaf by leaf.

    The leaves run back to back against one scope that nothing can change meanwhile, so when there are several
    they share one conversion of the scope values they read (a step's inputs often read one earlier result
    several times): ``shared`` gives them a fresh :data:`~telo.cel.scope.Memo` per evaluation.
    """

    fn: Node
    where: str
    deterministic: bool = True
    shared: bool = False

    def evaluate(self, scope: Mapping[str, Any]) -> Any:
        return self.fn(scope, {} if self.shared else None)


def _template_text(value: Any) -> str:
    from telo.values import to_plain

    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    plain = to_plain(value)
    if isinstance(plain, str):
        return plain
    import json

    return json.dumps(plain, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ResourceTarget:
    """An ``invoke:`` slot: resolved at DISPATCH, with-scoped names first (spec §5.3)."""

    app: Host
    ref: Ref
    where: str

    def resolve(self, scope: Mapping[str, Any]) -> Any:
        return self.app.resource_for(self.ref, where=self.where)


class Compiler:
    """Compiles manifest nodes for one application (and its CEL environment)."""

    def __init__(self, app: Host) -> None:
        self.app = app
        from telo.cel import CelEnvironment

        self.env = CelEnvironment()
        self._envs: dict[tuple[str, ...], CelEnvironment] = {(): self.env}

    def environment(self, names: Iterable[str] = ()) -> CelEnvironment:
        """The CEL environment declaring the standard scope names plus ``names`` (e.g. the ``bindings:`` of a
        ``Run.Value``/``Run.Choice``, which its expressions read as bare names)."""
        key = tuple(sorted(set(names)))
        env = self._envs.get(key)
        if env is None:
            from telo.cel import CelEnvironment

            env = self._envs[key] = CelEnvironment(dict.fromkeys(key, "dyn"))
        return env

    def program(self, node: Cel, names: Iterable[str] = ()) -> Program:
        # Positions count from the expression's first character, not its `!cel` tag: so do `telo check`'s.
        start = node.locate(1, 1)
        return self.environment(names).compile(node.text, source=start.file, line=start.line, column=start.column)

    def reads(self, node: Any, names: Iterable[str]) -> frozenset[str]:
        """Which of ``names`` the expressions inside ``node`` read."""
        wanted = frozenset(names)
        found: set[str] = set()
        for cel in expressions_in(node):
            found.update(wanted.intersection(self.program(cel, wanted).variables))
        return frozenset(found)

    def cel(self, node: Cel, names: Iterable[str] = ()) -> Node:
        program = self.program(node, names)
        clock = self.app.clock

        def run(scope: Mapping[str, Any], memo: Memo | None) -> Any:
            return program.evaluate(scope, clock=clock, memo=memo)

        return run

    def node(self, node: Any, names: Iterable[str] = ()) -> Node:
        if isinstance(node, Cel):
            return self.cel(node, names)
        if isinstance(node, SqlText):  # a bound statement: the expressions' values are parameters, never text
            fragments = [p for p in node.parts if isinstance(p, str)]
            bound = [self.cel(p, names) for p in node.parts if isinstance(p, Cel)]
            return lambda scope, memo: {"text": list(fragments), "bindings": [f(scope, memo) for f in bound]}
        if isinstance(node, Template):
            parts: list[Node | str] = [self.cel(p, names) if isinstance(p, Cel) else p for p in node.parts]

            def interpolate(scope: Mapping[str, Any], memo: Memo | None) -> Any:
                return "".join(p if isinstance(p, str) else _template_text(p(scope, memo)) for p in parts)

            return interpolate
        if isinstance(node, Mapping) and has_expressions(node):
            items = [(k, self.node(v, names)) for k, v in node.items()]
            return lambda scope, memo: {k: f(scope, memo) for k, f in items}
        if isinstance(node, list) and has_expressions(node):
            fns = [self.node(v, names) for v in node]
            return lambda scope, memo: [f(scope, memo) for f in fns]
        return _constant(node)

    def value(self, node: Any, *, where: str, names: Iterable[str] = ()) -> Any:
        """Compile ``node``; its expressions may also read ``names`` (declared ``dyn``) from the scope."""
        if not has_expressions(node):
            return Constant(node, _where(node, where))
        shared = len(list(expressions_in(node))) > 1
        return Tree(self.node(node, names), _where(node, where), shared=shared)

    def target(self, node: Any, *, where: str, step_path: Sequence[str | int], step_name: str) -> Any:
        if isinstance(node, Ref):
            return ResourceTarget(self.app, node, str(node.pos))
        raise TeloError(Code.RESOURCE_NOT_FOUND, f"{where}: `invoke` must be `!ref <resource>` or an inline resource",
                        hint="write invoke: !ref myFunction")


def _constant(value: Any) -> Node:
    return lambda scope, memo: value


def _where(node: Any, fallback: str) -> str:
    if isinstance(node, Cel | Template):
        return str(node.pos)
    return fallback
