"""The dashboard's web application: server-rendered pages and a JSON API over one journal.

Pages                                  JSON
``GET /runs``                          ``GET /api/runs``                  runs, newest first, paged, searched
``GET /runs/{run}``                    ``GET /api/runs/{run}``            a run: record, inputs, result, actions
(the run page's timeline)              ``GET /api/runs/{run}/journal``    its journal as a timeline, its steps
(live refresh of the pages)            ``GET /api/events``                server-sent events: the runs changed
                                       ``GET /api/runs/{run}/events``     server-sent events: the run changed
(the run page's checkpoints)           ``GET /api/runs/{run}/checkpoints`` restore and fork points
(the run page's events, streams)       ``GET /api/runs/{run}/published``, ``/streams`` (:mod:`.messages`)
``GET /runs/{run}/streams/{stream}``   ``GET /api/runs/{run}/streams/{stream}`` a stream's values from an offset
``GET /queues``                        ``GET /api/queues``                queues with runs: depth, holding
``GET /queues/{queue}``                ``GET /api/queues/{queue}``        a queue per key and process, oldest
(live refresh of a queue page)         ``GET /api/queues/{queue}/events`` server-sent events: it changed
``GET /schedules``                     ``GET /api/schedules``             the manifest's schedules: last, next tick
``GET /schedules/{schedule}``          ``GET /api/schedules/{schedule}``  a schedule: policy, ticks decided, log
(live refresh of the schedule pages)   ``GET /api/events/schedules``, ``/api/schedules/{schedule}/events``
(forms on the pages)                   ``POST /api/...``                  the operator's actions: :mod:`.operate`,
                                                                          a schedule's: :mod:`.schedules`

A run id can hold any character, so it travels percent-encoded as ONE path segment (``/`` as ``%2F``); the
:class:`~telo.server.security.Guard` routes on the raw path and :func:`~telo.server.operate.run_param` decodes
it. Store calls block, so they run in Starlette's thread pool.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from telo.clock import token_urlsafe
from telo.errors import Code, TeloError
from telo.journal.model import STATUSES
from telo.journal.redact import redact
from telo.journal.store import Store
from telo.operations import actions
from telo.runtime.app import Application
from telo.server import console, live, messages, operate, search, views
from telo.server import queues as queue_pages
from telo.server import schedules as schedule_pages
from telo.server.operate import run_param, run_url
from telo.server.security import CSRF_FIELD, Guard

T = TypeVar("T")

# HTTP statuses of the TeloError codes an endpoint can meet; any other code is a 500.
_STATUS_OF: Mapping[str, int] = {
    Code.DURABLE_RUN_NOT_FOUND: 404,
    Code.DURABLE_MANIFEST_CHANGED: 409,
    Code.DURABLE_RUN_SETTLED: 409,
    Code.DURABLE_PAYLOAD_INVALID: 400,
    Code.DURABLE_MESSAGE_INVALID: 400,
    Code.DURABLE_TOKEN_REQUIRED: 400,
    Code.INVALID_VALUE: 400,
    Code.INVALID_CURSOR: 400,
    Code.UI_CSRF: 403,
    Code.DURABLE_EFFECT_NOT_UNCONFIRMED: 409,
    Code.DURABLE_RUN_EXISTS: 409,
    Code.RUN_BUSY: 409,
    Code.CHECKPOINT_NOT_FOUND: 404,
    Code.QUEUE_NOT_FOUND: 404,
    Code.SCHEDULE_NOT_FOUND: 404,
}


def _time_text(at: Any) -> str:
    """A time as the pages show it: the JSON's RFC 3339 text itself (UTC, milliseconds), "" for none."""
    return at if isinstance(at, str) else ""


def _duration_text(ms: Any) -> str:
    """A step's duration as the pages show it: ``850 ms``, ``12.5 s``, ``3 min 20 s``, ``2 h 5 min``; "" for none."""
    if not isinstance(ms, int):
        return ""
    if ms < 1_000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.3g} s" if ms < 10_000 else f"{ms // 1000} s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _json_text(value: Any, indent: int | None = 2) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=False)


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(loader=jinja2.PackageLoader("telo.server", "templates"),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True))
    env.filters["run_url"] = run_url
    env.filters["queue_url"] = queue_pages.queue_url
    env.filters["schedule_url"] = schedule_pages.schedule_url
    env.filters["stream_url"] = messages.stream_url
    env.filters["time"] = _time_text
    env.filters["duration"] = _duration_text
    env.filters["json"] = _json_text
    env.filters["compact"] = lambda v: _json_text(v, None)
    env.globals["STATUSES"] = STATUSES
    env.globals["CATEGORIES"] = views.CATEGORIES
    env.globals["PREVIEW"] = views.VALUE_PREVIEW
    return Jinja2Templates(env=env)


