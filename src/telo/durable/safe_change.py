"""Which manifest changes are safe for a held run (issue 17; docs/changing-workflows.md).

A run whose workflow changed under it is held (spec §9 ``ERR_DURABLE_MANIFEST_CHANGED``) until an operator
accepts the change. :func:`assess` says whether accepting it is safe, by comparing what the run recorded with
the new workflow's steps, statically:

- every step the run recorded is still there, under the same path, invoking the same resource (a replay reads
  its receipt; a removed or re-targeted step is ``ERR_JOURNAL_ENTRY_MISMATCH`` or silently skipped history);
- no step is new *before* where the run is — a step preceding, in its list, a step the run has recorded
  anything under (a receipt, an intent, a wait's token, a guard's decision), at any level of nesting, of which the
  run recorded nothing — unless it is behind a version gate: a ``Durable.Patched`` step itself, a step whose
  ``when`` is exactly ``steps.<gate>.result.patched``, or a step in the ``then`` body of an ``if`` that is. An
  ungated new step there would execute, on resume, for a run that had gone past it;
- every branch the run recorded entries in (``then``, ``elseif[i]``, ``else``, ``do``, a case, ``try``/``catch``/
  ``finally``) is still there.

Each entry's path is walked down the new workflow's step tree, one step name and one branch at a time, so a
step renamed or moved inside a ``try``, an ``if`` or a loop is found as surely as one at the top. The walk stops
at a step that invokes something: what lies below is that step's own records, or the body of the resource it
invokes (a ``Run.Sequence``, an ``Idempotent`` region), which is not compared — only the step that invokes it.
Steps after the run's position may change freely: the run has not reached them, and executes them as the new
manifest says — that is the point of deploying. The verdict errs towards "not safe": ``--force`` overrides it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from telo import paths
from telo.journal.model import Entry
from telo.manifest import Cel, Manifest, Ref
from telo.specs.steps import branch_bodies

GATE_KIND: Final = "Durable.Patched"
_PLAIN_BODIES: Final = frozenset({"then", "else", "default", "try", "catch", "finally"})


@dataclass(frozen=True, slots=True)
class Assessment:
    """``safe`` unless ``reasons`` says why not (one line per finding, naming the path)."""

    reasons: tuple[str, ...] = ()

    @property
    def safe(self) -> bool:
        return not self.reasons

    def to_json(self) -> dict[str, Any]:
        return {"safe": self.safe, "reasons": list(self.reasons)}


@dataclass(eq=False)
class _Node:
    """A step of the new workflow: what it invokes, whether it is gated, its branches' step lists."""

    name: str
    siblings: list[_Node]  # its list, itself included, in order
    target: tuple[str, str] | None  # (kind, name) of what it invokes
    gated: bool
    bodies: dict[tuple[str | int, ...], list[_Node]] = field(default_factory=dict)


def _target(manifest: Manifest, invoke: Any) -> tuple[str, str] | None:
    if not isinstance(invoke, Ref):
        return None
    try:
        decl = manifest.resolve(invoke)
    except KeyError:
        return None
    return decl.kind, decl.name


def _is_gate_test(value: Any, gates: set[str]) -> bool:
    """Is ``value`` exactly a gate's positive answer (``steps.G.result.patched``, optionally ``== true``)?"""
    if not isinstance(value, Cel):
        return False
    text = "".join(value.text.split()).removesuffix("==true")
    return any(text == f"steps.{g}.result.patched" for g in gates)


def _tree(manifest: Manifest, steps: Any, gated: bool, gates: set[str]) -> list[_Node]:
    nodes: list[_Node] = []
    if not isinstance(steps, list):
        return nodes
    for step in steps:
        if not isinstance(step, Mapping) or not isinstance(step.get("name"), str):
            continue
        target = _target(manifest, step.get("invoke"))
        is_gate = target is not None and target[0] == GATE_KIND
        node = _Node(step["name"], nodes, target, gated or is_gate or _is_gate_test(step.get("when"), gates))
        nodes.append(node)
        if is_gate:
            gates.add(node.name)
        for keys, body in branch_bodies(step):
            key = keys[:2] if keys[0] == "elseif" else keys  # ("elseif", i, "then") -> ("elseif", i)
            then_of_gate = keys == ("then",) and _is_gate_test(step.get("if"), gates)
            node.bodies[key] = _tree(manifest, body, node.gated or then_of_gate, gates)
    return nodes


