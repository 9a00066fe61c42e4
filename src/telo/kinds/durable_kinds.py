"""The ``durable`` module's kinds (reference §5): ``Idempotent``, ``Sleep``, ``Await``, ``Value``; and telo's
``Patched`` (issue 17: a version gate, :mod:`telo.durable.gates`)."""

from __future__ import annotations

from typing import Any

from telo.durable.gates import patched
from telo.durable.waits import await_delivery, pinned_value, sleep
from telo.engine.context import derive, entered
from telo.engine.interpreter import run_steps
from telo.engine.steps import compile_steps
from telo.engine.zones import IDEMPOTENT, Zone
from telo.errors import Code, TeloError
from telo.kinds.addressing import duration_ms, instant_ms
from telo.runtime.contracts import SchemaValidator, contract_for, schema_of
from telo.runtime.resource import Resource

IDEMPOTENT_REASON = ("the author asserts re-running this region is observably a no-op; this resource's `reason:` "
                     "states why")


class Idempotent(Resource):
    """A region whose re-running is a no-op by the author's written word: it collapses to one entry (§8.1)."""

    kind = "Durable.Idempotent"

    async def init(self) -> None:
        reason = self.config.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise TeloError(Code.MANIFEST_VALIDATION_FAILED,
                            f"Durable.Idempotent {self.name!r} needs a prose `reason`")
        self.steps = compile_steps(self.config.get("steps", []), self.app.compiler,
                                   where=f"{self.kind} {self.name!r}.steps")
        self.inputs = self.field("inputs")

    def snapshot(self) -> Any:
        return {"reason": self.config.get("reason")}

    async def invoke(self, inputs: Any) -> Any:
        body_inputs = self.inputs.evaluate(self.call_scope(inputs)) if self.inputs is not None else {}
        zone = Zone(self.kind, {IDEMPOTENT: IDEMPOTENT_REASON}, resource=self.name)
        scope: dict[str, Any] = {**self.app.module_scope(), "inputs": body_inputs, "steps": {}}
        with entered(derive(zone=zone)):
            await run_steps(self.steps, scope, self.app.services)
        return {"steps": scope["steps"]}


class Sleep(Resource):
    kind = "Durable.Sleep"

    async def invoke(self, inputs: Any) -> Any:
        scope = self.call_scope(inputs)
        for_ev, until_ev = self.field("for"), self.field("until")
        where = f"Durable.Sleep {self.name!r}"
        for_ms = duration_ms(for_ev.evaluate(scope), f"{where}.for") if for_ev is not None else None
        until_ms = (instant_ms(until_ev.evaluate(scope), Code.DURABLE_SLEEP_INVALID, f"{where}.until")
                    if until_ev is not None else None)
        return await sleep(self.name, for_ms=for_ms, until_ms=until_ms, clock=self.app.clock)


class Await(Resource):
    kind = "Durable.Await"

    async def init(self) -> None:
        self.contract = contract_for(self.app, {"outputType": self.config.get("outputType")})
        self.payload_schema = schema_of(self.app, self.config.get("outputType"))
        self._payload = None if self.payload_schema is None else SchemaValidator(self.payload_schema,
                                                                                 Code.DURABLE_PAYLOAD_INVALID)

    def check_delivery(self, payload: Any) -> Any:
        """The payload a replayed step hands the body, checked against ``outputType`` (telo.durable.waits)."""
        if self._payload is None:
            return payload
        return self._payload.validate(payload, where=f"the payload delivered to Durable.Await {self.name!r}")

    async def invoke(self, inputs: Any) -> Any:
        scope = self.call_scope(inputs)
        token_ev = self.field("token")
        timeout = (inputs or {}).get("timeout") if isinstance(inputs, dict) else None
        if timeout is None and self.config.get("timeout") is not None:
            from telo.kinds.journals import compile_time

            timeout = compile_time(self.app, self.config["timeout"], f"{self.kind}.timeout")
        return await await_delivery(
            self.name,
            token=(lambda: token_ev.evaluate(scope)) if token_ev is not None else None,
            timeout_ms=duration_ms(timeout, f"Durable.Await {self.name!r}.timeout") if timeout is not None else None,
            clock=self.app.clock,
            schema=self.payload_schema,
        )


class Value(Resource):
    kind = "Durable.Value"

    async def init(self) -> None:
        self.contract = contract_for(self.app, {"outputType": self.config.get("outputType")})

    async def invoke(self, inputs: Any) -> Any:
        ev = self.field("value")
        assert ev is not None, "the schema requires `value`"
        scope = self.call_scope(inputs)
        return await pinned_value(self.name, lambda: ev.evaluate(scope))


class Patched(Resource):
    """A version gate: ``{patched, patch}``, decided once per run (:mod:`telo.durable.gates`)."""

    kind = "Durable.Patched"

    async def invoke(self, inputs: Any) -> Any:
        deprecated = self.config.get("deprecated", False) is True
        return {"patched": await patched(self.name, deprecated=deprecated), "patch": str(self.config["patch"])}
