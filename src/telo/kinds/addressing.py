"""The ``durable-local`` kinds that address runs by id or token (reference §6 "Addressing kinds"):
``Deliver``, ``Status``, ``Result``, ``Cancel``, ``Schedule``, ``Resume``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from telo.durable.operator import NOT_FOUND, cancel_run, resume_run
from telo.durable.waits import deliver
from telo.errors import Code, TeloError
from telo.journal.compat import writer_for
from telo.journal.model import NO_VALUE, Admission, RunRecord
from telo.kinds.journals import Journal, compile_time
from telo.kinds.queued import queue_fields
from telo.kinds.workflow import Workflow, default_run_id
from telo.runtime.contracts import SchemaValidator, schema_of
from telo.runtime.resource import Resource
from telo.values import Timestamp
from telo.values.plain import parse_cel_duration
from telo.values.types import parse_rfc3339


def duration_ms(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise TeloError(Code.INVALID_VALUE, f"{where}: expected a duration, got {value!r}")
    if isinstance(value, int | float):
        return int(value)
    if hasattr(value, "total_nanos"):
        return int(value.total_nanos() // 1_000_000)
    try:
        return parse_cel_duration(str(value), extra_units={"d": 86_400 * 10**9}).total_nanos() // 1_000_000
    except ValueError as exc:
        raise TeloError(Code.INVALID_VALUE, f"{where}: {exc}", hint="write e.g. 90s, 15m, 2h, 1d") from exc


def instant_ms(value: Any, code: str, where: str) -> int:
    """Epoch ms from an int, a timestamp, or RFC 3339 text (Sleep ``until``, Schedule ``at``)."""
    if isinstance(value, Timestamp):
        return value.epoch_millis()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        try:
            return parse_rfc3339(value).epoch_millis()
        except ValueError:
            pass
    raise TeloError(code, f"{where}: {value!r} is neither epoch milliseconds nor a timestamp",
                    hint="write an RFC 3339 time with its offset, like 2026-12-04T09:00:00Z, or epoch milliseconds")


class _Addressing(Resource):
    def _journal(self) -> Journal:
        node = self.config.get("journal")
        if node is None and self.config.get("workflow") is not None:
            node = self.app.resource_for(self.config["workflow"]).config["journal"]
        resource = self.app.resource_for(node)
        assert isinstance(resource, Journal)
        return resource

    def run_id(self, inputs: Any) -> str:
        ev = self.field("run")
        run = ev.evaluate(self.call_scope(inputs)) if ev is not None else \
            inputs.get("run") if isinstance(inputs, Mapping) else None
        if not isinstance(run, str) or not run:
            raise TeloError(Code.DURABLE_RUN_ID_INVALID, f"{self.kind} {self.name!r}: no run id (configure `run:` "
                            "or pass inputs.run)", data={"resource": self.name})
        return run


def record_view(record: RunRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"run": record.run, "status": record.status}
    if record.due_at is not None:
        out["dueAt"] = record.due_at
    if record.parked is not None:
        out["parked"] = {"path": record.parked.path, "resource": record.parked.resource}
    return out


class Status(_Addressing):
    kind = "DurableLocal.Status"

    async def invoke(self, inputs: Any) -> Any:
        run = self.run_id(inputs)
        record = await asyncio.to_thread(self._journal().store.read_run, run)
        return {"run": run, "status": "unknown"} if record is None else record_view(record)


class Result(_Addressing):
    kind = "DurableLocal.Result"

    async def invoke(self, inputs: Any) -> Any:
        run = self.run_id(inputs)
        store = self._journal().store
        wait = self.config.get("wait")
        deadline = None if wait is None else self.app.clock.monotonic() + duration_ms(
            compile_time(self.app, wait, f"{self.kind}.wait"), f"{self.kind} {self.name!r}.wait") / 1000
        poll = duration_ms(self.config.get("poll", "100ms"), f"{self.kind}.poll") / 1000
        while True:
            record = await asyncio.to_thread(store.read_run, run)
            if record is not None and record.terminal:
                return terminal_view(record)
            if deadline is None or self.app.clock.monotonic() >= deadline:
                return {"run": run, "status": record.status if record else "unknown"}
            await asyncio.sleep(poll)


def terminal_view(record: RunRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"run": record.run, "status": record.status}
    result = record.decoded_result()
    if result is not NO_VALUE:
        out["result"] = result
    if record.error:
        out["error"] = dict(record.error)
    if record.status == "completed":
        out["collapsedRegions"] = record.collapsed_regions or 0
        out["collapseReasons"] = list(record.collapse_reasons or ())
        out["replayedSteps"] = record.replayed_steps or 0
        out["replayed"] = (record.replayed_steps or 0) > 0
    return out


class Cancel(_Addressing):
    kind = "DurableLocal.Cancel"

    async def invoke(self, inputs: Any) -> Any:
        run = self.run_id(inputs)
        store = self._journal().store
        reason = str(self.config.get("reason", "cancelled"))
        try:
            out = await asyncio.to_thread(cancel_run, store, run, reason)
        except TeloError as exc:
            if exc.code != NOT_FOUND:
                raise
            return {"cancelled": False, "status": "unknown"}  # the kind answers; it does not fail the step
        if not out.cancelled:
            return {"cancelled": False, "status": out.status}
        return {"run": run, "cancelled": True, "status": "cancelled"}


class Deliver(_Addressing):
    kind = "DurableLocal.Deliver"

    async def invoke(self, inputs: Any) -> Any:
        scope = self.call_scope(inputs)
        token_ev, payload_ev = self.field("token"), self.field("payload")
        token = token_ev.evaluate(scope) if token_ev is not None else None
        if not isinstance(token, str) or not token:
            raise TeloError(Code.DURABLE_TOKEN_REQUIRED, f"{self.kind} {self.name!r}: the token evaluated to "
                            f"{token!r}", hint="deliver to the token the await parked on")
        payload = payload_ev.evaluate(scope) if payload_ev is not None else None
        await_ref = self.config.get("await")
        if await_ref is not None:  # validated BEFORE any lookup (reference §6)
            schema = schema_of(self.app, self.app.resource_for(await_ref).config.get("outputType"))
            if schema is not None:
                SchemaValidator(schema, Code.DURABLE_PAYLOAD_INVALID).validate(
                    payload, where=f"the payload delivered to {token!r}")
        return await asyncio.to_thread(deliver, self._journal().store, token, payload)


class Schedule(_Addressing):
    kind = "DurableLocal.Schedule"

    async def invoke(self, inputs: Any) -> Any:
        scope = self.call_scope(inputs)
        run_ev, after_ev = self.field("runId"), self.field("after")
        at_ev, inputs_ev = self.field("at"), self.field("inputs")
        run = run_ev.evaluate(scope) if run_ev is not None else default_run_id(self.name)
        if not isinstance(run, str) or not run:
            raise TeloError(Code.DURABLE_RUN_ID_INVALID,
                            f"{self.kind} {self.name!r}: runId must be a non-empty string")
        now = self.app.clock.now_ms()
        if after_ev is not None:
            due = now + duration_ms(after_ev.evaluate(scope), f"{self.kind} {self.name!r}.after")
        elif at_ev is not None:
            due = instant_ms(at_ev.evaluate(scope), Code.DURABLE_SCHEDULE_INVALID, f"{self.kind} {self.name!r}.at")
        else:
            raise TeloError(Code.DURABLE_SCHEDULE_INVALID, f"{self.kind} {self.name!r}: needs `after` or `at`")
        workflow = self.app.resource_for(self.config["workflow"])
        run_inputs = inputs_ev.evaluate(scope) if inputs_ev is not None else {}
        if isinstance(workflow, Workflow) and isinstance(run_inputs, dict):
            run_inputs = workflow.checked_inputs(run_inputs)  # its inputType, before anything is admitted
        result = await asyncio.to_thread(self._journal().store.admit, Admission.of(
            run, status="scheduled", due_at=due, inputs=run_inputs, workflow=workflow.name,
            writer=writer_for(self._journal().store),
            **queue_fields(workflow.queue if isinstance(workflow, Workflow) else None, run_inputs)))
        if not result.admitted:
            return {"runId": run, "scheduled": False, "status": result.record.status}
        return {"runId": run, "scheduled": True, "dueAt": due}


class Resume(_Addressing):
    """Operator override: continue a parked (or held) run now; the override is recorded in the journal."""

    kind = "DurableLocal.Resume"

    async def invoke(self, inputs: Any) -> Any:
        run = self.run_id(inputs)
        reason = str(self.config.get("reason", "resumed by operator"))
        # The kind IS the operator override: it continues a run held on a manifest change too (recorded).
        out = await asyncio.to_thread(lambda: resume_run(self._journal().store, run, reason,
                                                         self.app.clock.now_ms(), force=True))
        return out.to_json()
