"""The dashboard's web application: server-rendered pages and a JSON API over one journal.

Pages                                  JSON
``GET /runs``                          ``GET /api/runs``                  runs, newest first, paged, searched
``GET /runs/{run}``                    ``GET /api/runs/{run}``            a run: record, inputs, result, actions
(the run page's timeline)              ``GET /api/runs/{run}/journal``    its journal as a timeline, its steps
(live refresh of the pages)            ``GET /api/events``                server-sent events: the runs changed
                                       ``GET /api/runs/{run}/events``     server-sent events: the run changed
(forms on the run page)                ``POST /api/deliver``              deliver ``{token, payload}``
                                       ``POST /api/runs/{run}/cancel``    cancel ``{reason?}``
                                       ``POST /api/runs/{run}/resume``    resume ``{reason?, force?}``

A run id can hold any character, so it travels percent-encoded as ONE path segment (``/`` as ``%2F``); the
:class:`~telo.server.security.Guard` routes on the raw path and :func:`run_param` decodes it. The POST
endpoints take JSON or a form: a form (the run page's) is answered with a redirect back to the page and a
notice, JSON with JSON. Store calls block, so they run in Starlette's thread pool.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, unquote, urlencode

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
from telo.server import console, live, search, views
from telo.server.security import CSRF_FIELD, Guard, csrf_ok
from telo.values import from_plain

T = TypeVar("T")

# HTTP statuses of the TeloError codes an endpoint can meet; any other code is a 500.
_STATUS_OF: Mapping[str, int] = {
    Code.DURABLE_RUN_NOT_FOUND: 404,
    Code.DURABLE_MANIFEST_CHANGED: 409,
    Code.DURABLE_RUN_SETTLED: 409,
    Code.DURABLE_PAYLOAD_INVALID: 400,
    Code.DURABLE_TOKEN_REQUIRED: 400,
    Code.INVALID_VALUE: 400,
    Code.INVALID_CURSOR: 400,
    Code.UI_CSRF: 403,
}
_FORM_TYPES = ("application/x-www-form-urlencoded",)
MAX_BODY = 1 << 20  # a payload is a JSON value for a journal entry, not an upload


def run_url(run: str, suffix: str = "", *, api: bool = False) -> str:
    """The URL of a run's page (or API resource): the id percent-encoded as one segment, whatever it holds."""
    return f"{'/api' if api else ''}/runs/{quote(run, safe='')}{suffix}"


def run_param(request: Request) -> str:
    """The run id of a ``/runs/{run}`` route, decoded (the route matched the raw, still-encoded path)."""
    return unquote(str(request.path_params["run"]), errors="strict")


def _time_text(at: Any) -> str:
    """A time as the pages show it: the JSON's RFC 3339 text itself (UTC, milliseconds), "" for none."""
    return at if isinstance(at, str) else ""


def _json_text(value: Any, indent: int | None = 2) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=False)


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(loader=jinja2.PackageLoader("telo.server", "templates"),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True))
    env.filters["run_url"] = run_url
    env.filters["time"] = _time_text
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
        bars = console.bars(timeline["steps"], timeline["lastSeq"])
        return self.page(request, "run.html", {"run": detail, "timeline": timeline, "bars": bars})

    # --- JSON -----------------------------------------------------------------------------------------

    async def api_runs(self, request: Request) -> Response:
        listing, counts = await self._listing(request)
        return JSONResponse({**listing, **counts})

    async def api_run(self, request: Request) -> Response:
        return JSONResponse(await self.call(views.run_detail, run_param(request)))

    async def api_journal(self, request: Request) -> Response:
        return JSONResponse(await self.call(views.timeline, run_param(request)))

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

    # --- actions --------------------------------------------------------------------------------------

    async def api_deliver(self, request: Request) -> Response:
        async def act(body: Mapping[str, Any], is_form: bool) -> tuple[views.ActionResult, str]:
            token = body.get("token")
            if not isinstance(token, str) or not token:
                raise TeloError(Code.DURABLE_TOKEN_REQUIRED, "a delivery needs the token the run parked on")
            raw: Any = body.get("payload")
            # A form carries the payload as JSON text; a JSON body carries it as plain JSON.
            payload = (actions.payload_from_json(str(raw or "null"), "the payload") if is_form
                       else from_plain(raw, {}))
            result = await self.call(views.deliver, token, payload)
            return result, (f"delivered to {token}" if result.done else
                            f"nothing is parked on token {token!r}: it was already delivered, or never issued")

        return await _action(request, act)

    async def api_cancel(self, request: Request) -> Response:
        run = run_param(request)

        async def act(body: Mapping[str, Any], is_form: bool) -> tuple[views.ActionResult, str]:
            result = await self.call(views.cancel, run, str(body.get("reason") or "cancelled from telo ui"))
            return result, ("cancelled" if result.done else
                            f"not cancelled: the run is already {result.data.get('status')}")

        return await _action(request, act, run)

    async def api_resume(self, request: Request) -> Response:
        run = run_param(request)

        async def act(body: Mapping[str, Any], is_form: bool) -> tuple[views.ActionResult, str]:
            force = body.get("force") in (True, "true", "1", "on")
            result = await self.call(views.resume, run, str(body.get("reason") or "resumed from telo ui"),
                                     force=force)
            if not result.done:
                why = result.data.get("reason") or f"the run is {result.data.get('status')}"
                hint = f" — {result.data['hint']}" if result.data.get("hint") else ""
                return result, f"not resumed: {why}{hint}"
            forced = " against the changed manifest (recorded)" if result.data.get("forced") else ""
            return result, f"resumed{forced}: a worker (telo worker) or a rerun continues it"

        return await _action(request, act, run)

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


