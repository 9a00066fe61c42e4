"""Live refresh: server-sent events that tell an open page what it shows has changed.

``GET /api/events`` (the runs list) and ``GET /api/runs/{run}/events`` (one run) answer ``text/event-stream``.
The server reads a cheap fingerprint of what the page shows every :data:`POLL_S` — the newest page of runs
(id, status, last change), or one run's status, last change and journal length — and sends ``event: change``
when it differs; the page's script then fetches itself and swaps the changed parts in (static/app.js), without
a reload. The journal has no change feed every store offers (SQLite, files, PostgreSQL), hence the poll: one
small read per second per open page.

The streams are plain GETs, so the Guard's rules apply unchanged: with a token, ``EventSource`` carries the
session cookie the page was opened with. A stream ends after :data:`MAX_STREAM_S` (the browser reconnects
after ``retry``), so a server that is shutting down never waits long on one.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse

from telo.clock import SYSTEM_CLOCK
from telo.durable.operator import require_run
from telo.errors import TeloError
from telo.journal.model import RunFilter
from telo.journal.store import Store
from telo.operations import runs
from telo.server import views

POLL_S: Final = 1.0
KEEPALIVE_S: Final = 15.0  # a comment line now and then, so proxies keep an idle stream open
MAX_STREAM_S: Final = 300.0
RETRY_MS: Final = 1_000  # how soon a browser reconnects once a stream ends


def _digest(parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def runs_version(store: Store) -> str:
    """A fingerprint of the newest page of runs: a new run, or a status change among them, changes it."""
    page = runs.list_runs(store, RunFilter(limit=views.PAGE_SIZE))
    return _digest([(r.run, r.status, r.updated_at) for r in page.runs])


def run_version(store: Store, run: str) -> str:
    """A fingerprint of one run: its record's status and last change, and how far its journal has grown (an
    appended entry leaves the record as it was)."""
    record = require_run(store, run)
    count, last = store.journal_mark(run)  # not the log itself: this runs every second per open page
    return _digest([record.status, record.updated_at, count, last])


def _event(name: str, data: object) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


async def stream(request: Request, version: Callable[[], str], *, poll_s: float = POLL_S,
                 max_s: float = MAX_STREAM_S) -> StreamingResponse:
    """The event stream of one page: ``hello`` with the current version at once, then ``change`` whenever the
    version differs. The first read happens before the response starts, so an unknown run is a plain 404."""
    first = await run_in_threadpool(version)

    async def events() -> AsyncIterator[str]:
        last, started = first, SYSTEM_CLOCK.monotonic()
        quiet_since = started
        yield f"retry: {RETRY_MS}\n" + _event("hello", {"version": last})
        while SYSTEM_CLOCK.monotonic() - started < max_s:
            await asyncio.sleep(poll_s)
            if await request.is_disconnected():
                return
            try:
                now = await run_in_threadpool(version)
            except TeloError as exc:  # the run was removed, the journal went away: say so and stop
                yield _event("gone", {"code": exc.code, "message": exc.message})
                return
            if now != last:
                last, quiet_since = now, SYSTEM_CLOCK.monotonic()
                yield _event("change", {"version": now})
            elif SYSTEM_CLOCK.monotonic() - quiet_since >= KEEPALIVE_S:
                quiet_since = SYSTEM_CLOCK.monotonic()
                yield ": keepalive\n\n"

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"x-accel-buffering": "no"})
