"""The dashboard's POST endpoints: the operator console's actions, each the operation its CLI command calls.

``POST /api/deliver``                    deliver ``{token, payload}``                       (``telo deliver``)
``POST /api/runs/{run}/send``            send a message ``{topic, payload, key?}``          (:mod:`.messages`)
``POST /api/runs/{run}/cancel``          cancel ``{reason?}``                               (``telo cancel``)
``POST /api/runs/{run}/resume``          resume ``{reason?, force?}``                       (``telo resume``)
``POST /api/runs/{run}/resolve``         answer an unconfirmed effect ``{path, action, value?}`` (``telo resolve``)
``POST /api/runs/{run}/restore``         roll back to a checkpoint ``{checkpoint, reason?}`` (``telo restore``)
``POST /api/runs/{run}/fork``            copy from a checkpoint ``{checkpoint, runId?, keepKeys?}`` (``telo fork``)
``POST /api/bulk/cancel``, ``/resume``   the same for many runs ``{runs, reason?, force?}``
``POST /api/schedules/{schedule}/pause``, ``/resume``, ``/trigger`` ``{reason?}`` (:mod:`.schedules`)

Every body goes through :func:`body` first, whose CSRF check (:func:`telo.server.security.csrf_ok`) refuses a
POST that is not from the dashboard's own pages nor from a client holding the bearer token. A form (the pages')
is answered with a redirect back to its page and a notice (a bulk form with a page listing each run's outcome),
JSON with the action's report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from telo.errors import Code, TeloError
from telo.journal.model import NO_VALUE
from telo.journal.redact import redact
from telo.operations import actions
from telo.server import views
from telo.server.security import CSRF_FIELD, csrf_ok
from telo.values import from_plain

Call = Callable[..., Awaitable[Any]]
Page = Callable[[Request, str, dict[str, Any]], Response]
Action = Callable[[Mapping[str, Any], bool], Awaitable[tuple[views.ActionResult, str]]]

_FORM_TYPES = ("application/x-www-form-urlencoded",)
MAX_BODY = 1 << 20  # a payload is a JSON value for a journal entry, not an upload
_TRUE = (True, "true", "1", "on")


def run_url(run: str, suffix: str = "", *, api: bool = False) -> str:
    """The URL of a run's page (or API resource): the id percent-encoded as one segment, whatever it holds."""
    return f"{'/api' if api else ''}/runs/{quote(run, safe='')}{suffix}"


def segment(request: Request, name: str) -> str:
    """The ``{name}`` segment of a route, decoded (the route matched the raw, still-encoded path). One whose
    percent-encoding is not UTF-8 (``%ff``) is refused (400), never a 500."""
    raw = str(request.path_params[name])
    try:
        return unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise TeloError(Code.INVALID_VALUE, f"the {name} in the URL, {raw!r}, is not UTF-8 percent-encoding",
                        hint=f"percent-encode the {name}'s UTF-8 bytes (as the console's links do)",
                        data={name: raw}) from None


def run_param(request: Request) -> str:
    """The run id of a ``/runs/{run}`` route (:func:`segment`)."""
    return segment(request, "run")