Action = Callable[[Mapping[str, Any], bool], Awaitable[tuple[views.ActionResult, str]]]


async def _action(request: Request, act: Action, run: str | None = None) -> Response:
    """Run a POST action on its JSON or form body. A form (the run page's) is answered with a redirect back
    to its page carrying a notice, its failure too; JSON with the action's report (409 if it did nothing)."""
    ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    is_form = ctype in _FORM_TYPES
    body = await _body(request, is_form)
    back = _local_path(body.get("next")) or (run_url(run) if run else "/runs")
    try:
        result, notice = await act(body, is_form)
    except TeloError as exc:
        if not is_form:
            raise
        return _redirect_notice(back, f"{exc.code}: {redact(exc.message)}", "error")
    if not is_form:
        return JSONResponse(result.data, status_code=200 if result.done else 409)
    target = _local_path(body.get("next")) or (run_url(result.run) if result.run else back)
    return _redirect_notice(target, notice, "ok" if result.done else "error")


async def _body(request: Request, is_form: bool) -> dict[str, Any]:
    """The POST body as a dict, after the CSRF check (a form carries the session's token in a field)."""
    body: dict[str, Any]
    declared = request.headers.get("content-length", "0")
    if not declared.isdigit() or int(declared) > MAX_BODY:  # refused before reading a byte of it
        raise TeloError(Code.INVALID_VALUE, f"the request body must be at most {MAX_BODY} bytes")
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise TeloError(Code.INVALID_VALUE, f"the request body is larger than {MAX_BODY} bytes")
    if is_form:
        # The pages' forms are urlencoded; parsed here rather than through python-multipart, one dependency less.
        try:
            body = dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=100))
        except (UnicodeDecodeError, ValueError) as exc:
            raise TeloError(Code.INVALID_VALUE, f"the form is not urlencoded UTF-8: {exc}") from exc
    else:
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            raise TeloError(Code.INVALID_VALUE, f"the request body is not JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise TeloError(Code.INVALID_VALUE, "the request body must be a JSON object")
        body = parsed
    supplied = body.get(CSRF_FIELD)
    if not csrf_ok(request, supplied if isinstance(supplied, str) else None):
        raise TeloError(Code.UI_CSRF, "cross-site request refused: POST from the dashboard's own pages, send "
                        "its Origin, or authenticate with 'Authorization: Bearer <token>'")
    return body


def _redirect_notice(target: str, notice: str, level: str) -> Response:
    base = target.split("?", 1)[0]
    return RedirectResponse(f"{base}?{urlencode({'notice': notice, 'level': level})}", status_code=303)


_LOCAL = re.compile(r"^/(?![/\\])[^\s]*$")


def _local_path(value: Any) -> str | None:
    """``value`` if it is a path on this site (an open redirect to elsewhere is refused)."""
    return value if isinstance(value, str) and _LOCAL.match(value) else None


def _query_without(request: Request, *names: str) -> str:
    return urlencode([(k, v) for k, v in request.query_params.multi_items()
                      if k not in names and k not in ("notice", "level", "token")])


def create_app(store: Store, *, token: str | None = None, journal_label: str = "",
               close_store: bool = False) -> Starlette:
    """The dashboard over ``store``. With ``token``, every request must carry it (see
    :mod:`telo.server.security`); ``close_store`` closes the store when the server shuts down. The label is
    shown with any password redacted."""
    dash = Dashboard(store, journal_label or store.kind)
    # The CSRF tokens' secret: new for every app, so a token is good only on the server that rendered it (a
    # restart invalidates open forms; reloading the page issues a new token for the same session cookie).
    csrf_secret = token_urlsafe(32).encode()

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
        Route("/api/deliver", dash.api_deliver, methods=["POST"]),
        Route("/api/runs/{run}/cancel", dash.api_cancel, methods=["POST"]),
        Route("/api/runs/{run}/resume", dash.api_resume, methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("telo.server", "static")]), name="static"),
    ]
    guard = Middleware(Guard, token=token, csrf_secret=csrf_secret)
    app = Starlette(routes=routes, middleware=[guard], lifespan=lifespan,
                    exception_handlers={TeloError: dash.on_telo_error, HTTPException: dash.on_http_error})
    app.state.dashboard = dash
    return app
