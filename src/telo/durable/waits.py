"""Durable waits and deliveries: ``Durable.Sleep``, ``Durable.Await``, ``Durable.Value`` and ``Deliver``
(reference §5, §6 "Local.Deliver"; spec §2 park, §7.1).

Each wait pins its inputs through ``decide`` on the RAW handle (a collapsed region still records them,
reference §4), then parks at the path of the step that dispatched it. A delivery writes a step entry at the
park path and unparks; the replayed step then returns the payload and the wait is never re-entered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from telo import faults, paths
from telo.clock import SYSTEM_CLOCK, Clock, uuid4
from telo.engine.composers import dispatch_path
from telo.engine.context import current
from telo.engine.handle import RunHandle
from telo.engine.interpreter import suspend_allowed
from telo.engine.suspend import ParkUntil, ParkWhere
from telo.errors import NoRun, TeloError
from telo.journal.model import Entry
from telo.journal.store import Store


def require_handle(resource: str, kind: str) -> RunHandle:
    handle = current().handle
    if handle is None:
        raise NoRun(
            "ERR_DURABLE_NO_RUN",
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
        raise TeloError("ERR_DURABLE_SLEEP_INVALID", f"Durable.Sleep {resource!r} needs exactly one of `for` or "
                        "`until`", data={"resource": resource})
    wake_at = await handle.decide(
        paths.wake_at_path(here), "value",
        lambda: clock.now_ms() + for_ms if for_ms is not None else until_ms,
    )
    if clock.now_ms() >= wake_at:
        return {"wokeAt": wake_at}
    suspend_allowed(resource)
    await handle.park(ParkWhere(here, resource), ParkUntil(at=wake_at))


async def await_delivery(resource: str, *, token: Callable[[], Any] | None = None, timeout_ms: int | None = None,
                         clock: Clock = SYSTEM_CLOCK) -> Any:
    """``Durable.Await``: decide the token (and deadline), park on them; a delivery supplies the result."""
    handle = require_handle(resource, "Durable.Await")
    here = dispatch_path(resource)

    def make_token() -> str:
        value = token() if token is not None else None
        if value is None or value == "":
            return uuid4()
        if not isinstance(value, str):
            raise TeloError("ERR_DURABLE_TOKEN_REQUIRED", f"Durable.Await {resource!r}: the token must be a string",
                            data={"resource": resource})
        return value

    wake_token = await handle.decide(paths.token_path(here), "value", make_token)
    deadline = None
    if timeout_ms is not None:
        deadline = await handle.decide(paths.deadline_path(here), "value", lambda: clock.now_ms() + timeout_ms)
        if clock.now_ms() >= deadline:
            raise TeloError(
                "ERR_DURABLE_AWAIT_TIMEOUT",
                f"Durable.Await {resource!r}: nothing was delivered for token {wake_token!r} before the deadline",
                hint="deliver sooner, or raise the await's `timeout`",
                data={"resource": resource, "token": wake_token, "deadline": deadline},
            )
    suspend_allowed(resource)
    await handle.park(ParkWhere(here, resource), ParkUntil(token=wake_token, at=deadline))


async def pinned_value(resource: str, compute: Callable[[], Any]) -> Any:
    """``Durable.Value``: an impure evaluation pinned once and replayed (it records even in collapsed regions)."""
    handle = require_handle(resource, "Durable.Value")
    return await handle.decide(paths.value_path(dispatch_path(resource)), "value", compute)


def deliver(store: Store, token: str, payload: Any) -> dict[str, Any]:
    """Write the payload at the run's park path and unpark it; the body is continued by a worker or a
    resubmission, never here (reference §6 "Local.Deliver"). A spent or unknown token delivers nothing."""
    if not isinstance(token, str) or not token:
        raise TeloError("ERR_DURABLE_TOKEN_REQUIRED", "a delivery needs a non-empty token",
                        hint="pass the token the await parked on (see `telo status RUN`)")
    record = store.run_parked_on(token)
    if record is None or record.parked is None:
        return {"delivered": False}
    store.append(record.run, Entry.step(record.parked.path, None, payload))
    faults.point("after-delivery-append")
    store.unpark(record.run)
    return {"delivered": True, "run": record.run}
