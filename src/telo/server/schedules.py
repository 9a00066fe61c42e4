"""The dashboard's schedule pages (issue 17): every ``Scheduler.Cron`` / ``Scheduler.Interval`` of the manifest the
dashboard serves, with its last tick and what was done with it, its next tick and the process deciding its ticks;
one schedule's definition, policy, pause, recent tick decisions (fired, buffered, skipped and why) and operations
log; pause, resume and trigger — all through :mod:`telo.operations.schedules`, as ``telo schedules`` does.

A schedule's definition (its ticks, what it invokes, its policies) is the manifest's, its state the ledger's in
the journal (:mod:`telo.kinds.schedule_ledger`), so the pages need the manifest (``telo ui --manifest M``):
:func:`manifest_schedules` loads it once, with every resource initialised and nothing started. A manifest with
one journal is read from the dashboard's own store, whatever path it names (as ``telo.load(..., journal=)``
does), so the ticks' runs link to run pages of this dashboard. Without a manifest the pages say so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Final
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from telo.clock import SYSTEM_CLOCK, Clock
from telo.errors import Code, TeloError
from telo.journal.store import Store
from telo.kinds import schedule_ledger as ledger
from telo.kinds.schedule import Schedule
from telo.operations import schedules as ops
from telo.runtime.app import Application
from telo.server import live, operate
from telo.server.operate import Page
from telo.server.views import ActionResult

# Who the ledger records as having paused, resumed or triggered a schedule from the dashboard (its other
# actions record "... from telo ui" as their reason; a schedule's operations have a `by` of their own).
OPERATOR: Final = "telo ui"
NO_MANIFEST: Final = ("this dashboard serves a journal without a manifest, and a schedule's ticks and policies "
                      "are the manifest's")
NO_MANIFEST_HINT: Final = "start it with `telo ui --journal J --manifest M` to see and operate M's schedules"


def schedule_url(name: str, suffix: str = "", *, api: bool = False) -> str:
    """The URL of a schedule's page (or API resource), its name percent-encoded as one segment."""
    return f"{'/api' if api else ''}/schedules/{quote(name, safe='')}{suffix}"


def schedule_param(request: Request) -> str:
    return operate.segment(request, "schedule")


def manifest_schedules(manifest: str, store: Store | None = None, *,
                       clock: Clock = SYSTEM_CLOCK) -> AbstractContextManager[Application]:
    """The application the dashboard serves the schedules of: :func:`telo.operations.schedules.manifest_app`
    over the dashboard's own ``store`` (a manifest with one journal), so a tick's run links to this dashboard's
    run page."""
    return ops.manifest_app(manifest, store, clock=clock)


