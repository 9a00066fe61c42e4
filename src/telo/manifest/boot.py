"""The application's boot ``targets`` (reference §1, "How targets run").

Accepted forms, run sequentially in list order:

* ``!ref name`` — ``run()`` on a runnable or service;
* ``{ref, when?}`` — the same, guarded (``ref`` may be ``!ref name`` or the plain name: the key already
  says it is a reference);
* an inline invoke step ``{name?, invoke, inputs?, when?, retry?}``; its result is published as
  ``steps.<name>.result`` and its default name is ``Target<i>`` (``i`` = 0-based position in the list).
"""

from __future__ import annotations

from typing import Any

from telo.specs.steps import PREDICATE, TARGET_STEP

from .diagnostics import ERR_MANIFEST_INVALID_NAME, ERR_MANIFEST_VALIDATION_FAILED, Diagnostic
from .graph import Graph
from .model import ResourceDecl, Target
from .nodes import Cel, Ref, Template
from .positions import join
from .reader import NAME
from .validate import validate

_REF_TARGET = {
    "type": "object",
    "properties": {"ref": {"type": "string"}, "when": PREDICATE},
    "required": ["ref"],
    "additionalProperties": False,
}
_RUNNABLE = ("runnable", "service")


def read_targets(raw: Any, app: ResourceDecl, graph: Graph, diagnostics: list[Diagnostic]) -> list[Target]:
    if raw is None or not isinstance(raw, list):
        return []  # a non-list was reported by the header schema
    table = app.positions
    out: list[Target] = []
    names: set[str] = set()
    for index, item in enumerate(raw):
        pointer = join("/targets", index)
        pos = table.value(pointer)
        target: Target | None = None
        if isinstance(item, Ref):
            target = _ref_target(item, None, index, pos, graph, diagnostics)
        elif isinstance(item, dict) and "invoke" in item:
            target = _invoke_target(item, index, app, graph, diagnostics)
        elif isinstance(item, dict) and "ref" in item:
            ref = item["ref"]
            if isinstance(ref, str):
                ref = Ref(ref, None, table.value(join(pointer, "ref")))
            checked = {**item, "ref": ref.text if isinstance(ref, Ref) else ref}
            before = len(diagnostics)
            validate(checked, _REF_TARGET, table, pointer, f"target {index}", diagnostics)
            when = item.get("when")
            if isinstance(when, Cel | Template):
                graph.check_target_cel(when, app, ("targets", index, "when"))
            if len(diagnostics) == before and isinstance(ref, Ref):
                target = _ref_target(ref, when, index, pos, graph, diagnostics)
        else:
            diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED,
                                          f"target {index}: expected `!ref name`, `{{ref, when?}}` or an inline "
                                          "invoke step `{name?, invoke, inputs?, when?, retry?}`", pos))
        if target is None:
            continue
        if target.form == "invoke" and target.name in names:
            diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED,
                                          f"two targets publish their result as steps.{target.name}", pos))
        names.add(target.name)
        out.append(target)
    return out


def _ref_target(ref: Ref, when: Any, index: int, pos: Any, graph: Graph, diagnostics: list[Diagnostic]
                ) -> Target | None:
    decl = graph.check_ref(ref, None, {})
    if decl is None:
        return None
    if not decl.spec.capabilities & set(_RUNNABLE):
        diagnostics.append(Diagnostic(
            ERR_MANIFEST_VALIDATION_FAILED,
            f"target {ref}: a {decl.kind} cannot be run (it is not runnable or a service)", ref.pos,
            hint=f"invoke it instead: `- {{invoke: !ref {ref.text}}}`"))
        return None
    return Target(ref.text, "ref", ref, when if isinstance(when, bool | Cel) else None, None, pos, index)


def _invoke_target(item: dict[str, Any], index: int, app: ResourceDecl, graph: Graph,
                   diagnostics: list[Diagnostic]) -> Target | None:
    pointer = join("/targets", index)
    name = item.get("name", f"Target{index}")
    if not (isinstance(name, str) and NAME.fullmatch(name)):
        diagnostics.append(Diagnostic(ERR_MANIFEST_INVALID_NAME, f"target name {name!r} is not a step name",
                                      app.positions.value(join(pointer, "name"))))
        return None
    before = len(diagnostics)
    validate(item, TARGET_STEP, app.positions, pointer, f"target {name!r}", diagnostics)
    step = graph.walk_target(item, TARGET_STEP, app, index, name)
    if len(diagnostics) > before:
        return None
    invoke = step.get("invoke")
    when = step.get("when")
    return Target(name, "invoke", invoke if isinstance(invoke, Ref) else None,
                  when if isinstance(when, bool | Cel) else None, {**step, "name": name},
                  app.positions.value(pointer), index)
