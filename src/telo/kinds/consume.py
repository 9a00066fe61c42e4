"""``Durable.Consume``: durable stream iteration (issue 18; event-log §1 ``stream_cursor``). A loop that consumes a
source in batches — another run's stream, a SQL query paged by a key (a table as a queue), a newline-delimited
JSON file — and runs its ``steps`` once per batch, with ``batch.items`` in scope.

Per batch ``k``, at the consume step's path ``<step>``:

1. ``<step>/@batch[k]`` pins the batch's bounds, ``{from, to, count}`` — offsets of a stream, byte offsets of the
   file, keys of the query — before any of its steps runs. A replay (or the execution after a crash) reads the
   same items back between those bounds, so a batch is the same batch whatever arrived since. A query's batch
   pins its rows too (``items``) and is never read again: the query may no longer select rows the batch's own
   steps updated (telo.kinds.consume_sources).
2. The steps run at ``<step>[k]``, journaled like any loop turn's.
3. ``<step>/@cursor[k]`` records the advance, ``{cursor, items, terminal}``: the ``stream_cursor`` event. A
   crash resumes after the last batch whose steps completed; the batch it interrupted runs its remaining steps.

With ``transaction: !ref <connection>``, each batch's steps AND its cursor run in one transaction on that
connection. When the run's journal lives in that same database (``durable-journal-postgres`` /
``-sqlite`` sharing the connection), the batch's SQL effects, its step entries and its cursor commit together:
**exactly-once consumption** — a crash rolls all three back and the batch runs again from its start. On any
other connection the transaction still makes the batch's SQL effects atomic, but the cursor is recorded after
it commits: a crash in between runs the batch again (at least once; its steps' idempotency keys are stable).

The source ends the loop: a query or a file when a batch comes back empty, a stream when it is closed (or its
run settles) and read to the end; an open stream with nothing new is polled every ``poll``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from telo import paths
from telo.durable import shutdown
from telo.engine.context import current
from telo.engine.interpreter import run_steps
from telo.engine.journaling import journal_for
from telo.engine.steps import compile_steps
from telo.errors import Code, TeloError
from telo.journal import eventlog
from telo.kinds.addressing import duration_ms
from telo.kinds.consume_sources import Source, source_for
from telo.kinds.sql import Connection, in_transaction
from telo.runtime.resource import Resource

BATCH = "@batch"
CURSOR = "@cursor"
BATCH_DECISION = "batch"
CURSOR_DECISION = eventlog.STREAM_CURSOR  # classified as the event log's stream_cursor
DEFAULT_BATCH = 100
DEFAULT_POLL_MS = 500


async def _decide(path: str, kind: str, compute: Callable[[], Awaitable[Any]]) -> Any:
    handle = journal_for()
    if handle is None:
        return await compute()
    return await handle.decide(path, kind, compute)


class Consume(Resource):
    """Consumes a source in batches, durably (module docstring)."""

    kind = "Durable.Consume"

    async def init(self) -> None:
        self.steps = compile_steps(self.config.get("steps", []), self.app.compiler,
                                   where=f"{self.kind} {self.name!r}.steps")
        size = self.config.get("batchSize", DEFAULT_BATCH)
        if type(size) is not int or size < 1:
            raise TeloError(Code.MANIFEST_VALIDATION_FAILED, f"{self.kind} {self.name!r}: batchSize must be an "
                            f"integer of at least 1, not {size!r}")
        self.batch_size = size
        poll = self.config.get("poll")
        self.poll_s = (duration_ms(poll, f"{self.kind} {self.name!r}.poll") if poll is not None
                       else DEFAULT_POLL_MS) / 1000

    def _connection(self) -> Connection | None:
        node = self.config.get("transaction")
        if node is None:
            return None
        resource = self.app.resource_for(node, where=f"{self.kind} {self.name!r}.transaction")
        if not isinstance(resource, Connection):
            raise TeloError(Code.RESOURCE_NOT_FOUND, f"{self.kind} {self.name!r}: `transaction` must name a SQL "
                            f"connection, not {resource.kind}")
        return resource

    async def invoke(self, inputs: Any) -> Any:
        inputs = inputs if inputs is not None else {}
        source = source_for(self, self.call_scope(inputs))
        here = current().path or paths.fallback_path(self.name)
        cursor, total, k = source.start, 0, 0
        while True:
            done = await self._batch(source, here, k, cursor, inputs)
            if done is None:
                await _decide(paths.child(here, CURSOR, k), CURSOR_DECISION, _cursor(cursor, 0, True))
                return {"batches": k, "items": total, "cursor": cursor}
            cursor, total, k = done[0], total + done[1], k + 1

    async def _batch(self, source: Source, here: str, k: int, cursor: Any, inputs: Any) -> tuple[Any, int] | None:
        """Run batch ``k`` from ``cursor`` (module docstring); ``(the cursor after it, its items)``, or None when
        the source has ended."""
        fetched: list[Any] | None = None

        async def bounds() -> dict[str, Any]:
            nonlocal fetched
            while True:
                items, after, ended = await source.next_batch(cursor, self.batch_size)
                if items or ended:
                    fetched = items
                    pinned = {"from": cursor, "to": after, "count": len(items)}
                    return {**pinned, "items": items} if source.pins_items else pinned
                await _stop_point(here)  # (a poll may last for days: a cancel or a drain must stop it)
                await asyncio.sleep(self.poll_s)  # an open stream with nothing new: nothing is recorded

        pinned = await _decide(paths.child(here, BATCH, k), BATCH_DECISION, bounds)
        if int(pinned.get("count", 0)) == 0:
            return None
        after = pinned.get("to")
        items = fetched if fetched is not None else pinned["items"] if isinstance(pinned.get("items"), list) \
            else await source.between(pinned.get("from"), after)
        scope: dict[str, Any] = {**self.app.module_scope(), "inputs": inputs, "steps": {},
                                 "batch": {"index": k, "items": items, "from": pinned.get("from"), "to": after}}

        async def body() -> None:
            await run_steps(self.steps, scope, self.app.services, paths.turn_body(here, k))
            await _decide(paths.child(here, CURSOR, k), CURSOR_DECISION, _cursor(after, len(items), False))

        tx = self._connection()
        if tx is None:
            await body()
        else:
            await in_transaction(self.kind, self.name, tx, body)
            # Collapsed inside a transaction the journal does not share, the cursor was not recorded there: it is
            # now, once the batch's effects committed (at least once; module docstring). Recorded already, this
            # reads it back.
            await _decide(paths.child(here, CURSOR, k), CURSOR_DECISION, _cursor(after, len(items), False))
        return after, len(items)


async def _stop_point(here: str) -> None:
    """Stop a polling consume as a step boundary stops a body: the run was cancelled (``ERR_DURABLE_RUN_CANCELLED``)
    or the process is draining (``ERR_DURABLE_SHUTTING_DOWN``; nothing of the batch is recorded yet, so the
    execution that continues the run polls again). Both halt the execution, never fail the step
    (telo.durable.halting)."""
    handle = current().handle  # (in a collapsed region too, where journal_for answers None)
    if handle is None:
        return
    try:
        await handle.check_cancelled_async()
        if shutdown.draining():
            raise shutdown.refusal(handle.run_id, here)
    except TeloError as exc:  # (raised plainly, the consume step would record it as its failure)
        handle.halt(exc)


def _cursor(cursor: Any, items: int, terminal: bool) -> Callable[[], Awaitable[dict[str, Any]]]:
    """The compute of a ``stream_cursor`` decision: the cursor after a batch of ``items``."""
    async def record() -> dict[str, Any]:
        return {"cursor": cursor, "items": items, "terminal": terminal}

    return record


__all__ = ["Consume", "Source"]
