"""Durable waits and deliveries: ``Durable.Sleep``, ``Durable.Await``, ``Durable.Value`` and ``Deliver``
(reference §5, §6 "Local.Deliver"; spec §2 park, §7.1).

Each wait pins its inputs through ``decide`` on the RAW handle (a collapsed region still records them,
reference §4), then parks at the path of the step that dispatched it. A delivery writes a step entry at the
park path and unparks, in one store operation (exactly one of racing deliveries wins); the replayed step
then returns the payload and the wait is never re-entered.

**Typed deliveries.** An Await with an ``outputType`` records its JSON schema beside its park
(``<step>/@payloadSchema``) before parking, so that every delivery path — ``telo deliver``, the dashboard, the
Python API, ``Local.Deliver``, another process with no manifest at hand — validates the payload against it
BEFORE the token is spent: a refused payload (``ERR_DURABLE_PAYLOAD_INVALID``) leaves the token usable. The
Await's step validates the payload it hands the body on replay too (telo.engine.interpreter), so a payload
that reached the journal some other way (an older writer, an upstream process) fails the step, never the body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from telo import faults, paths
from telo.clock import SYSTEM_CLOCK, Clock, uuid4
from telo.durable.messages import INBOX_TOKEN_PREFIX
from telo.engine.composers import dispatch_path
from telo.engine.context import current
from telo.engine.handle import RunHandle, as_epoch_ms, epoch_ms_value
from telo.engine.journaling import suspend_allowed
from telo.engine.suspend import ParkUntil, ParkWhere
from telo.errors import Code, NoRun, TeloError
from telo.journal.compat import writer_for
from telo.journal.model import RunRecord
from telo.journal.store import Store
from telo.runtime.contracts import SchemaValidator


def require_handle(resource: str, kind: str) -> RunHandle:
    handle = current().handle
    if handle is None:
        raise NoRun(
            f"{kind} {resource!r} needs a durable run, but was dispatched outside one",
            hint="place it inside a durable workflow's steps (e.g. Local.Workflow)",
            data={"resource": resource, "kind": kind},
        )
    return handle


async def sleep(resource: str, *, for_ms: int | None = None, until_ms: int | None = None,
                clock: Clock = SYSTEM_CLOCK) -> dict[str, Any]:
    """``Durable.Sleep``: decide the wake time once, park until it, return ``{wokeAt}`` once it has passed."""
    handle = require_handle(resource, "Durable.Sleep")
    here = dispatch_path(resource)
    if (for_ms is None) == (until_ms is None):
        raise TeloError(Code.DURABLE_SLEEP_INVALID, f"Durable.Sleep {resource!r} needs exactly one of `for` or "
                        "`until`", data={"resource": resource})

    def wake() -> int | float:
        ms = clock.now_ms() + for_ms if for_ms is not None else until_ms
        assert ms is not None  # (exactly one of them: checked above)
        return epoch_ms_value(handle, ms)

    wake_at = await handle.decide(paths.wake_at_path(here), "value", wake)
    due = epoch_ms_of(wake_at, resource, "wakeAt")
    if clock.now_ms() >= due:  # (a double as recorded; an int as this journal's writer records one)
        return {"wokeAt": wake_at if type(wake_at) is float else epoch_ms_value(handle, due)}
    suspend_allowed(resource)
    await handle.park(ParkWhere(here, resource), ParkUntil(at=due))


def epoch_ms_of(recorded: Any, resource: str, what: str) -> int:
    """A recorded time as epoch ms: an int as telo records it, or a double (an upstream or legacy journal's)."""
    due = as_epoch_ms(recorded)
    if due is None:
        raise TeloError(Code.DURABLE_SLEEP_INVALID, f"{resource!r}: the recorded {what} {recorded!r} is not a time "
                        "in epoch ms", data={"resource": resource, what: str(recorded)})
    return due


async def await_delivery(resource: str, *, token: Callable[[], Any] | None = None, timeout_ms: int | None = None,
                         clock: Clock = SYSTEM_CLOCK, schema: Mapping[str, Any] | None = None) -> Any:
    """``Durable.Await``: decide the token (and deadline), park on them; a delivery supplies the result.
    ``schema``: the JSON schema of its ``outputType``, recorded for the deliverers (module docstring)."""
    handle = require_handle(resource, "Durable.Await")
    here = dispatch_path(resource)

    def make_token() -> str:
        value = token() if token is not None else None
        if value is None or value == "":
            return uuid4()
        if not isinstance(value, str):
            raise TeloError(Code.DURABLE_TOKEN_REQUIRED, f"Durable.Await {resource!r}: the token must be a string",
                            data={"resource": resource})
        return value

    wake_token = await handle.decide(paths.token_path(here), "value", make_token)
    deadline = None
    if timeout_ms is not None:
        deadline = epoch_ms_of(await handle.decide(paths.deadline_path(here), "value",
                                                 lambda: epoch_ms_value(handle, clock.now_ms() + timeout_ms)),
                             resource, "deadline")
        if clock.now_ms() >= deadline:
            raise TeloError(
                Code.DURABLE_AWAIT_TIMEOUT,
                f"Durable.Await {resource!r}: nothing was delivered for token {wake_token!r} before the deadline",
                hint="deliver sooner, or raise the await's `timeout`",
                data={"resource": resource, "token": wake_token, "deadline": deadline},
            )
    suspend_allowed(resource)
    if schema is not None:
        await handle.decide(paths.payload_schema_path(here), "schema", lambda: dict(schema))
    await handle.park(ParkWhere(here, resource), ParkUntil(token=wake_token, at=deadline))


async def pinned_value(resource: str, compute: Callable[[], Any]) -> Any:
    """``Durable.Value``: an impure evaluation pinned once and replayed (it records even in collapsed regions)."""
    handle = require_handle(resource, "Durable.Value")
    return await handle.decide(paths.value_path(dispatch_path(resource)), "value", compute)


def deliver(store: Store, token: str, payload: Any) -> dict[str, Any]:
    """Write the payload at the run's park path and unpark it; the body is continued by a worker or a
    resubmission, never here (reference §6 "Local.Deliver"). A spent or unknown token delivers nothing, and of
    racing deliveries to one token exactly one is answered ``delivered: true``. The payload is checked against
    the schema the Await recorded (module docstring) before anything is written."""
    if not isinstance(token, str) or not token:
        raise TeloError(Code.DURABLE_TOKEN_REQUIRED, "a delivery needs a non-empty token",
                        hint="pass the token the await parked on (see `telo status RUN`)")
    if token.startswith(INBOX_TOKEN_PREFIX):  # a Durable.Receive's park: its answer is a message, never a delivery
        raise TeloError(Code.DURABLE_TOKEN_REQUIRED, f"{token!r} is a receive's wait for a message, not an Await's "
                        "token: a delivery cannot answer it", hint="send the run a message: `telo send RUN TOPIC`",
                        data={"token": token})
    record = store.run_parked_on(token)
    if record is None or record.parked is None:
        return {"delivered": False}
    schema = recorded_schema(store, record)
    if schema is not None:
        SchemaValidator(schema, Code.DURABLE_PAYLOAD_INVALID).validate(
            payload, where=f"the payload delivered to {token!r} (awaited by {record.parked.resource!r} of run "
            f"{record.run!r})")
    text, v = writer_for(store).stored(payload)  # (journal compat legacy: plain JSON, telo.journal.compat)
    run = store.deliver(token, text, v)
    faults.point("after-delivery-append")
    if run is None:  # another delivery got there first (or the run moved on meanwhile)
        return {"delivered": False}
    return {"delivered": True, "run": run}


def recorded_schema(store: Store, record: RunRecord) -> Mapping[str, Any] | None:
    """The payload schema the Await parked at ``record.parked`` recorded, if it recorded one."""
    assert record.parked is not None
    where = paths.child(record.parked.path, paths.PAYLOAD_SCHEMA)
    for entry in store.read_entries(record.run):
        if entry.path == where:
            value = entry.decode(record.run)
            return value if isinstance(value, Mapping) else None
    return None
