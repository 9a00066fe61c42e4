"""The run page's messages in, events and streams out (issue 18; :mod:`telo.durable.messages`,
:mod:`telo.durable.streams`): a form that sends a message to the run, the events it published and its streams —
each through :mod:`telo.operations.actions`, as ``telo send``, ``telo events list`` and ``telo stream read`` do.

Page                                        JSON
(the run page's "Send a message" form)      ``POST /api/runs/{run}/send``     ``{topic, payload, key?}``
(the run page's "Events")                   ``GET /api/runs/{run}/published`` ``?name=``: its events, latest per name
(the run page's "Streams")                  ``GET /api/runs/{run}/streams``   its streams: values written, closed
``GET /runs/{run}/streams/{stream}``        ``GET /api/runs/{run}/streams/{stream}`` a page of values from ``?offset=``

(``/api/runs/{run}/events`` is the run page's live refresh, server-sent events: hence ``published``.) A stream's
name travels percent-encoded as one path segment, as a run id does. The run page reads its events and streams
leniently: a journal that does not decode shows the error there, and the rest of the page still renders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from telo.durable.messages import Event
from telo.durable.operator import require_run
from telo.errors import Code, TeloError
from telo.journal.redact import redact
from telo.journal.store import Store
from telo.operations import actions
from telo.server import operate
from telo.server.console import rfc3339
from telo.server.operate import Call, Page, run_param, run_url, segment
from telo.server.views import ActionResult
from telo.values import from_plain, to_plain

STREAM_PAGE: Final = 100  # a stream's values one page shows (?limit=, up to MAX_STREAM_PAGE)
MAX_STREAM_PAGE: Final = 500
MAX_EVENTS: Final = 500  # the newest events a history lists (the latest per name is always complete)


def stream_url(run: str, stream: str, *, api: bool = False) -> str:
    """The URL of a run's stream page (or API resource): the stream's name percent-encoded as one segment."""
    return run_url(run, f"/streams/{quote(stream, safe='')}", api=api)


def stream_param(request: Request) -> str:
    return segment(request, "stream")


# --- send -------------------------------------------------------------------------------------------------


def send(store: Store, run: str, topic: Any, payload: Any, key: Any = None) -> ActionResult:
    """Send ``payload`` (a domain value) to the run's receives of ``topic`` (as ``telo send``). A duplicate key
    writes nothing and is still an answer, not a refusal: the report says ``duplicate``."""
    sent = actions.send(store, run, topic, payload, key=key)
    return ActionResult(True, sent.to_json(), run)


def send_notice(data: Mapping[str, Any]) -> str:
    """What the form's notice says a send did: its seq and key, whether it was a duplicate and woke the run."""
    yes = {True: "yes", False: "no"}
    facts = (f"seq {data['seq']}, key {data['key']}, duplicate: {yes[bool(data['duplicate'])]}, "
             f"woke: {yes[bool(data['woke'])]}")
    if data["duplicate"]:
        return f"not sent again: topic {data['topic']} already has the message with key {data['key']} ({facts}); " \
               "nothing was written"
    after = ("a receive was waiting on the topic: the run is due, and a worker (telo worker) or a rerun continues it"
             if data["woke"] else "it waits for the run's next Durable.Receive of the topic")
    return f"sent to topic {data['topic']} ({facts}) — {after}"


# --- events -----------------------------------------------------------------------------------------------


def event_json(event: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"name": event.name, "value": to_plain(event.value), "seq": event.seq, "path": event.path}
    if event.at is not None:
        out["at"] = rfc3339(event.at)
    return out


def published(store: Store, run: str, name: str | None = None) -> dict[str, Any]:
    """The events the run published (of ``name``, when given; as ``telo events list``): ``latest`` — one per
    name, the latest value (the one ``telo events get`` reads), the most recently published first, with how many
    it published under the name — and ``events``, the history oldest first (its newest :data:`MAX_EVENTS`;
    ``total`` counts them all)."""
    found = actions.events(store, run, name or None)
    latest: dict[str, Event] = {}
    counts: dict[str, int] = {}
    for event in found:
        latest[event.name] = event
        counts[event.name] = counts.get(event.name, 0) + 1
    newest = sorted(latest.values(), key=lambda e: e.seq, reverse=True)
    return {"run": run, "name": name or None,
            "latest": [{**event_json(e), "count": counts[e.name]} for e in newest],
            "events": [event_json(e) for e in found[-MAX_EVENTS:]], "total": len(found)}