class Operations:
    """The action endpoints over ``call`` (a store function run in the thread pool) and ``page`` (renders a
    template) of :class:`telo.server.app.Dashboard`."""

    def __init__(self, call: Call, page: Page) -> None:
        self.call = call
        self.page = page

    async def deliver(self, request: Request) -> Response:
        async def act(body: Mapping[str, Any], is_form: bool) -> tuple[views.ActionResult, str]:
            token = body.get("token")
            if not isinstance(token, str) or not token:
                raise TeloError(Code.DURABLE_TOKEN_REQUIRED, "a delivery needs the token the run parked on")
            raw: Any = body.get("payload")
            # A form carries the payload as JSON text; a JSON body carries it as plain JSON.
            payload = (actions.payload_from_json(str(raw or "null"), "the payload") if is_form
                       else from_plain(raw, {}))
            result: views.ActionResult = await self.call(views.deliver, token, payload)
            return result, (f"delivered to {token}" if result.done else
                            f"nothing is parked on token {token!r}: it was already delivered, or never issued")

        return await action_response(request, act)

    async def cancel(self, request: Request) -> Response:
        run = run_param(request)

        async def act(body: Mapping[str, Any], is_form: bool) -> tuple[views.ActionResult, str]:
            result: views.ActionResult = await self.call(views.cancel, run, _text(body, "reason")
                                                         or "cancelled from telo ui")
            return result, cancel_notice(result)

        return await action_response(request, act, run)

    async def resume(self, request: Request) -> Response:
        run = run_param(request)

        async def act(body: Mapping[str, Any], is_form: bool) -> tuple[views.ActionResult, str]:
            result: views.ActionResult = await self.call(views.resume, run, _text(body, "reason")
                                                         or "resumed from telo ui", force=body.get("force") in _TRUE)
            return result, resume_notice(result)

        return await action_response(request, act, run)

    async def resolve(self, request: Request) -> Response:
        run = run_param(request)

        async def act(body: Mapping[str, Any], is_form: bool) -> tuple[views.ActionResult, str]:
            path, action = _text(body, "path"), _text(body, "action")
            if not path or not action:
                raise TeloError(Code.INVALID_VALUE, "a resolution needs the step's path and an action",
                                hint="action: redrive, skip (with value) or fail")
            raw = body.get("value")
            value: Any = NO_VALUE
            if action == "skip":  # a form carries the skip's result as JSON text, as `--skip-with JSON`
                value = (actions.payload_from_json(str(raw or ""), "the skip's value") if is_form
                         else from_plain(raw, {}))
            result: views.ActionResult = await self.call(views.resolve, run, path, action, value)
            return result, f"resolved {path}: {action} — a worker (telo worker) or a rerun continues the run"

        return await action_response(request, act, run)

    async def restore(self, request: Request) -> Response:
        run = run_param(request)

        async def act(body: Mapping[str, Any], is_form: bool) -> tuple[views.ActionResult, str]:
            result: views.ActionResult = await self.call(views.restore, run, _checkpoint(body),
                                                         _text(body, "reason") or "restored from telo ui")
            data = result.data
            return result, (f"restored to checkpoint {data['checkpoint']} (epoch {data['epoch']}): the steps after "
                            "it execute again when a worker (telo worker) or a rerun continues the run")

        return await action_response(request, act, run)

    async def fork(self, request: Request) -> Response:
        run = run_param(request)

        async def act(body: Mapping[str, Any], is_form: bool) -> tuple[views.ActionResult, str]:
            result: views.ActionResult = await self.call(views.fork, run, _checkpoint(body), _text(body, "runId"),
                                                         keep_keys=body.get(views.KEEP_KEYS_FIELD) in _TRUE)
            data = result.data
            return result, (f"forked from {run} at checkpoint {data['checkpoint']}; {data['note']}; a worker "
                            "(telo worker) continues it")

        # After a fork the form lands on the NEW run (ActionResult.run); a refusal comes back to the source.
        return await action_response(request, act, run, follow=True)

    async def bulk_cancel(self, request: Request) -> Response:
        return await self._bulk(request, "cancel")

    async def bulk_resume(self, request: Request) -> Response:
        return await self._bulk(request, "resume")

    async def _bulk(self, request: Request, action: str) -> Response:
        is_form = _is_form(request)
        data = await body(request, is_form)
        selected = data.get("run" if is_form else "runs")
        if is_form and isinstance(selected, str):
            selected = [selected]
        reason = _text(data, "reason") or f"{action} from telo ui (bulk)"
        try:
            if not isinstance(selected, list) or not all(isinstance(r, str) for r in selected):
                raise TeloError(Code.INVALID_VALUE, "tick the runs first" if is_form else "runs: a list of run ids")
            out: dict[str, Any] = await self.call(views.bulk, action, selected, reason,
                                                  force=data.get("force") in _TRUE)
        except TeloError as exc:
            if not is_form:
                raise
            return redirect_notice("/runs", f"{exc.code}: {redact(exc.message)}", "error")
        if not is_form:
            return JSONResponse(out)
        for item in out["results"]:
            item["notice"] = _bulk_notice(action, item)
        return self.page(request, "bulk.html", {"bulk": out})


def cancel_notice(result: views.ActionResult) -> str:
    return "cancelled" if result.done else f"not cancelled: the run is already {result.data.get('status')}"


def resume_notice(result: views.ActionResult) -> str:
    if not result.done:
        why = result.data.get("reason") or f"the run is {result.data.get('status')}"
        hint = f" — {result.data['hint']}" if result.data.get("hint") else ""
        return f"not resumed: {why}{hint}"
    forced = " against the changed manifest (recorded)" if result.data.get("forced") else ""
    return f"resumed{forced}: a worker (telo worker) or a rerun continues it"


