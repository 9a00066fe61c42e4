"""Version gates (issue 17; docs/changing-workflows.md): ``Durable.Patched`` lets a workflow change while runs
are in flight, as Temporal's ``workflow.patched(id)`` and DBOS's ``DBOS.patch`` do.

A gate is decided once per run and journaled at its value path like any decision (spec §5.2), so every replay
of the run takes the branch it took. The first time a run reaches the gate, the decision is whether the run had
already gone past this position before the change: an execution replays a run's journal from its start, so a
run that had gone past the gate still holds entries this execution has not read back when it reaches the gate
— the steps (and waits, decisions) recorded after that position by the older code. Then the gate says
``patched: false`` and the run keeps the old branch. A run that reaches the gate with everything it recorded
read back (a new run, or one parked before this position) says ``true`` and takes the new one. Only entries
under the body (``steps/…``) count, and not a replayed step's own records (its intent, its attempts), which a
replay does not read once the step's receipt answers it.
"""

from __future__ import annotations

from typing import Any

from telo import paths
from telo.engine.composers import dispatch_path
from telo.engine.context import current


def progressed_past(handle: Any) -> bool:
    """Does the run's journal hold entries of the body, recorded by an earlier execution, that this execution has
    not read back yet (and that are not a read-back step's own records)?"""
    opened: frozenset[str] = getattr(handle, "opened", frozenset())
    consumed: set[str] = getattr(handle, "consumed", set())
    prefixes = tuple(c + "/" for c in consumed)
    body = paths.ROOT + "/"
    return any(p.startswith(body) and p not in consumed and not p.startswith(prefixes) for p in opened)


async def patched(resource: str, *, deprecated: bool = False) -> bool:
    """The gate ``resource``'s decision for the current run (module docstring); True outside a durable run (it
    has no past) and once the gate is ``deprecated``."""
    handle = current().handle
    if handle is None or deprecated:
        return True
    here = paths.value_path(dispatch_path(resource))
    return bool(await handle.decide(here, "patched", lambda: not progressed_past(handle)))
