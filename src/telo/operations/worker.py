"""``telo worker``: continue due runs of every workflow in a manifest (reference §6 "Local.Resumer").

One resumer per workflow sweeps its journal, claims each due run and continues it with the same code path as
a start. Claims make any number of workers on one journal safe; PostgreSQL NOTIFY wakes them promptly.
"""

from __future__ import annotations

import asyncio
import logging

from telo.durable import shutdown
from telo.journal.model import RunFilter
from telo.kinds.controllers import load_application
from telo.kinds.resumer import Resumer
from telo.kinds.workflow import Workflow
from telo.runtime.app import Application

log = logging.getLogger("telo.durable")

IDLE_HORIZON_MS = 60_000


async def run_worker(manifest: str, *, interval: str = "1s", until_idle: bool = False) -> int:
    app = load_application(manifest)
    await app.start()
    resumers = [Resumer(app, f"worker-{wf.name}", {"workflow": _ref(app, wf), "interval": interval}, None)
                for wf in app.resources.values() if isinstance(wf, Workflow)]
    try:
        if not until_idle:
            await asyncio.gather(*(r.loop() for r in resumers))
            await app.wait_holds()
            return app.exit_code
        while not shutdown.draining():
            resumed = sum([await r.sweep() for r in resumers])
            await app.wait_holds()
            if resumed == 0 and not any(_pending(r) for r in resumers):
                return app.exit_code
            await asyncio.sleep(resumers[0].interval_s() if resumers else 0.1)
        await app.wait_holds()
        return app.exit_code
    finally:
        for r in resumers:
            await r.teardown()
        await app.close()


def _ref(app: Application, wf: Workflow) -> object:
    from telo.manifest import Ref

    decl = app.manifest.resources[wf.name]
    return Ref(wf.name, None, decl.pos)


def _pending(resumer: Resumer) -> bool:
    """Is some run of this workflow running, or due within the idle horizon? (``--until-idle``)"""
    store = resumer.workflow.journal.store
    now = resumer.app.clock.now_ms()
    for record in store.list_runs(RunFilter(workflow=resumer.workflow.name, limit=1000)).runs:
        if record.run in resumer.unreadable or record.corrupt is not None:
            continue  # this process cannot continue it: waiting for it would never end
        if record.status == "running":
            return True
        if record.status in ("scheduled", "parked") and record.due_at is not None \
                and record.due_at - now < IDLE_HORIZON_MS:
            return True
    return False