def _bulk_notice(action: str, item: Mapping[str, Any]) -> str:
    error = item.get("error")
    if isinstance(error, Mapping):
        hint = f" — {error['hint']}" if error.get("hint") else ""
        return f"{error['code']}: {error['message']}{hint}"
    result = views.ActionResult(bool(item["done"]), dict(item), str(item["run"]))
    return cancel_notice(result) if action == "cancel" else resume_notice(result)


def _text(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    return value.strip() if isinstance(value, str) else ""


def _checkpoint(body: Mapping[str, Any]) -> int | str:
    """The checkpoint a restore or fork names: its seq (a JSON int, or digits) or a step path (its newest
    checkpoint there), as ``telo restore RUN CHECKPOINT`` takes it."""
    value = body.get("checkpoint")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise TeloError(Code.INVALID_VALUE, "name a checkpoint: its seq or a step path",
                    hint="the run's checkpoints: GET /api/runs/{run}/checkpoints, or `telo runs checkpoints RUN`")


def _is_form(request: Request) -> bool:
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower() in _FORM_TYPES


async def action_response(request: Request, act: Action, run: str | None = None, *, follow: bool = False,
                          back: str | None = None) -> Response:
    """Run a POST action on its JSON or form body. A form (a page's) is answered with a redirect back to its
    page (its ``next`` field, else ``back``, else the run's page) carrying a notice, its failure too
    (``follow``: a success goes to the result's run instead); JSON with the action's report (409 if it did
    nothing)."""
    is_form = _is_form(request)
    data = await body(request, is_form)
    back = _local_path(data.get("next")) or back or (run_url(run) if run else "/runs")
    try:
        result, notice = await act(data, is_form)
    except TeloError as exc:
        if not is_form:
            raise
        return redirect_notice(back, error_notice(exc), "error")
    if not is_form:
        return JSONResponse(result.data, status_code=200 if result.done else 409)
    target = (run_url(result.run) if follow and result.run else
              _local_path(data.get("next")) or (run_url(result.run) if result.run else back))
    return redirect_notice(target, notice, "ok" if result.done else "error")


async def body(request: Request, is_form: bool) -> dict[str, Any]:
    """The POST body as a dict, after the CSRF check (a form carries the session's token in a field). A form
    field given more than once (the runs page's ticked rows) is a list."""
    parsed_body: dict[str, Any]
    declared = request.headers.get("content-length", "0")
    # Refused before reading a byte of it (isascii: str.isdigit takes "²", which int() refuses).
    if not (declared.isascii() and declared.isdigit()) or int(declared) > MAX_BODY:
        raise TeloError(Code.INVALID_VALUE, f"the request body must be at most {MAX_BODY} bytes")
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise TeloError(Code.INVALID_VALUE, f"the request body is larger than {MAX_BODY} bytes")
    if is_form:
        # The pages' forms are urlencoded; parsed here rather than through python-multipart, one dependency less.
        try:
            pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=1000)
        except (UnicodeDecodeError, ValueError) as exc:
            raise TeloError(Code.INVALID_VALUE, f"the form is not urlencoded UTF-8: {exc}") from exc
        parsed_body = {}
        for key, value in pairs:
            seen = parsed_body.get(key)
            parsed_body[key] = value if seen is None else [*(seen if isinstance(seen, list) else [seen]), value]
    else:
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            raise TeloError(Code.INVALID_VALUE, f"the request body is not JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise TeloError(Code.INVALID_VALUE, "the request body must be a JSON object")
        parsed_body = parsed
    supplied = parsed_body.get(CSRF_FIELD)
    if not csrf_ok(request, supplied if isinstance(supplied, str) else None):
        raise TeloError(Code.UI_CSRF, "cross-site request refused: POST from the dashboard's own pages, send "
                        "its Origin, or authenticate with 'Authorization: Bearer <token>'")
    return parsed_body


def error_notice(exc: TeloError) -> str:
    """A refused action's notice: its code, message and hint (what to do instead)."""
    hint = f" — {redact(exc.hint)}" if exc.hint else ""
    return f"{exc.code}: {redact(exc.message)}{hint}"


def redirect_notice(target: str, notice: str, level: str) -> Response:
    base = target.split("?", 1)[0]
    return RedirectResponse(f"{base}?{urlencode({'notice': notice, 'level': level})}", status_code=303)


_LOCAL = re.compile(r"^/(?![/\\])[^\s]*$")


def _local_path(value: Any) -> str | None:
    """``value`` if it is a path on this site (an open redirect to elsewhere is refused)."""
    return value if isinstance(value, str) and _LOCAL.match(value) else None
