"""``telo worker``: continue due runs of every workflow in a manifest (reference §6 "Local.Resumer"), and keep
its durable schedules ticking (issue 17, :mod:`telo.kinds.schedule`).

One resumer per workflow claims its due runs and continues each with the same code path as a start; all of a
worker's resumers share its ``concurrency`` slots (:class:`telo.durable.slots.Slots`), so the process executes
at most that many runs at once and claims no more than it can run — the other due runs stay for other workers
(issue 14). Claims make any number of workers on one journal safe; PostgreSQL NOTIFY wakes them promptly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from telo.durable import shutdown
from telo.durable.slots import DEFAULT_CONCURRENCY, Slots
from telo.journal.model import RunFilter
from telo.kinds.controllers import load_application
from telo.kinds.resumer import Resumer
from telo.kinds.schedule import Schedule
from telo.kinds.workflow import Workflow
from telo.runtime.app import Application

log = logging.getLogger("telo.durable")

IDLE_HORIZON_MS = 60_000  # --until-idle waits for a run due this soon (a fake clock's App.serve: 0, due now)


async def run_worker(manifest: str, *, interval: str = "1s", until_idle: bool = False,
                     concurrency: int = DEFAULT_CONCURRENCY) -> int:
    app = load_application(manifest)
    await app.start()
    try:
        await serve(app, interval=interval, until_idle=until_idle, concurrency=concurrency)
        await app.wait_holds()
        return app.exit_code
    finally:
        await app.close()


async def serve(app: Application, *, interval: str | int = "1s", until_idle: bool = False,
                concurrency: int = DEFAULT_CONCURRENCY, idle_horizon_ms: int = IDLE_HORIZON_MS) -> None:
    """Continue due runs of every workflow of ``app`` (started) until the process drains, the task is cancelled,
    or — ``until_idle`` — nothing is running or due within ``idle_horizon_ms``. ``interval``: a duration text,
    or milliseconds. ``telo worker`` and ``App.serve()`` are this loop, so they claim and continue alike.

    When it stops, the executions it started are waited for, so a cancel never cuts a step short: each comes
    to rest on its own (or halts at its next step while the process drains) and writes its receipt."""
    slots = Slots(concurrency)
    # an imported module's workflow is continued in its module's namespace (its own journal and ``!ref`` names)
    resumers = [Resumer(wf.app, f"worker-{wf.name}", {"workflow": _ref(wf), "interval": interval}, None, slots)
                for wf in app.every_resource() if isinstance(wf, Workflow)]
    schedules = [s for s in app.every_resource() if isinstance(s, Schedule) and s.durable]
    for schedule in schedules:  # a tick's run is claimed as soon as it is admitted, not at the next sweep
        schedule.wakers.extend(r.waker() for r in resumers if r.workflow is schedule.workflow)
    try:
        if not until_idle:
            await asyncio.gather(*(r.loop() for r in resumers), *(s.loop() for s in schedules))
        else:
            await _until_idle(resumers, schedules, slots, idle_horizon_ms)
    finally:
        for r in resumers:
            await r.teardown()
        for s in schedules:
            s.wakers.clear()
            await s.teardown()
        executing = [task for r in resumers for task in r.active]
        if executing:
            await asyncio.wait(executing)


async def _until_idle(resumers: list[Resumer], schedules: list[Schedule], slots: Slots, horizon_ms: int) -> None:
    """Keep the slots full until no run is executing, none could be claimed, and none is due soon. Each round
    first decides the schedules' due ticks (their runs are then due like any other)."""
    freed = asyncio.Event()
    slots.on_freed(freed.set)
    interval = resumers[0].interval_s() if resumers else 0.1
    nudged = False
    while not shutdown.draining():
        freed.clear()
        for schedule in schedules:
            await schedule.beat()
        started = [task for r in resumers for task in await r.fill()]
        executing = any(r.active for r in resumers)
        if not started and not executing:
            if not nudged and not any(_pending(r, horizon_ms) for r in resumers) \
                    and not await _schedules_moved(schedules):
                return
            try:  # the next sweep, or sooner when nudged: a claim a queue's fair share deferred is due (fair_share)
                await asyncio.wait_for(freed.wait(), interval)
                nudged = True  # (nothing executes here, so only a nudge frees: runs are due, no need to list them)
            except TimeoutError:
                nudged = False
            continue
        if not started or slots.free() == 0:
            # Wait for a slot to free (or, with slots free and nothing claimable now, for the next sweep).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(freed.wait(), interval if slots.free() else None)


async def _schedules_moved(schedules: list[Schedule]) -> bool:
    """One more beat of each schedule, now that nothing executes: did it write anything (a buffered tick
    admitted after the run before it settled, a pause after a failure)? Then the worker is not idle yet."""
    before = sum(s.changes for s in schedules)
    for schedule in schedules:
        await schedule.beat()
    return sum(s.changes for s in schedules) != before


def _ref(wf: Workflow) -> object:
    from telo.manifest import Ref

    decl = wf.app.manifest.resources[wf.name]
    return Ref(wf.name, None, decl.pos)


def _pending(resumer: Resumer, horizon_ms: int = IDLE_HORIZON_MS) -> bool:
    """Is some run of this workflow running, or due within the idle horizon? (``--until-idle``)"""
    store = resumer.workflow.journal.store
    now = resumer.app.clock.now_ms()
    for record in store.list_runs(RunFilter(workflow=resumer.workflow.name, limit=1000)).runs:
        if record.run in resumer.unreadable or record.corrupt is not None:
            continue  # this process cannot continue it: waiting for it would never end
        if record.status == "running":
            return True
        if record.status in ("scheduled", "parked") and record.due_at is not None \
                and record.due_at - now < horizon_ms:
            return True
    return False
