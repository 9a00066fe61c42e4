"""Which manifest changes are safe for a held run (issue 17; docs/changing-workflows.md).

A run whose workflow changed under it is held (spec §9 ``ERR_DURABLE_MANIFEST_CHANGED``) until an operator
accepts the change. :func:`assess` says whether accepting it is safe, by comparing what the run recorded with
the new workflow's steps, statically:

- every step the run recorded is still there, under the same path, invoking the same resource (a replay reads
  its receipt; a removed or re-targeted step is ``ERR_JOURNAL_ENTRY_MISMATCH`` or silently skipped history);
- no step is new *before* where the run is — a step preceding, in its list, a step the run recorded, of which
  the run recorded nothing — unless it is behind a version gate: a ``Durable.Patched`` step itself, or a step
  whose ``when``/``if`` (or an enclosing step's) reads a gate's result. An ungated new step there would execute,
  on resume, for a run that had gone past it.

Steps after the run's position may change freely: the run has not reached them, and executes them as the new
manifest says — that is the point of deploying. The check is static: steps inside a resource a step invokes
(a ``Run.Sequence``, an ``Idempotent`` region) are not compared, only the step that invokes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from telo import paths
from telo.journal.model import Entry
from telo.manifest import Manifest, Ref, expressions_in
from telo.specs.steps import branch_bodies
from telo.step_refs import steps_read

GATE_KIND = "Durable.Patched"
_STRUCTURE = frozenset({"then", "else", "elseif", "do", "while", "cases", "default", "try", "catch", "finally"})
_PREDICATES = ("when", "if", "switch")


@dataclass(frozen=True, slots=True)
class Assessment:
    """``safe`` unless ``reasons`` says why not (one line per finding, naming the path)."""

    reasons: tuple[str, ...] = ()

    @property
    def safe(self) -> bool:
        return not self.reasons

    def to_json(self) -> dict[str, Any]:
        return {"safe": self.safe, "reasons": list(self.reasons)}


@dataclass(frozen=True, slots=True)
class _Step:
    index: int
    siblings: tuple[str, ...]  # the names of its list, in order
    target: tuple[str, str] | None  # (kind, name) of what it invokes
    gated: bool


@dataclass
class _Body:
    steps: dict[tuple[str, ...], _Step] = field(default_factory=dict)
    gates: set[str] = field(default_factory=set)


def _target(manifest: Manifest, invoke: Any) -> tuple[str, str] | None:
    if not isinstance(invoke, Ref):
        return None
    try:
        decl = manifest.resolve(invoke)
    except KeyError:
        return None
    return decl.kind, decl.name


def _reads_gate(step: Mapping[str, Any], gates: set[str]) -> bool:
    values = [step.get(k) for k in _PREDICATES]
    elseif = step.get("elseif")
    if isinstance(elseif, list):
        values += [b.get("if") for b in elseif if isinstance(b, Mapping)]
    return any(steps_read(cel) & gates for value in values for cel in expressions_in(value))


def _walk(manifest: Manifest, steps: Any, parent: tuple[str, ...], gated: bool, body: _Body) -> None:
    if not isinstance(steps, list):
        return
    names = tuple(s["name"] for s in steps if isinstance(s, Mapping) and isinstance(s.get("name"), str))
    for index, step in enumerate(s for s in steps if isinstance(s, Mapping) and isinstance(s.get("name"), str)):
        target = _target(manifest, step.get("invoke"))
        is_gate = target is not None and target[0] == GATE_KIND
        mine = gated or is_gate or _reads_gate(step, body.gates)
        here = (*parent, step["name"])
        body.steps[here] = _Step(index, names, target, mine)
        if is_gate:
            body.gates.add(step["name"])
        for _, nested in branch_bodies(step):
            _walk(manifest, nested, here, mine, body)


def skeleton(path: str) -> tuple[str, ...]:
    """The step names along ``path`` — ``steps/check/then/reserve`` → ``(check, reserve)``: the engine's fixed
    words, case keys, reserved segments and repetition indexes dropped."""
    out: list[str] = []
    segments = paths.parse(path)[1:]
    skip = False
    for segment in segments:
        if skip:
            skip = False
            continue
        if segment.name == "cases":
            skip = True
        elif segment.name not in _STRUCTURE and not segment.name.startswith("@"):
            out.append(segment.name)
    return tuple(out)


def assess(manifest: Manifest, workflow: str, entries: Mapping[str, Entry]) -> Assessment:
    """Is accepting ``manifest`` safe for a run of ``workflow`` that recorded ``entries`` (logical path → entry)?"""
    decl = manifest.resources.get(workflow)
    if decl is None:
        return Assessment((f"the new manifest has no workflow {workflow!r}",))
    body = _Body()
    _walk(manifest, decl.config.get("steps"), (), False, body)
    reasons: list[str] = []
    recorded = [(p, e) for p, e in entries.items() if p.startswith(paths.ROOT + "/") and e.kind == "step"
                and e.target is not None]
    for path, entry in recorded:
        names = skeleton(path)
        step = body.steps.get(names)
        target = entry.target or {}
        kind, name = str(target.get("kind")), str(target.get("name"))
        if step is None:
            if not any(names[:k] in body.steps for k in range(1, len(names))):
                reasons.append(f"{path}: the run recorded this step ({kind} {name!r}); the new workflow has no "
                               "step there")
            continue
        if step.target is not None and step.target != (kind, name):
            reasons.append(f"{path}: the run recorded {kind} {name!r}; the new workflow invokes "
                           f"{step.target[0]} {step.target[1]!r} there")
        prefix = path.rsplit("/", 1)[0]
        for sibling in step.siblings[:step.index]:
            at = f"{prefix}/{sibling}"
            if any(p == at or p.startswith(at + "/") for p in entries):
                continue
            known = body.steps.get((*names[:-1], sibling))
            if known is None or not known.gated:
                reasons.append(f"{at}: a new step before where the run is, not behind a {GATE_KIND} gate: the "
                               "run would execute it on resume")
    return Assessment(tuple(dict.fromkeys(reasons)))
