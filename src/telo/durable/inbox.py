"""The steps of a run that talk to the world through its journal (issue 18): ``Durable.Receive``,
``Durable.Publish``, ``Durable.StreamWrite`` and ``DurableLocal.Send``. The records and rules are
:mod:`telo.durable.messages`' and :mod:`telo.durable.streams`'."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from telo import paths
from telo.clock import SYSTEM_CLOCK, Clock
from telo.durable import messages, streams
from telo.durable.messages import RECEIVED, RECEIVED_DECISION, inbox_token, next_message
from telo.durable.waits import epoch_ms_of, require_handle
from telo.engine.composers import dispatch_path
from telo.engine.context import current
from telo.engine.handle import epoch_ms_value
from telo.engine.journaling import suspend_allowed
from telo.engine.suspend import ParkUntil, ParkWhere, Suspension
from telo.errors import Code, TeloError
from telo.journal import eventlog
from telo.journal.store import Store


class _NothingYet(Exception):
    """A receive found no message: nothing is recorded, the run parks."""


def _turns(handle: Any, what: str, name: str) -> asyncio.Lock:
    """One lock per run execution and topic (or stream): parallel branches of a body (an iteration with
    ``concurrency``) would otherwise both look before either recorded — two receives taking one message, or two
    writes counting one offset."""
    locks: dict[tuple[str, str], asyncio.Lock] | None = getattr(handle, "serial", None)
    if locks is None:
        return asyncio.Lock()  # (a backend without one: nothing to share)
    return locks.setdefault((what, name), asyncio.Lock())


async def receive(resource: str, topic: Any, *, timeout_ms: int | None = None, clock: Clock = SYSTEM_CLOCK,
                  schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``Durable.Receive``: the next message of ``topic`` (telo.durable.messages), waiting for it durably."""
    handle = require_handle(resource, "Durable.Receive")
    here = dispatch_path(resource)
    topic = messages.topic_name(topic, handle.run_id)
    store = getattr(handle, "store", None)
    if store is None:  # (every durable backend telo has journals through a store)
        raise TeloError(Code.DURABLE_NO_RUN, f"Durable.Receive {resource!r} needs a journaled run",
                        data={"resource": resource})
    run = handle.run_id
    deadline = None
    if timeout_ms is not None:
        deadline = epoch_ms_of(await handle.decide(paths.deadline_path(here), "value",
                                                   lambda: epoch_ms_value(handle, clock.now_ms() + timeout_ms)),
                               resource, "deadline")

    async def look(after_park: bool = False) -> dict[str, Any] | None:
        # The store's entries bring the messages sent since this execution began; the handle's own bring the
        # receives it recorded that are still deferred (not in the store yet), so a message is never taken twice.
        # After the park: a send still to commit is waited for (the sender may have found the run not parked).
        read = store.read_entries_in_order if after_park else store.read_entries
        entries = eventlog.fold(run, await read(run))[0]
        entries.update(getattr(handle, "entries", {}))
        return next_message(run, entries, topic)

    async def take() -> dict[str, Any]:
        found = await look()
        if found is not None:
            return found
        if deadline is not None and clock.now_ms() >= deadline:
            return {"topic": topic, "timedOut": True}
        raise _NothingYet

    try:
        async with _turns(handle, "inbox", topic):
            got = await handle.decide(paths.child(here, RECEIVED), RECEIVED_DECISION, take)
    except _NothingYet:
        suspend_allowed(resource)
        # Says a send of this topic wakes the run, whatever token the run's one park record ends up holding
        # (parallel branches: telo.durable.parks); flushed by the park, which is a barrier.
        # Its payload schema too: a send checks a message against it before storing one (messages.send).
        await handle.decide(paths.child(here, messages.WAITING), messages.WAITING_DECISION,
                            lambda: {"topic": topic} if schema is None else {"topic": topic, "schema": dict(schema)})
        try:
            await handle.park(ParkWhere(here, resource), ParkUntil(token=inbox_token(run, topic), at=deadline))
        except Suspension:
            # The park is recorded: a message sent since the look above, whose sender found the run not parked
            # yet, would otherwise wait for the deadline (or forever). Looking again closes that window.
            if await look(after_park=True) is not None:
                await store.unpark(run)
            raise
    if not isinstance(got, dict):
        got = dict(got) if isinstance(got, Mapping) else {"topic": topic, "timedOut": True}
    if not got.get("timedOut"):
        messages.check_payload(got, schema, resource)
    return got


async def wake_after_sibling_parks(store: Any, run: str, entries: Mapping[str, Any]) -> bool:
    """After an execution whose branches parked more than once (telo.durable.parks), once its body has unwound:
    unpark the run if a receive of it waits for a message that is there. A send — or a receive's own look after
    its park — may have unparked the run while a sibling branch still ran; that sibling's park then wrote
    ``parked`` back over it, and the message would wait for some other wake-up (a review's finding). A send from
    now on sees the final park and the ``@waiting`` records, so it wakes the run itself. ``entries``: the
    execution's logical entries (its receives, deferred ones included)."""
    if not messages.waiting_topics(run, entries):
        return False
    now = eventlog.fold(run, await store.read_entries_in_order(run))[0]  # (in order: a send still committing)
    now.update(entries)
    return messages.message_waiting(run, now) and bool(await store.unpark(run))


async def publish(resource: str, name: Any, value: Any) -> dict[str, Any]:
    """``Durable.Publish``: record ``{name, value}`` once at ``<step>/@event`` (a replay does not publish again)."""
    handle = require_handle(resource, "Durable.Publish")
    here = dispatch_path(resource)
    name = messages.event_name(name, handle.run_id)
    recorded = await handle.decide(paths.child(here, messages.EVENT), messages.EVENT_DECISION,
                                   lambda: messages.event_value(name, value))
    return dict(recorded) if isinstance(recorded, Mapping) else {"name": name, "value": value}


def send_from_step(store: Store, resource: str, run: str, topic: Any, payload: Any,
                   key: str | None) -> dict[str, Any]:
    """``DurableLocal.Send``: a send whose key defaults to the sending step's idempotency key
    (``<run>/<step path>``), so a step re-executed after a crash sends nothing twice. Outside a durable run a
    send without a key gets a fresh one."""
    if key is None:
        ctx = current()
        if ctx.run_id and ctx.path:
            key = f"{ctx.handle.key_run if ctx.handle is not None else ctx.run_id}/{ctx.path}"
    return messages.send(store, run, topic, payload, key=key).to_json()


async def write_stream(resource: str, stream: Any, value: Any, *, close: bool = False) -> dict[str, Any]:
    """``Durable.StreamWrite``: record the stream's next value (or its close) once at ``<step>/@stream``
    (telo.durable.streams)."""
    handle = require_handle(resource, "Durable.StreamWrite")
    here = dispatch_path(resource)
    name = streams.stream_name(stream, handle.run_id)

    def record() -> dict[str, Any]:
        offset, closed = streams.next_offset(handle.run_id, getattr(handle, "entries", {}), name)
        if closed:
            raise TeloError(Code.DURABLE_STREAM_CLOSED, f"Durable.StreamWrite {resource!r}: the stream {name!r} of run "
                            f"{handle.run_id!r} is closed", hint="write before the step that closes it",
                            data={"resource": resource, "stream": name})
        return {"stream": name, "offset": offset, "closed": True} if close else \
            {"stream": name, "offset": offset, "value": value}

    async with _turns(handle, "stream", name):
        recorded = await handle.decide(paths.child(here, streams.STREAM), streams.STREAM_DECISION, record)
    return dict(recorded) if isinstance(recorded, Mapping) else {"stream": name}