# --- streams ----------------------------------------------------------------------------------------------


def stream_list(store: Store, run: str) -> dict[str, Any]:
    """The run's streams — every name among its ``stream`` decisions, in the order first written — with how many
    values each holds and whether its writer closed it; ``settled`` once the run has settled (none will grow)."""
    require_run(store, run)
    found, settled = actions.list_streams(store, run)
    return {"run": run, "streams": [s.to_json() for s in found], "settled": settled}


def stream_page(store: Store, run: str, stream: str, offset: int = 0, limit: int = STREAM_PAGE) -> dict[str, Any]:
    """One page of the stream's values from ``offset`` (as ``telo stream read --offset``), at most ``limit``:
    ``next`` is the offset to read from next; ``more`` when values past this page are already written;
    ``ended`` when none will follow (the stream is closed or the run settled, and this page reaches the end)."""
    limit = max(1, min(limit, MAX_STREAM_PAGE))
    page = actions.read_stream(store, run, stream, offset)
    shown, more = page.values[:limit], len(page.values) > limit
    return {"run": run, "stream": page.stream, "offset": offset, "limit": limit,
            "values": [{"offset": o, "value": to_plain(v)} for o, v in shown],
            "next": shown[-1][0] + 1 if more else page.next, "more": more,
            "closed": page.closed, "settled": page.settled, "ended": page.ended and not more}


def _lenient(read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return read()
    except TeloError as exc:  # a log that does not decode: the page says why and renders the rest
        return {"error": {"code": exc.code, "message": redact(exc.message)}}


def run_outputs(store: Store, run: str) -> dict[str, Any]:
    """What the run page shows of the run's events and streams (each an ``error`` if it does not read)."""
    return {"events": _lenient(lambda: published(store, run)), "streams": _lenient(lambda: stream_list(store, run))}


def _field(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    return value.strip() if isinstance(value, str) else ""


def _count(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()):  # (str.isdigit takes "²", which int() refuses)
        raise TeloError(Code.INVALID_VALUE, f"{name} {raw!r} is not a non-negative integer",
                        hint=f"?{name}=0" if name == "offset" else f"?{name}={STREAM_PAGE}")
    return int(raw)


class MessagePages:
    """The routes of the module docstring over ``call`` and ``page`` of :class:`telo.server.app.Dashboard` (the
    POST answered as the run actions of :mod:`telo.server.operate` are)."""

    def __init__(self, call: Call, page: Page) -> None:
        self.call = call
        self.page = page

    async def send(self, request: Request) -> Response:
        """``POST /api/runs/{run}/send``, through :func:`telo.server.operate.action_response` as every run action:
        the same body parsing, CSRF check and error rendering; a form comes back to the run's page with a notice."""
        run = run_param(request)

        async def act(body: Mapping[str, Any], is_form: bool) -> tuple[ActionResult, str]:
            raw: Any = body.get("payload")
            # As a delivery: a form carries the payload (and an optional key) as text, a JSON body as plain JSON.
            payload = (actions.payload_from_json(str(raw or "null"), "the payload") if is_form
                       else from_plain(raw, {}))
            topic = _field(body, "topic") if is_form else body.get("topic")
            key = (_field(body, "key") or None) if is_form else body.get("key")
            result: ActionResult = await self.call(send, run, topic, payload, key)
            return result, send_notice(result.data)

        return await operate.action_response(request, act, run)

    async def api_published(self, request: Request) -> Response:
        name = request.query_params.get("name")
        return JSONResponse(await self.call(published, run_param(request), name or None))

    async def api_streams(self, request: Request) -> Response:
        return JSONResponse(await self.call(stream_list, run_param(request)))

    async def api_stream(self, request: Request) -> Response:
        return JSONResponse(await self._page_of(request))

    async def stream_page(self, request: Request) -> Response:
        found = await self._page_of(request)
        return self.page(request, "stream.html", {"page": found, "prev": max(0, found["offset"] - found["limit"])})

    async def _page_of(self, request: Request) -> dict[str, Any]:
        run, stream = run_param(request), stream_param(request)
        offset, limit = _count(request, "offset", 0), _count(request, "limit", STREAM_PAGE)
        found: dict[str, Any] = await self.call(stream_page, run, stream, offset, limit)
        return found
