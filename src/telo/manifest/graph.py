"""The resource graph: references, inline resources, ``with:`` scopes and the CEL hook (reference §1, §3;
spec §5.3).

One walk per resource follows its config *along its kind's schema*, so it knows at every node which slot it
is in:

* a :class:`Ref` is resolved (``!ref name`` in the ``with:`` scope, then the module; ``!ref Alias.name``
  among a library's exported resources) and, in an ``x-telo-ref`` slot, checked against the slot's kind;
* an inline ``{kind: …}`` in a reference slot becomes a :class:`ResourceDecl` of its own — named per spec
  §5.3 (``P(ownerKind) P(ownerName) P(step-path segments…) P(stepName)``, or its own ``metadata.name``) —
  is validated and walked in turn, and is replaced in the owner's config by ``Ref(name, inline=True)``;
* every :class:`Cel` (and each expression of a :class:`Template`) is handed to the CEL checker hook with
  the scope it will be evaluated in (:class:`CelScope`).

The step path of a nested step is the JSON path from the body field to it — ``steps, 1, then, 0`` or
``steps, 0, cases, <key>, 2`` — which is exactly the branch-key sequence the naming rule asks for.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from telo.specs import KindSpec, conforms
from telo.specs.steps import STEP_SCHEMAS, step_kind
from telo.targets import inline_target_name

from .diagnostics import (
    ERR_MANIFEST_DUPLICATE_RESOURCE,
    ERR_MANIFEST_REFERENCE_KIND,
    ERR_MANIFEST_UNKNOWN_ALIAS,
    ERR_MANIFEST_UNKNOWN_RESOURCE,
    Diagnostic,
)
from .model import Import, LibraryModule, ResourceDecl
from .nodes import Cel, Ref, Template
from .positions import join

CelMode = Literal["compile", "runtime", "step", "target"]
# CEL names visible beyond the module scope (variables, secrets, resources, module), by mode (reference §2);
# a boot target sees the results of the targets before it as `steps`.
BASE_NAMES: Mapping[str, tuple[str, ...]] = {
    "compile": (), "runtime": ("inputs",), "step": ("inputs", "steps"), "target": ("steps",),
}


@dataclass(frozen=True, slots=True)
class CelScope:
    """Where an expression is evaluated, for the CEL checker hook.

    ``mode``: ``compile`` (once at load, module scope only), ``runtime`` (per call, ``inputs`` too),
    ``step`` (inside a step body: ``inputs``, ``steps`` …) or ``target`` (a boot target: ``steps``).
    ``names`` are all the names beyond the module scope that the expression may read; ``predicate`` marks a
    field that must produce a boolean.
    """

    mode: CelMode
    names: tuple[str, ...]
    resource: str | None
    kind: str | None
    pointer: str
    predicate: bool = False


CelChecker = Callable[[Cel, CelScope], Diagnostic | None]


@dataclass(frozen=True, slots=True)
class _Ctx:
    decl: ResourceDecl  # whose config is walked (the owner, for a node of an inline declaration's slot)
    path: tuple[str | int, ...]  # from decl.config's root
    mode: CelMode
    extra: tuple[str, ...]  # x-telo-scope names gathered on the way down
    scoped: Mapping[str, ResourceDecl]  # the `with:` scope in reach
    step: tuple[tuple[str | int, ...], int] | None = None  # (step-path segments, len(path) at the step)
    step_name: str | None = None

    def down(self, key: str | int) -> _Ctx:
        return replace(self, path=(*self.path, key))


class Graph:
    """Walks resources of one module (file); collects diagnostics and the inline resources it creates."""

    def __init__(
        self,
        resources: dict[str, ResourceDecl],
        imports: Mapping[str, Import],
        canonical_kinds: Mapping[str, KindSpec],
        declare: Callable[[dict[str, Any], ResourceDecl, tuple[str | int, ...], str | None], ResourceDecl | None],
        validate: Callable[[ResourceDecl], None],
        diagnostics: list[Diagnostic],
        cel_checker: CelChecker | None,
    ) -> None:
        self.resources, self.imports, self.canonical_kinds = resources, imports, canonical_kinds
        self._declare, self._validate = declare, validate
        self.diagnostics, self.cel_checker = diagnostics, cel_checker

    # --- entry points -------------------------------------------------------------------------------------
    def walk_resource(self, decl: ResourceDecl, scoped: Mapping[str, ResourceDecl] | None = None) -> None:
        """Walk ``decl``'s config (its ``with:`` resources first, so the steps can reference them)."""
        scope = dict(scoped or {})
        for field in decl.spec.fields.values():
            items = decl.config.get(field.name)
            if decl.spec.schema.get("properties", {}).get(field.name, {}).get("x-telo-with") and isinstance(
                items, list
            ):
                for index, item in enumerate(items):
                    if isinstance(item, dict):
                        inner = self._declare(item, decl, (field.name, index), None)
                        if inner is not None:
                            self._add_scoped(decl, inner)
        scope.update(decl.scoped)
        for inner in decl.scoped.values():
            self._validate(inner)
            self.walk_resource(inner, scope)
        ctx = _Ctx(decl, (), "runtime", (), scope)
        decl.config = self.walk(decl.config, decl.spec.schema, ctx)

    def walk_target(self, step: dict[str, Any], schema: Mapping[str, Any], app: ResourceDecl, index: int,
                    name: str) -> Any:
        """Walk an inline invoke target (``{name?, invoke, …}`` at ``/targets/<index>`` of ``app``'s document);
        an inline ``invoke`` is named ``P(Application) P(appName) Targets <index> P(name)``."""
        path: tuple[str | int, ...] = ("targets", index)
        return self.walk(step, schema, _Ctx(app, path, "target", (), {}, step=(path, len(path)), step_name=name))

    def check_target_cel(self, value: Cel | Template, app: ResourceDecl, pointer: tuple[str | int, ...]) -> None:
        self._check_cel(value, {"type": "boolean"}, _Ctx(app, pointer, "target", (), {}))

    def walk(self, value: Any, schema: Mapping[str, Any], ctx: _Ctx) -> Any:
        """Walk ``value`` in the slot described by ``schema``; returns it (an inline declaration replaced)."""
        if not isinstance(schema, Mapping):
            schema = {}
        extra = ctx.extra + tuple(schema.get("x-telo-scope", ()))
        if schema.get("x-telo-bindings") and isinstance(ctx.decl.config.get("bindings"), dict):
            extra += tuple(ctx.decl.config["bindings"])
        if extra != ctx.extra:
            ctx = replace(ctx, extra=extra)
        if ctx.step is None and schema.get("x-telo-eval") in ("compile", "runtime"):
            ctx = replace(ctx, mode=schema["x-telo-eval"])
        if isinstance(value, Cel | Template):
            self._check_cel(value, schema, ctx)
            return value
        wanted = schema.get("x-telo-ref")
        if isinstance(wanted, str) and wanted.startswith("Self."):  # a library schema naming its own kind
            wanted = f"{ctx.decl.spec.module}.{wanted[5:]}"
        if isinstance(value, Ref):
            self.check_ref(value, wanted if isinstance(wanted, str) else None, ctx.scoped)
            return value
        if wanted is not None and isinstance(value, dict) and "kind" in value:
            return self._inline(value, ctx, wanted if isinstance(wanted, str) else None)
        if schema.get("x-telo-with"):
            return value  # walked by walk_resource
        if schema.get("x-telo-steps") and isinstance(value, list):
            return self._steps(value, ctx)
        if isinstance(value, dict):
            for key in list(value):
                value[key] = self.walk(value[key], _property(schema, key), ctx.down(key))
        elif isinstance(value, list):
            items = schema.get("items")
            for index, item in enumerate(value):
                value[index] = self.walk(item, items if isinstance(items, Mapping) else {}, ctx.down(index))
        return value

    # --- steps and inline resources -----------------------------------------------------------------------
    def _steps(self, steps: list[Any], ctx: _Ctx) -> list[Any]:
        # The list's step-path segments: the body field's path at the top, else the path from the step.
        segments = ctx.path if ctx.step is None else ctx.step[0] + ctx.path[ctx.step[1] :]
        for index, step in enumerate(steps):
            if not isinstance(step, dict):
                continue
            name = step.get("name")
            inner = replace(ctx.down(index), mode="step", step=((*segments, index), len(ctx.path) + 1),
                            step_name=name if isinstance(name, str) else None)
            kind = step_kind(step)
            steps[index] = self.walk(step, STEP_SCHEMAS[kind] if kind else {}, inner)
        return steps

    def _inline(self, value: dict[str, Any], ctx: _Ctx, wanted: str | None) -> Any:
        owner = ctx.decl
        name: str | None = None
        if ctx.step is not None and ctx.path == (*ctx.path[: ctx.step[1]], "invoke"):
            # A step's inline dispatch target (spec §5.3): named from the owner and the step path.
            name = inline_target_name(owner.spec.name, owner.name, ctx.step[0], ctx.step_name or "")
        else:  # any other inline slot (an inline type, a journal): the owner and the pointer
            name = inline_target_name(owner.spec.name, owner.name, ctx.path, "")
        decl = self._declare(value, owner, ctx.path, name)
        if decl is None:
            return value
        existing = self.resources.get(decl.name)
        if existing is not None:
            self.diagnostics.append(Diagnostic(
                ERR_MANIFEST_DUPLICATE_RESOURCE,
                f"inline {decl.alias_kind} is named {decl.name!r}, which {_declared(existing)} already uses",
                decl.pos, hint="give the inline resource its own `metadata: {name: …}`",
            ))
            return value
        self.resources[decl.name] = decl
        self._validate(decl)
        self.walk_resource(decl, ctx.scoped)
        if wanted and wanted != "*":
            self._check_kind(decl, wanted, decl.pos)
        return Ref(decl.name, None, decl.pos, inline=True)

    def _add_scoped(self, owner: ResourceDecl, inner: ResourceDecl) -> None:
        if inner.name in owner.scoped:
            self.diagnostics.append(Diagnostic(
                ERR_MANIFEST_DUPLICATE_RESOURCE,
                f"{owner.name!r} declares {inner.name!r} twice in `with:`", inner.pos))
        else:
            owner.scoped[inner.name] = inner

    # --- references ---------------------------------------------------------------------------------------
    def check_ref(self, ref: Ref, wanted: str | None, scoped: Mapping[str, ResourceDecl]) -> ResourceDecl | None:
        """Resolve ``ref``; report an unknown alias/resource, or a kind that does not fit ``wanted``."""
        target = self.lookup(ref, scoped)
        if target is not None and wanted:
            self._check_kind(target, wanted, ref.pos, ref)
        return target

    def lookup(self, ref: Ref, scoped: Mapping[str, ResourceDecl]) -> ResourceDecl | None:
        if ref.inline:
            return self.resources.get(ref.name)
        if ref.alias is not None:
            module = self.imports.get(ref.alias)
            if module is None:
                self._fail(ERR_MANIFEST_UNKNOWN_ALIAS, f"{ref}: no import is aliased {ref.alias!r}", ref,
                           sorted(self.imports), ref.alias)
                return None
            if not isinstance(module, LibraryModule):
                self._fail(ERR_MANIFEST_UNKNOWN_RESOURCE, f"{ref}: module {ref.alias!r} exports no resources", ref)
                return None
            if ref.name not in module.exported_resources:
                self._fail(ERR_MANIFEST_UNKNOWN_RESOURCE,
                           f"{ref}: library {module.canonical} exports no resource {ref.name!r}", ref,
                           list(module.exported_resources), ref.name)
                return None
            return module.resources.get(ref.name)
        found = scoped.get(ref.name) or self.resources.get(ref.name)
        if found is None:
            names = [n for n, r in self.resources.items() if r.owner is None] + list(scoped)
            self._fail(ERR_MANIFEST_UNKNOWN_RESOURCE, f"{ref}: no resource is named {ref.name!r}", ref, names,
                       ref.name)
        return found

    def _check_kind(self, target: ResourceDecl, wanted: str, pos: Any, ref: Ref | None = None) -> None:
        if conforms(target.spec, wanted, self.canonical_kinds):
            return
        what = str(ref) if ref else f"inline {target.alias_kind}"
        self.diagnostics.append(Diagnostic(
            ERR_MANIFEST_REFERENCE_KIND,
            f"{what}: this slot takes a {wanted}, but {target.name!r} is a {target.kind}", pos))

    def _fail(self, code: str, message: str, ref: Ref, candidates: list[str] | None = None,
              word: str | None = None) -> None:
        close = difflib.get_close_matches(word, candidates, n=1) if candidates and word else []
        self.diagnostics.append(Diagnostic(code, message, ref.pos,
                                           hint=f"did you mean {close[0]!r}?" if close else None))

    # --- CEL ----------------------------------------------------------------------------------------------
    def _check_cel(self, value: Cel | Template, schema: Mapping[str, Any], ctx: _Ctx) -> None:
        if self.cel_checker is None:
            return
        scope = CelScope(
            mode=ctx.mode,
            names=BASE_NAMES[ctx.mode] + ctx.extra,
            resource=ctx.decl.name,
            kind=ctx.decl.kind,
            pointer=join("", *ctx.path),
            predicate=schema.get("type") == "boolean" and isinstance(value, Cel),
        )
        for cel in value.expressions if isinstance(value, Template) else (value,):
            found = self.cel_checker(cel, scope)
            if found is not None:
                self.diagnostics.append(found)


def _property(schema: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The subschema for ``key`` of a mapping: ``properties``, then branches of ``allOf``/``anyOf``/``oneOf``,
    then ``additionalProperties``."""
    found = schema.get("properties", {}).get(key) if isinstance(schema.get("properties"), Mapping) else None
    if isinstance(found, Mapping):
        return found
    for branch_key in ("allOf", "anyOf", "oneOf"):
        for branch in schema.get(branch_key, ()):
            if isinstance(branch, Mapping):
                sub = _property(branch, key)
                if sub:
                    return sub
    additional = schema.get("additionalProperties")
    return additional if isinstance(additional, Mapping) else {}


def _declared(decl: ResourceDecl) -> str:
    return f"{decl.alias_kind} at {decl.pos}"
