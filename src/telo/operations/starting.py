"""Starting runs: finding a workflow by name, and admitting a scheduled run (``telo schedule``).

Starting and attaching to a run that executes at once goes through the workflow's own dispatch (a
``Workflow`` resource admits, claims and executes, reference §6), which ``telo run`` reaches through a
manifest's targets and the Python API's ``start`` directly; both name the workflow through
:func:`find_workflow`, so an unknown name is the same error everywhere.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from telo.errors import Code, TeloError
from telo.journal.compat import writer_for
from telo.journal.model import Admission
from telo.kinds.queued import queue_fields
from telo.kinds.workflow import Workflow
from telo.runtime.app import Application

NOT_FOUND = Code.WORKFLOW_NOT_FOUND


def find_workflow(app: Application, name: str) -> Workflow:
    """The durable workflow resource ``name`` of ``app`` — ``Alias.name`` for one of an imported module —
    (``ERR_WORKFLOW_NOT_FOUND``, naming the ones it has)."""
    alias, dot, own = name.rpartition(".")
    module = app.modules.get(alias) if dot else app
    resource = None if module is None else module.resources.get(own)
    if isinstance(resource, Workflow):
        return resource
    names = sorted(n for n, r in app.resources.items() if isinstance(r, Workflow))
    names += sorted(f"{a}.{n}" for a, m in app.modules.items() for n, r in m.resources.items()
                    if isinstance(r, Workflow))
    raise TeloError(NOT_FOUND, f"{name!r} is not a durable workflow of {app.manifest.source}",
                    hint=f"its workflows: {', '.join(names) or 'none'}", data={"resource": name})


@dataclass(frozen=True, slots=True)
class Scheduled:
    """What :func:`schedule` did: ``scheduled`` is false when the run id already exists (``status`` is that
    run's)."""

    run: str
    scheduled: bool
    workflow: str
    status: str
    due_at: int | None = None


def due_ms(after: Any, at: Any, now_ms: int, *, names: tuple[str, str] = ("after", "at")) -> int:
    """When a scheduled run is due, from exactly one of ``after`` (a duration from ``now_ms``: ``90s``, ``2h``,
    or a number of seconds, or a ``timedelta``) and ``at`` (epoch ms, a ``datetime``, a
    :class:`~telo.values.Timestamp`, or RFC 3339 text); ``ERR_DURABLE_SCHEDULE_INVALID`` otherwise. ``names``:
    how errors name the two (``telo schedule``: ``--after``, ``--at``)."""
    from telo.kinds.addressing import duration_ms, instant_ms

    if (after is None) == (at is None):
        raise TeloError(Code.DURABLE_SCHEDULE_INVALID, "give exactly one of after= and at=",
                        hint="after='15m' (or seconds), or at= a timestamp or epoch ms")
    if after is not None:
        if isinstance(after, datetime.timedelta):
            return now_ms + int(after.total_seconds() * 1000)
        if isinstance(after, int | float) and not isinstance(after, bool):
            return now_ms + int(after * 1000)  # seconds, as every wait of the Python API
        return now_ms + duration_ms(after, names[0])
    if isinstance(at, datetime.datetime):
        return int(at.timestamp() * 1000)
    return instant_ms(int(at) if isinstance(at, str) and at.isdigit() else at, Code.DURABLE_SCHEDULE_INVALID,
                      names[1])


async def schedule(app: Application, workflow: str, inputs: Mapping[str, Any], run_id: str | None,
                   due_ms: int) -> Scheduled:
    """Admit a ``scheduled`` run of ``workflow`` due at ``due_ms``, as ``Local.Schedule`` does, with the
    workflow's run-id rule and manifest digest; nothing executes here (a worker starts it when due).
    ``app`` must be started."""
    wf = find_workflow(app, workflow)
    inputs = wf.checked_inputs(inputs)
    run = run_id or wf.run_id_for(dict(inputs))
    digest = wf.body.digest
    result = await asyncio.to_thread(wf.journal.store.admit, Admission.of(
        run, status="scheduled", due_at=due_ms, inputs=dict(inputs), workflow=wf.name,
        manifest_digest=digest.value if digest else None, digest_scope=digest.scope if digest else None,
        writer=writer_for(wf.journal.store), **queue_fields(wf.queue, dict(inputs))))
    if not result.admitted:
        return Scheduled(run, False, wf.name, result.record.status)
    return Scheduled(run, True, wf.name, "scheduled", due_ms)
