"""Reference cycles among resources that invoke each other (issue 15; reference §3 "Invoke step", §6).

A call of ``Run.Sequence a`` whose step invokes ``b`` whose step invokes ``a`` never returns: each call makes the
next before it finishes, until the interpreter's stack gives out (or, across awaits, memory does). Such a manifest
is refused at load — so ``telo check`` and ``telo run`` alike report it — with one
``ERR_MANIFEST_REFERENCE_CYCLE`` per cycle (per strongly connected group of resources, spelled as its shortest
cycle ``a → b → a``), at the position of the reference that leaves the cycle's first declared resource.

Only what must loop forever is refused; recursion that can end is legitimate and passes:

* an edge is a step's ``invoke`` that runs on **every** call of its owner: a step of a body that runs once per
  call (a body slot without ``x-telo-scope``: not a Run.Iteration/Projection/Loop body, which may run zero
  times), without a ``when:`` guard, at the top of the body or inside a ``try:``/``finally:`` (which always
  run) — not under ``if``/``elseif``/``else``, ``switch``, ``while`` or ``catch``. A countdown that invokes itself
  ``when: inputs.n > 0`` is not a cycle;
* an invoke of a kind extending ``Durable.Run`` (``Local.Workflow``) is not an edge: it admits a new run and
  starts its body detached, returning at once (reference §6 "Invoke", step 5). Workflows that start each other
  make a chain of runs, not a call that never returns; the runtime caps that chain's depth
  (``telo.kinds.workflow.MAX_NESTED_RUNS``), and a run admitted by ``Local.Schedule`` starts a new chain — the
  legitimate way for a workflow to go on for ever;
* a detached slot (``Run.Detach``'s ``invoke``) is not an edge either (it returns ``{detached: true}`` at once),
  nor is a reference into an imported library, which cannot reference back into its importer (a cycle inside a
  library is reported when the library loads).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from telo.specs import KindSpec, conforms
from telo.specs.steps import branch_bodies, step_kind

from .diagnostics import ERR_MANIFEST_REFERENCE_CYCLE, Diagnostic
from .model import ResourceDecl
from .nodes import Ref

DURABLE_RUN = "Durable.Run"
# Bodies of a step that run whenever the step does (reference §3 "try": `finally` runs in every case).
_ALWAYS = frozenset({"try", "finally"})

_Edge = tuple[ResourceDecl, Ref]  # (the invoked resource, the reference that invokes it)


def reference_cycles(resources: Mapping[str, ResourceDecl], canonical_kinds: Mapping[str, KindSpec]
                     ) -> list[Diagnostic]:
    """One diagnostic per group of ``resources`` (with their ``with:`` resources) that invoke each other in a
    cycle no condition breaks."""
    decls = list(_all(resources.values()))
    by_name = {d.name: d for d in decls}
    graph: dict[int, list[_Edge]] = {}
    for decl in decls:
        edges: list[_Edge] = []
        for ref in _unconditional_invokes(decl):
            target = _resolve(ref, decl, resources, by_name)
            if target is not None and not conforms(target.spec, DURABLE_RUN, canonical_kinds):
                edges.append((target, ref))
        graph[id(decl)] = edges
    found: list[Diagnostic] = []
    for group in _groups(decls, graph):
        start = group[0]
        cycle = _shortest_cycle(start, graph, {id(d) for d in group})
        if cycle is None:
            continue  # a one-resource group without a self-loop
        names = " → ".join([start.name, *(target.name for target, _ in cycle)])
        first = cycle[0][1]
        found.append(Diagnostic(
            ERR_MANIFEST_REFERENCE_CYCLE,
            f"{start.alias_kind} {start.name!r} invokes itself through {names}: every call makes the next before "
            f"it returns, so a call never ends",
            first.pos,
            hint="guard one invoke of the cycle with `when:` (or put it under an `if:`) on an input that ends the "
                 "recursion; to repeat work without end, use a Run.Loop, or a Local.Workflow that schedules its "
                 "next run",
        ))
    return found


def _all(decls: Any) -> Iterator[ResourceDecl]:
    """The declarations and, recursively, their ``with:`` resources (which are not in the module's table)."""
    for decl in decls:
        yield decl
        yield from _all(decl.scoped.values())


def _unconditional_invokes(decl: ResourceDecl) -> Iterator[Ref]:
    for body in decl.spec.body_fields():
        if not body.scope:  # once per call; a scoped body (per item, per turn) may run zero times
            yield from _steps(decl.config.get(body.name))


def _steps(steps: Any) -> Iterator[Ref]:
    if not isinstance(steps, list):
        return
    for step in steps:
        if not isinstance(step, Mapping) or step.get("when", True) is not True:
            continue  # a guarded step may be skipped (reference §3 "Guard")
        target = step.get("invoke")
        if step_kind(step) == "invoke" and isinstance(target, Ref):
            yield target
        for keys, inner in branch_bodies(step):
            if step_kind(step) == "try" and keys[0] in _ALWAYS:
                yield from _steps(inner)


def _resolve(ref: Ref, decl: ResourceDecl, resources: Mapping[str, ResourceDecl],
             by_name: Mapping[str, ResourceDecl]) -> ResourceDecl | None:
    """What ``ref`` names from inside ``decl``: its owners' ``with:`` scopes first, then the module (as the
    graph resolved it, reference §1); ``None`` for a library's resource."""
    if ref.alias is not None:
        return None
    if ref.inline:
        return resources.get(ref.name)
    owner: ResourceDecl | None = decl
    while owner is not None:
        if ref.name in owner.scoped:
            return owner.scoped[ref.name]
        owner = by_name.get(owner.owner) if owner.owner else None
    return resources.get(ref.name)


def _groups(decls: list[ResourceDecl], graph: Mapping[int, list[_Edge]]) -> list[list[ResourceDecl]]:
    """The strongly connected groups (Tarjan's algorithm, iterative), each in declaration order, the groups
    ordered by their first member's declaration."""
    order = {id(d): i for i, d in enumerate(decls)}
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[ResourceDecl] = []
    on_stack: set[int] = set()
    out: list[list[ResourceDecl]] = []
    for root in decls:
        if id(root) in index:
            continue
        work: list[tuple[ResourceDecl, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            key = id(node)
            if i == 0:
                index[key] = low[key] = len(index)
                stack.append(node)
                on_stack.add(key)
            edges = graph.get(key, [])
            if i < len(edges):
                work.append((node, i + 1))
                target = edges[i][0]
                if id(target) not in index:
                    work.append((target, 0))
                elif id(target) in on_stack:
                    low[key] = min(low[key], index[id(target)])
                continue
            if low[key] == index[key]:
                group: list[ResourceDecl] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(id(member))
                    group.append(member)
                    if member is node:
                        break
                out.append(sorted(group, key=lambda d: order.get(id(d), len(order))))
            if work:
                parent = id(work[-1][0])
                low[parent] = min(low[parent], low[key])
    return sorted(out, key=lambda g: order.get(id(g[0]), len(order)))


def _shortest_cycle(start: ResourceDecl, graph: Mapping[int, list[_Edge]], group: set[int]) -> list[_Edge] | None:
    """The edges of a shortest path from ``start`` back to itself inside ``group`` (breadth first)."""
    came: dict[int, tuple[int, _Edge]] = {}
    queue: deque[ResourceDecl] = deque([start])
    seen = {id(start)}
    while queue:
        node = queue.popleft()
        for edge in graph.get(id(node), []):
            target = edge[0]
            if target is start:
                path = [edge]
                at = id(node)
                while at != id(start):
                    at, previous = came[at]
                    path.append(previous)
                return path[::-1]
            if id(target) in group and id(target) not in seen:
                seen.add(id(target))
                came[id(target)] = (id(node), edge)
                queue.append(target)
    return None


__all__ = ["reference_cycles"]
