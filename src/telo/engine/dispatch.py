"""The one dispatch chokepoint (spec §7.2; reference §3 "Dispatch", §14 "Dispatch events").

Every invocation of a resource goes through :func:`dispatch`: input/output validation, the
``<name>.Invoked`` / ``InvokeRejected`` / ``InvokeFailed`` / ``InvokeCancelled`` / ``InvokeParked`` events,
wrapping of plain exceptions as ``ERR_EXECUTION_FAILED``, and carrying the durable path to the body the
target runs (a nested body continues the dispatching step's path, spec §5.1). A suspension passes through
untouched (spec §7.7): the chokepoint reports it and re-raises it, never wraps it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from telo.engine.context import current, derive, entered
from telo.engine.suspend import Suspension
from telo.errors import Code, TeloError
from telo.journal.model import NO_VALUE


class InvokeError(TeloError):
    """A structured failure of an invoked step (``{code, message, data}``; reference §3 ``error``)."""


class Validator(Protocol):
    def validate(self, value: Any, *, where: str) -> Any:
        """Return the value (defaults filled) or raise a TeloError (``ERR_INPUT_INVALID`` …)."""
        ...


class Invocable(Protocol):
    """A resource instance a step can dispatch to."""

    name: str  # resource name: events are named after it
    kind: str  # canonical kind, e.g. ``Python.Function``
    module: str | None  # the declaring module ref (target identity, spec §5.3)

    async def invoke(self, inputs: Any) -> Any: ...


EventListener = Callable[[str, Mapping[str, Any]], None]


class EventBus:
    """Kernel events (reference §14): ``Assert.Events`` and the live progress view subscribe here."""

    def __init__(self) -> None:
        self._listeners: list[EventListener] = []
        self._lock = threading.Lock()

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    @property
    def active(self) -> bool:
        """Whether anyone listens: a dispatch builds an event's payload only then (it is on every step's path)."""
        return bool(self._listeners)

    def emit(self, name: str, payload: Mapping[str, Any]) -> None:
        for listener in list(self._listeners):
            listener(name, payload)


@dataclass(frozen=True, slots=True)
class Contract:
    """A target's declared input/output validators (``inputType``/``outputType``)."""

    inputs: Validator | None = None
    outputs: Validator | None = None


_NO_CONTRACT = Contract()


def _ref(target: Invocable) -> dict[str, Any]:
    return {"kind": target.kind, "name": target.name}


async def dispatch(
    target: Invocable,
    inputs: Any,
    *,
    events: EventBus,
    path: str | None = None,
    contract: Contract | None = None,
) -> Any:
    """Invoke ``target`` through the chokepoint; ``path`` is the dispatching step's durable path."""
    contract = contract or getattr(target, "contract", None) or _NO_CONTRACT
    ctx = derive(path=path) if path is not None else current()
    try:
        # Contract failures are rejections of THIS dispatch, reported through the same events.
        if contract.inputs is not None:
            inputs = contract.inputs.validate(inputs, where=f"{target.name} inputs")
        with entered(ctx):
            result = await target.invoke(inputs)
        if contract.outputs is not None and result is not NO_VALUE:
            result = contract.outputs.validate(result, where=f"{target.name} outputs")
    except Suspension:
        if events.active:
            events.emit(f"{target.name}.InvokeParked", {"ref": _ref(target), "inputs": inputs, "outcome": "parked"})
        raise
    except asyncio.CancelledError:
        if events.active:
            events.emit(f"{target.name}.InvokeCancelled", {"ref": _ref(target), "inputs": inputs})
        raise
    except TeloError as exc:
        if events.active:
            events.emit(
                f"{target.name}.InvokeRejected",
                {"ref": _ref(target), "inputs": inputs, "code": exc.code, "message": exc.message, "outcome": "error"},
            )
        raise
    except Exception as exc:
        if events.active:
            events.emit(
                f"{target.name}.InvokeFailed",
                {"ref": _ref(target), "inputs": inputs, "code": Code.EXECUTION_FAILED.value, "message": str(exc)},
            )
        raise InvokeError(
            Code.EXECUTION_FAILED,
            f"{target.kind} {target.name!r} failed: {type(exc).__name__}: {exc}",
            data={"resource": target.name, "kind": target.kind},
        ) from exc
    if events.active:
        events.emit(
            f"{target.name}.Invoked",
            {"ref": _ref(target), "inputs": inputs, "outputs": result, "phase": "end", "outcome": "ok"},
        )
    return result
