"""Kinds that carry messages into runs and events out of them (issue 18; :mod:`telo.durable.messages`):
``Durable.Receive``, ``Durable.Publish``, ``Durable.StreamWrite``, ``DurableLocal.Send`` and
``DurableLocal.Event``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from telo.durable import messages
from telo.durable.inbox import publish, receive, send_from_step, write_stream
from telo.errors import Code, TeloError
from telo.kinds.addressing import _Addressing, duration_ms
from telo.runtime.contracts import contract_for, schema_of
from telo.runtime.resource import Resource


def _map_inputs(resource: Resource, inputs: Any, fields: str) -> Mapping[str, Any]:
    """A step's ``inputs`` as the map these kinds read ``fields`` from; anything else is refused by name."""
    if inputs is None:
        return {}
    if isinstance(inputs, Mapping):
        return inputs
    raise TeloError(Code.INVALID_VALUE, f"{resource.kind} {resource.name!r}: a step's inputs must be a map "
                    f"({fields}), not {type(inputs).__name__} {inputs!r:.60}",
                    hint=f"write the step's inputs as a map, e.g. `inputs: {{ {fields.split(',')[0]}: … }}`, or set "
                    "the field on the resource", data={"resource": resource.name})


class Receive(Resource):
    """The next message of a topic sent to this run; parks until one comes (or the timeout passes)."""

    kind = "Durable.Receive"

    async def init(self) -> None:
        self.payload_schema = schema_of(self.app, self.config.get("outputType"))
        self.contract = contract_for(self.app, {})

    async def invoke(self, inputs: Any) -> Any:
        given = _map_inputs(self, inputs, "topic, timeout")
        scope = self.call_scope(inputs)
        topic_ev = self.field("topic")
        topic = topic_ev.evaluate(scope) if topic_ev is not None else given.get("topic")
        timeout = given.get("timeout")
        if timeout is None and self.config.get("timeout") is not None:
            from telo.kinds.journals import compile_time

            timeout = compile_time(self.app, self.config["timeout"], f"{self.kind}.timeout")
        return await receive(
            self.name, topic, clock=self.app.clock, schema=self.payload_schema,
            timeout_ms=duration_ms(timeout, f"{self.kind} {self.name!r}.timeout") if timeout is not None else None)


class Publish(Resource):
    """Publishes a named value of this run (an event): journaled once; readers get the latest per name."""

    kind = "Durable.Publish"

    async def invoke(self, inputs: Any) -> Any:
        scope = self.call_scope(inputs)
        name_ev, value_ev = self.field("name"), self.field("value")
        name = name_ev.evaluate(scope) if name_ev is not None else None
        value = value_ev.evaluate(scope) if value_ev is not None else None
        return await publish(self.name, name, value)


class StreamWrite(Resource):
    """Appends a value to (or closes) a named stream of this run (telo.durable.streams)."""

    kind = "Durable.StreamWrite"

    async def invoke(self, inputs: Any) -> Any:
        scope = self.call_scope(inputs)
        stream_ev, value_ev = self.field("stream"), self.field("value")
        stream = stream_ev.evaluate(scope) if stream_ev is not None else None
        value = value_ev.evaluate(scope) if value_ev is not None else None
        return await write_stream(self.name, stream, value, close=self.config.get("close") is True)


class Send(_Addressing):
    """Sends a message to a run by id; idempotent by key (default: the sending step's idempotency key)."""

    kind = "DurableLocal.Send"

    async def invoke(self, inputs: Any) -> Any:
        scope = self.call_scope(inputs)
        run = self.run_id(inputs)
        topic_ev, payload_ev, key_ev = self.field("topic"), self.field("payload"), self.field("key")
        topic = topic_ev.evaluate(scope) if topic_ev is not None else None
        payload = payload_ev.evaluate(scope) if payload_ev is not None else None
        key = key_ev.evaluate(scope) if key_ev is not None else None
        if key is not None and not isinstance(key, str):
            raise TeloError(Code.DURABLE_MESSAGE_INVALID, f"{self.kind} {self.name!r}: key must be a string",
                            data={"resource": self.name})
        store = self._journal().store
        return await asyncio.to_thread(send_from_step, store, self.name, run, topic, payload, key)


class Event(_Addressing):
    """Reads the latest event a run published under a name: ``{run, name, set, value?, seq?}``; with ``wait``,
    waits for it up to that long."""

    kind = "DurableLocal.Event"

    async def invoke(self, inputs: Any) -> Any:
        scope = self.call_scope(inputs)
        run = self.run_id(inputs)
        name_ev = self.field("name")
        name = name_ev.evaluate(scope) if name_ev is not None else _map_inputs(self, inputs, "name").get("name")
        wait = self.config.get("wait")
        wait_ms = duration_ms(wait, f"{self.kind} {self.name!r}.wait") if wait is not None else 0
        store = self._journal().store
        # Real time, as its polls sleep: on the app's clock (a FakeClock under test) the wait never ended.
        found = await messages.wait_for_event(store, run, name, wait_ms)
        if found is None:
            return {"run": run, "name": name, "set": False}
        return {**found.to_json(), "set": True}
