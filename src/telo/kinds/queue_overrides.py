"""How a process learns of the queue limits ``telo queues set`` overrides, without a restart (issue 16;
docs/proposals/admission-control.md "Visibility": "an override row … that sweeps read").

Every claim of a queued run passes the queue's limits (:meth:`telo.kinds.queue.Queue.limits`), and a busy
worker claims many times a second — at every sweep, and again whenever a slot frees. Reading the override table
at each claim would add a statement to every one; instead a process keeps one view per journal store
(:class:`OverrideView`): the whole table (one row per overridden queue), read again when a claim asks for limits
and the view is older than :data:`TTL_S`. So a change reaches every worker within about a second plus its next
claim, and the table is read at most once a second per journal per process, whatever the claim rate.

Measured (a laptop, a local database): reading the table costs ~7 µs on SQLite (a pooled WAL read, which never
waits for the writer) and ~0.25 ms on PostgreSQL — a claim there is several round trips already. The SQLite and
memory reads are made inline (as :class:`telo.durable.aio.AsyncStore` makes SQLite's run reads); the PostgreSQL
read goes to a thread and the claim that asked goes ahead with the limits read before — never waiting on the
database for them, so a slow or unreachable database delays a limit change, not a claim. A read that fails keeps
the limits known and is tried again a TTL later (logged once per failure).

A queue's first limits are read before it claims anything (:meth:`OverrideView.read`, awaited by
``Queue.init``): a worker started after ``telo queues set --concurrency 1`` never claims by the manifest's 10.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping
from typing import Final
from weakref import WeakKeyDictionary

from telo.clock import SYSTEM_CLOCK
from telo.errors import TeloError
from telo.journal.queue_overrides import QueueOverride
from telo.journal.store import Store

TTL_S: Final = 1.0  # how stale a process's view of the overrides may be when a claim asks for limits

log = logging.getLogger("telo.durable")


class OverrideView:
    """One process's view of one journal's queue overrides (module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.rows: Mapping[str, QueueOverride] = {}
        self.read_at = -math.inf  # when the rows were read (monotonic s)
        self._reading: asyncio.Future[Mapping[str, QueueOverride]] | None = None
        self._inline = store.inline_calls or store.inline_reads

    def current(self) -> Mapping[str, QueueOverride]:
        """The overrides, read again first (inline) or in the background (a thread) when older than TTL_S."""
        if SYSTEM_CLOCK.monotonic() - self.read_at >= TTL_S and not self._busy():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if self._inline or loop is None:
                self._read_now()
            else:
                self._reading = loop.run_in_executor(None, self.store.queue_overrides)
                self._reading.add_done_callback(self._read_done)
        return self.rows

    async def read(self) -> Mapping[str, QueueOverride]:
        """The overrides, read now (errors raised: a queue starting must not claim by limits it could not read)."""
        rows = self.store.queue_overrides() if self._inline else await asyncio.to_thread(self.store.queue_overrides)
        self._got(rows)
        return rows

    def _busy(self) -> bool:
        reading = self._reading
        if reading is not None and reading.get_loop().is_closed():  # (its loop ended before the read settled)
            self._reading = reading = None
        return reading is not None

    def _read_now(self) -> None:
        try:
            self._got(self.store.queue_overrides())
        except TeloError as exc:
            self._failed(exc)

    def _read_done(self, fut: asyncio.Future[Mapping[str, QueueOverride]]) -> None:
        self._reading = None
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is None:
            self._got(fut.result())
        elif isinstance(exc, TeloError):
            self._failed(exc)
        else:
            self.read_at = SYSTEM_CLOCK.monotonic()
            log.error("durable.queue.overrides_unreadable", exc_info=exc)

    def _got(self, rows: Mapping[str, QueueOverride]) -> None:
        self.rows, self.read_at = rows, SYSTEM_CLOCK.monotonic()

    def _failed(self, exc: TeloError) -> None:
        self.read_at = SYSTEM_CLOCK.monotonic()  # (tried again a TTL later; the limits known stay)
        log.warning("durable.queue.overrides_unreadable", extra={"error.code": exc.code,
                                                                  "error.message": exc.message})


_VIEWS: WeakKeyDictionary[Store, OverrideView] = WeakKeyDictionary()


def view_of(store: Store) -> OverrideView:
    """This process's view of ``store``'s overrides, shared by every queue on it."""
    view = _VIEWS.get(store)
    if view is None:
        view = _VIEWS[store] = OverrideView(store)
    return view
