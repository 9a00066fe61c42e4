"""``steps.<name>`` references that can never resolve: a static check of ``telo check`` and every load.

Inside a body, ``steps`` is one flat map of the results of the steps already executed in that body — steps
inside branches, loops and catch blocks included (telo-reference §2 "Scope inside step bodies"). So the names an
expression of a body may select from ``steps`` are exactly the names of the steps declared somewhere in that
body: ``steps.credits.result`` where no step is named ``credits`` evaluates to a missing-key error on every
run (or, under ``has()``, to a branch that is never taken), and it is almost always a typo or a step renamed
without its readers. A reference to a step declared *later* in the body is not refused: a polling loop reads
the previous turn's result under ``has()``.

What is checked, per resource with a step-list field (``x-telo-steps``):

* every expression of its steps (every branch, every nested body), and of its fields that see ``steps``
  (``x-telo-scope: [steps]``, e.g. ``Run.Sequence``'s ``outputs``);
* an inline resource declared inside a step (``invoke: {kind: Run.Iteration, …}``) may also read the steps
  of the resources that own it: its names are its own and its owners'.

Which fields an expression selects comes from its compiled AST (:attr:`telo.cel.Program.variables`), never
from its text; the text is only searched for where to point the diagnostic.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping
from typing import Any

from telo.cel import STANDARD_VARIABLES, CelCompileError, CelEnvironment
from telo.errors import Code
from telo.manifest import Cel, Diagnostic, Manifest, Pos, ResourceDecl, expressions_in
from telo.specs.steps import branch_bodies

__all__ = ["step_reference_checks"]

_STEPS = "steps"
WARN_UNDECLARED_STEP = "UNDECLARED_STEP"  # has(steps.x) of a step no body declares: always false


def step_reference_checks(manifest: Manifest) -> list[Diagnostic]:
    """One ``ERR_MANIFEST_CEL`` error per expression selecting a step no body in reach declares."""
    found: list[Diagnostic] = []
    resources = manifest.resources
    for decl in _declarations(resources.values()):
        if decl.module != manifest.module:
            continue  # a library's own findings are its own load's
        names = _names_in_reach(decl, resources)
        if names is None:
            continue
        for cel, site in _expressions_seeing_steps(decl):
            found.extend(_check(cel, site, decl, names))
    return found


def _declarations(decls: Iterator[ResourceDecl] | Any) -> Iterator[ResourceDecl]:
    for decl in decls:
        yield decl
        yield from _declarations(decl.scoped.values())


def _names_in_reach(decl: ResourceDecl, resources: Mapping[str, ResourceDecl]) -> frozenset[str] | None:
    """The step names ``decl``'s expressions may select: its own bodies' and its owners'; None without bodies."""
    if not decl.spec.body_fields():
        return None
    names: set[str] = set()
    owner: ResourceDecl | None = decl
    seen: set[str] = set()
    while owner is not None and owner.name not in seen:
        seen.add(owner.name)
        for body in owner.spec.body_fields():
            names.update(_step_names(owner.config.get(body.name)))
        owner = resources.get(owner.owner) if owner.owner else None
    return frozenset(names)


def _step_names(steps: Any) -> Iterator[str]:
    if not isinstance(steps, list):
        return
    for step in steps:
        if isinstance(step, Mapping):
            if isinstance(step.get("name"), str):
                yield step["name"]
            for _, body in branch_bodies(step):
                yield from _step_names(body)


def _expressions_seeing_steps(decl: ResourceDecl) -> Iterator[tuple[Cel, str]]:
    for field in decl.spec.fields.values():
        value = decl.config.get(field.name)
        if field.steps:
            yield from _in_steps(value)
        elif _STEPS in field.scope:
            yield from ((cel, f"`{field.name}`") for cel in expressions_in(value))


def _in_steps(steps: Any) -> Iterator[tuple[Cel, str]]:
    if not isinstance(steps, list):
        return
    for step in steps:
        if not isinstance(step, Mapping):
            continue
        site = f"step {step.get('name')!r}"
        bodies = branch_bodies(step)
        body_keys = {keys[0] for keys, _ in bodies}
        for key, value in step.items():
            if key == "elseif" and isinstance(value, list):  # its predicates here, its bodies below
                yield from ((cel, site) for branch in value if isinstance(branch, Mapping)
                            for cel in expressions_in(branch.get("if")))
            elif key not in body_keys:
                yield from ((cel, site) for cel in expressions_in(value))
        for _, body in bodies:
            yield from _in_steps(body)


_ENVIRONMENT: list[CelEnvironment] = []


def _environment() -> CelEnvironment:
    # Every name a body may see is declared `dyn`: this check asks only what `steps` is read for (unknown
    # names are the CEL checker's to report, at load).
    if not _ENVIRONMENT:
        extra = ("inputs", "steps", "error", "item", "index", "items", "iteration", "previous")
        _ENVIRONMENT.append(CelEnvironment({n: "dyn" for n in extra if n not in STANDARD_VARIABLES}))
    return _ENVIRONMENT[0]


def _check(cel: Cel, site: str, decl: ResourceDecl, names: frozenset[str]) -> Iterator[Diagnostic]:
    try:
        selected = _environment().compile(cel.text).variables.get(_STEPS)
    except CelCompileError:
        return  # the CEL checker reports it
    for name in sorted(selected or ()):
        if name in names:
            continue
        close = difflib.get_close_matches(name, sorted(names), n=1)
        listed = ", ".join(sorted(names)) or "none"
        hint = f"did you mean steps.{close[0]}?" if close else "name a step of this body, or declare the step"
        subject = f"{site} of {decl.alias_kind} {decl.name!r}"
        if _only_tested(cel.text, name):
            # `has(steps.x)` of a step this body lacks is merely always false: a test of scope isolation
            # (upstream's suites write one) reads so on purpose.
            yield Diagnostic(WARN_UNDECLARED_STEP, f"{subject} tests has(steps.{name}), but no step of this body "
                             f"is named {name!r} (its steps: {listed}): it is always false", _where(cel, name),
                             severity="warning", hint=hint)
            continue
        yield Diagnostic(
            Code.MANIFEST_CEL,
            f"{subject} reads steps.{name}, but no step of this body is named {name!r} (its steps: {listed}): "
            "the expression fails on every run",
            _where(cel, name),
            hint=hint,
        )


def _only_tested(text: str, name: str) -> bool:
    """Whether every mention of ``steps.<name>`` in ``text`` is a whole ``has(steps.<name>)``."""
    mentions = len(re.findall(rf"\b{_STEPS}\s*\.\s*{re.escape(name)}\b", text))
    tested = len(re.findall(rf"\bhas\(\s*{_STEPS}\s*\.\s*{re.escape(name)}\s*\)", text))
    return mentions > 0 and mentions == tested


def _where(cel: Cel, name: str) -> Pos:
    """The position of ``steps.<name>`` (or ``steps['<name>']``, ``steps.?<name>``) in the expression."""
    pattern = rf"\b{_STEPS}\s*(?:\.\??\s*{re.escape(name)}\b|\[\s*['\"]{re.escape(name)}['\"])"
    match = re.search(pattern, cel.text)
    if match is None:
        return cel.pos
    before = cel.text[: match.start()]
    line = before.count("\n") + 1
    column = match.start() - (before.rfind("\n") + 1) + 1
    return cel.locate(line, column)