def _walk(path: str, top: list[_Node]) -> tuple[list[tuple[_Node, str]], str | None]:
    """The steps of the new workflow ``path`` lies under, each with its path; and what the walk could not find."""
    segments = paths.parse(path)
    found: list[tuple[_Node, str]] = []
    level, i = top, 1
    while i < len(segments):
        node = next((n for n in level if n.name == segments[i].name and segments[i].index is None), None)
        if node is None:
            return found, f"{paths.format(segments[:i + 1])}: the run recorded entries under this step; the new " \
                          f"workflow has no step {segments[i].name!r} there"
        found.append((node, paths.format(segments[:i + 1])))
        i += 1
        if node.target is not None or i >= len(segments):
            return found, None  # an invoking step: below is its own records, or its target's body
        seg = segments[i]
        if seg.name in _PLAIN_BODIES and seg.index is None:
            key: tuple[str | int, ...] = (seg.name,)
        elif seg.name == "do" and seg.index is not None:
            key = ("do",)
        elif seg.name == "elseif" and seg.index is not None and i + 1 < len(segments) \
                and segments[i + 1].name == "then":
            key, i = ("elseif", seg.index), i + 1
        elif seg.name == "cases" and i + 1 < len(segments):
            key, i = ("cases", segments[i + 1].name), i + 1
        else:
            return found, None  # the step's own record (a guard, a condition, a retry): no deeper step
        body = node.bodies.get(key)
        if body is None:
            return found, f"{paths.format(segments[:i + 1])}: the run recorded entries in this branch; the new " \
                          f"workflow's step {node.name!r} has no {'/'.join(map(str, key))} branch"
        level, i = body, i + 1
    return found, None


def assess(manifest: Manifest, workflow: str, entries: Mapping[str, Entry]) -> Assessment:
    """Is accepting ``manifest`` safe for a run of ``workflow`` that recorded ``entries`` (logical path → entry)?"""
    decl = manifest.resources.get(workflow)
    if decl is None:
        return Assessment((f"the new manifest has no workflow {workflow!r}",))
    top = _tree(manifest, decl.config.get("steps"), False, set())
    reasons: list[str] = []
    touched: dict[int, str] = {}  # id of each step the run recorded something under -> its path
    for path, entry in sorted(entries.items()):
        if not path.startswith(paths.ROOT + "/"):
            continue
        found, missing = _walk(path, top)
        if missing is not None:
            reasons.append(missing)
        for node, at in found:
            touched.setdefault(id(node), at)
        if entry.kind == "step" and entry.target is not None and found and found[-1][1] == path:
            node = found[-1][0]
            kind, name = str(entry.target.get("kind")), str(entry.target.get("name"))
            if node.target is not None and node.target != (kind, name):
                reasons.append(f"{path}: the run recorded {kind} {name!r}; the new workflow invokes "
                               f"{node.target[0]} {node.target[1]!r} there")
    nodes = {id(n): n for n in _all(top)}
    for ident, at in touched.items():
        node = nodes[ident]
        prefix = at.rsplit("/", 1)[0]
        for sibling in node.siblings[:node.siblings.index(node)]:
            if id(sibling) not in touched and not sibling.gated:
                reasons.append(f"{prefix}/{sibling.name}: a new step before where the run is, not behind a "
                               f"{GATE_KIND} gate: the run would execute it on resume")
    return Assessment(tuple(dict.fromkeys(reasons)))


def _all(nodes: list[_Node]) -> list[_Node]:
    return [m for n in nodes for m in (n, *(x for body in n.bodies.values() for x in _all(body)))]