class Schedules:
    """The schedules of the application the dashboard serves (``app`` None: it serves a journal only). Every
    method blocks (store reads and writes): the app runs them in the thread pool."""

    def __init__(self, app: Application | None) -> None:
        self.app = app

    @property
    def manifest(self) -> str | None:
        return None if self.app is None else str(self.app.manifest.source)

    def _now(self) -> int:
        return (self.app.clock if self.app is not None else SYSTEM_CLOCK).now_ms()

    def _all(self) -> list[Schedule]:
        return [] if self.app is None else ops.schedules(self.app)

    def _find(self, name: str, *, durable: bool) -> Schedule:
        if self.app is None:
            raise TeloError(Code.SCHEDULE_NOT_FOUND, f"no schedule {name!r}: {NO_MANIFEST}", hint=NO_MANIFEST_HINT,
                            data={"schedule": name})
        found = self.app.resources.get(name)
        if not durable and isinstance(found, Schedule):  # an in-process timer has a page too (its definition)
            return found
        return ops.find_schedule(self.app, name)

    def listing(self) -> dict[str, Any]:
        """Every schedule, by name: its definition, state, last tick, next tick and holder (no history)."""
        now = self._now()
        rows = []
        for schedule in self._all():
            row = self._json(schedule, now)
            rows.append({k: v for k, v in row.items() if k not in ("recent", "ops")})
        return {"manifest": self.manifest, "schedules": rows,
                **({} if self.app is not None else {"error": {"message": NO_MANIFEST, "hint": NO_MANIFEST_HINT}})}

    def detail(self, name: str) -> dict[str, Any]:
        """One schedule: its definition and policy, its state, its recent tick decisions (each fired or
        buffered one with its run's status) and its operations log."""
        schedule = self._find(name, durable=False)
        out = self._json(schedule, self._now())
        if schedule.durable:
            store = schedule.workflow.journal.store
            statuses: dict[str, str | None] = {}
            for decision in out["recent"]:
                run = decision.get("run")
                if isinstance(run, str) and run not in statuses:
                    record = store.read_run(run)
                    statuses[run] = None if record is None else record.status
                if isinstance(run, str):
                    decision["status"] = statuses[run]
        return {**out, "manifest": self.manifest}

    def _json(self, schedule: Schedule, now: int) -> dict[str, Any]:
        view = ops.view(schedule, now)
        out = view.to_json()
        end = schedule.policy.end_at_ms
        ended = end is not None and end < now
        state = ("in-process" if not view.durable else "paused" if view.paused else "ended" if ended else "active")
        return {**out, "state": state}

    # --- the actions -------------------------------------------------------------------------------------

    def pause(self, name: str, reason: str | None) -> ActionResult:
        schedule = self._find(name, durable=True)
        was = ledger.read(schedule.workflow.journal.store, name).paused
        op = ops.pause(schedule, self._now(), by=OPERATOR, reason=reason)
        return ActionResult(True, {"schedule": name, "paused": True, "wasPaused": was, "op": op.to_json()})

    def resume(self, name: str, reason: str | None) -> ActionResult:
        schedule = self._find(name, durable=True)
        was = ledger.read(schedule.workflow.journal.store, name).paused
        op = ops.resume(schedule, self._now(), by=OPERATOR, reason=reason)
        return ActionResult(True, {"schedule": name, "paused": False, "wasPaused": was,
                                   "op": op.to_json()})

    def trigger(self, name: str, reason: str | None) -> ActionResult:
        schedule = self._find(name, durable=True)
        run = ops.trigger(schedule, self._now(), by=OPERATOR, reason=reason)
        return ActionResult(True, {"schedule": name, "run": run})

    # --- live refresh ------------------------------------------------------------------------------------

    def version(self, name: str | None = None) -> str:
        """A fingerprint of what the list (``name`` None) or a schedule's page shows: each ledger's length
        and last entry, and its claim's holder (telo.server.live polls it). An unknown name raises."""
        chosen = self._all() if name is None else [self._find(name, durable=False)]
        seen: list[Any] = []
        for schedule in chosen:
            if not schedule.durable:
                continue
            store, run = schedule.workflow.journal.store, ledger.ledger_id(schedule.name)
            record = store.read_run(run)
            claim = record.claim if record is not None else None
            seen.append([schedule.name, list(store.journal_mark(run)) if record is not None else None,
                         claim.holder if claim is not None else None])
        return hashlib.sha256(json.dumps(seen).encode()).hexdigest()[:16]


def notice(action: str, result: ActionResult) -> str:
    """What a form's answer says after a schedule action."""
    data: Mapping[str, Any] = result.data
    name = data["schedule"]
    if action == "trigger":
        return f"triggered {name}: run {data['run']} is due now; a worker (telo worker) executes it"
    if action == "pause":
        again = " (it was paused already; recorded again)" if data.get("wasPaused") else ""
        return f"paused {name}{again}: its due ticks are skipped until a resume"
    again = " (it was not paused; recorded)" if not data.get("wasPaused") else ""
    return f"resumed {name}{again}: ticks from now on fire again; the paused time is not replayed"


class SchedulePages:
    """The schedule routes over :class:`Schedules`: the pages, their JSON twins and event streams, and the POST
    actions (through :func:`telo.server.operate.action_response`: the same body parsing and CSRF check as the
    run actions, and a form answered with a redirect back to the schedule's page and a notice)."""

    def __init__(self, schedules: Schedules, page: Page) -> None:
        self.schedules = schedules
        self.page = page

    async def list_page(self, request: Request) -> Response:
        listing = await run_in_threadpool(self.schedules.listing)
        return self.page(request, "schedules.html", {"listing": listing})

    async def schedule_page(self, request: Request) -> Response:
        detail = await run_in_threadpool(self.schedules.detail, schedule_param(request))
        return self.page(request, "schedule.html", {"schedule": detail})

    async def api_list(self, request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(self.schedules.listing))

    async def api_schedule(self, request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(self.schedules.detail, schedule_param(request)))

    async def api_list_events(self, request: Request) -> Response:
        return await live.stream(request, self.schedules.version)

    async def api_schedule_events(self, request: Request) -> Response:
        name = schedule_param(request)
        return await live.stream(request, lambda: self.schedules.version(name))  # unknown: a plain 404

    async def pause(self, request: Request) -> Response:
        return await self._act(request, "pause", self.schedules.pause)

    async def resume(self, request: Request) -> Response:
        return await self._act(request, "resume", self.schedules.resume)

    async def trigger(self, request: Request) -> Response:
        return await self._act(request, "trigger", self.schedules.trigger)

    async def _act(self, request: Request, action: str, fn: Callable[[str, str | None], ActionResult]) -> Response:
        name = schedule_param(request)

        async def act(body: Mapping[str, Any], is_form: bool) -> tuple[ActionResult, str]:
            reason = body.get("reason")
            text = reason.strip() if isinstance(reason, str) else ""
            result = await run_in_threadpool(fn, name, text or None)
            return result, notice(action, result)

        return await operate.action_response(request, act, back=schedule_url(name))