class Dashboard:
    """The application's state: the store it reads and writes, and how it renders."""

    def __init__(self, store: Store, journal_label: str) -> None:
        self.store = store
        # Shown in every page's header: a journal URL's password must not be (serve.py redacts too; a caller of
        # create_app may not have).
        self.label = redact(journal_label)
        self.templates = _templates()

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking store function in the thread pool."""
        return await run_in_threadpool(fn, self.store, *args, **kwargs)

    def page(self, request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
        base = {"journal": self.label, "csrf": request.scope.get("state", {}).get("csrf", ""),
                "csrf_field": CSRF_FIELD, "notice": request.query_params.get("notice"),
                "level": request.query_params.get("level", "ok")}
        return self.templates.TemplateResponse(request, name, {**base, **context}, status_code=status)

    # --- pages ----------------------------------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        return RedirectResponse("/runs", status_code=303)

    async def runs_page(self, request: Request) -> Response:
        listing, counts = await self._listing(request)
        return self.page(request, "runs.html", {"listing": listing, "counts": counts,
                                                "query": _query_without(request, "after"),
                                                "keep": _query_without(request, "after", "status")})

    async def run_page(self, request: Request) -> Response:
        run = run_param(request)
        detail = await self.call(views.run_detail, run)
        timeline = await self.call(views.timeline, run)
        bars = console.bars(timeline["steps"], timeline["lastSeq"], timeline["spanMs"])
        try:
            found: dict[str, Any] = await self.call(views.checkpoints, run)
        except TeloError as exc:  # a log that does not read: the timeline shows why; the page still renders
            found = {"run": run, "checkpoints": [], "error": {"code": exc.code, "message": redact(exc.message)}}
        outputs = await self.call(messages.run_outputs, run)  # its events and streams (issue 18)
        return self.page(request, "run.html", {"run": detail, "timeline": timeline, "bars": bars,
                                               "checkpoints": found, "outputs": outputs,
                                               "keep_keys_field": views.KEEP_KEYS_FIELD,
                                               "fork_note": partial(actions.fork_keys_note, keep=views.KEEP_KEYS_ASK)})

    async def queues_page(self, request: Request) -> Response:
        return self.page(request, "queues.html", {"listing": await self.call(queue_pages.queue_list)})

    async def queue_page(self, request: Request) -> Response:
        detail = await self.call(queue_pages.queue_detail, queue_pages.queue_param(request))
        return self.page(request, "queue.html", {"queue": detail})

    # --- JSON -----------------------------------------------------------------------------------------

    async def api_queues(self, request: Request) -> Response:
        return JSONResponse(await self.call(queue_pages.queue_list))

    async def api_queue(self, request: Request) -> Response:
        return JSONResponse(await self.call(queue_pages.queue_detail, queue_pages.queue_param(request)))

    async def api_queue_events(self, request: Request) -> Response:
        name = queue_pages.queue_param(request)
        await self.call(queue_pages.queue_detail, name)  # an unknown queue: a plain 404, not a stream
        return await live.stream(request, lambda: queue_pages.queue_version(self.store, name))

    async def api_runs(self, request: Request) -> Response:
        listing, counts = await self._listing(request)
        return JSONResponse({**listing, **counts})

    async def api_run(self, request: Request) -> Response:
        return JSONResponse(await self.call(views.run_detail, run_param(request)))

    async def api_journal(self, request: Request) -> Response:
        return JSONResponse(await self.call(views.timeline, run_param(request)))

    async def api_checkpoints(self, request: Request) -> Response:
        return JSONResponse(await self.call(views.checkpoints, run_param(request)))

    async def api_events(self, request: Request) -> Response:
        return await live.stream(request, lambda: live.runs_version(self.store))

    async def api_run_events(self, request: Request) -> Response:
        run = run_param(request)
        return await live.stream(request, lambda: live.run_version(self.store, run))

    async def _listing(self, request: Request) -> tuple[dict[str, Any], dict[str, Any]]:
        query = dict(request.query_params)
        listing = await self.call(search.search_runs, query)
        counts = await self.call(views.count_by_status, workflow=listing["workflow"])
        return listing, counts

    # --- errors ---------------------------------------------------------------------------------------

    async def on_telo_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, TeloError)
        status = _STATUS_OF.get(exc.code, 500)
        # A store's error may quote the journal's URL (a driver's message does): its password never leaves.
        error = {"code": exc.code, "message": redact(exc.message), **({"hint": redact(exc.hint)} if exc.hint else {})}
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": error}, status_code=status)
        return self.page(request, "error.html", {"status": status, "error": error}, status=status)

    async def on_http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        error = {"code": Code.UI_NOT_FOUND.value if exc.status_code == 404 else f"HTTP_{exc.status_code}",
                 "message": str(exc.detail)}
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": error}, status_code=exc.status_code)
        return self.page(request, "error.html", {"status": exc.status_code, "error": error},
                         status=exc.status_code)


def _query_without(request: Request, *names: str) -> str:
    return urlencode([(k, v) for k, v in request.query_params.multi_items()
                      if k not in names and k not in ("notice", "level", "token")])


def create_app(store: Store, *, token: str | None = None, journal_label: str = "",
               close_store: bool = False, application: Application | None = None) -> Starlette:
    """The dashboard over ``store``. With ``token``, every request must carry it (see
    :mod:`telo.server.security`); ``close_store`` closes the store when the server shuts down. The label is
    shown with any password redacted. ``application``: the manifest whose schedules the schedule pages show
    and operate (initialised, not started: :func:`telo.server.schedules.manifest_schedules`; the caller closes
    it); without it those pages say the dashboard has no manifest."""
    dash = Dashboard(store, journal_label or store.kind)
    schedules = schedule_pages.SchedulePages(schedule_pages.Schedules(application), dash.page)
    # The CSRF tokens' secret: new for every app, so a token is good only on the server that rendered it (a
    # restart invalidates open forms; reloading the page issues a new token for the same session cookie).
    csrf_secret = token_urlsafe(32).encode()
    ops = operate.Operations(dash.call, dash.page)
    outs = messages.MessagePages(dash.call, dash.page)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if close_store:
                await run_in_threadpool(store.close)

    routes = [
        Route("/", dash.home),
        Route("/runs", dash.runs_page),
        Route("/runs/{run}", dash.run_page),
        Route("/api/runs", dash.api_runs),
        Route("/api/runs/{run}", dash.api_run),
        Route("/api/runs/{run}/journal", dash.api_journal),
        Route("/api/events", dash.api_events),
        Route("/api/runs/{run}/events", dash.api_run_events),
        Route("/api/runs/{run}/checkpoints", dash.api_checkpoints),
        Route("/api/runs/{run}/published", outs.api_published),
        Route("/api/runs/{run}/streams", outs.api_streams),
        Route("/api/runs/{run}/streams/{stream}", outs.api_stream),
        Route("/runs/{run}/streams/{stream}", outs.stream_page),
        Route("/queues", dash.queues_page),
        Route("/queues/{queue}", dash.queue_page),
        Route("/api/queues", dash.api_queues),
        Route("/api/queues/{queue}", dash.api_queue),
        Route("/api/queues/{queue}/events", dash.api_queue_events),
        Route("/schedules", schedules.list_page),
        Route("/schedules/{schedule}", schedules.schedule_page),
        Route("/api/schedules", schedules.api_list),
        Route("/api/events/schedules", schedules.api_list_events),
        Route("/api/schedules/{schedule}", schedules.api_schedule),
        Route("/api/schedules/{schedule}/events", schedules.api_schedule_events),
        Route("/api/schedules/{schedule}/pause", schedules.pause, methods=["POST"]),
        Route("/api/schedules/{schedule}/resume", schedules.resume, methods=["POST"]),
        Route("/api/schedules/{schedule}/trigger", schedules.trigger, methods=["POST"]),
        Route("/api/deliver", ops.deliver, methods=["POST"]),
        Route("/api/runs/{run}/send", outs.send, methods=["POST"]),
        Route("/api/runs/{run}/cancel", ops.cancel, methods=["POST"]),
        Route("/api/runs/{run}/resume", ops.resume, methods=["POST"]),
        Route("/api/runs/{run}/resolve", ops.resolve, methods=["POST"]),
        Route("/api/runs/{run}/restore", ops.restore, methods=["POST"]),
        Route("/api/runs/{run}/fork", ops.fork, methods=["POST"]),
        Route("/api/bulk/cancel", ops.bulk_cancel, methods=["POST"]),
        Route("/api/bulk/resume", ops.bulk_resume, methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("telo.server", "static")]), name="static"),
    ]
    guard = Middleware(Guard, token=token, csrf_secret=csrf_secret)
    app = Starlette(routes=routes, middleware=[guard], lifespan=lifespan,
                    exception_handlers={TeloError: dash.on_telo_error, HTTPException: dash.on_http_error})
    app.state.dashboard = dash
    return app
