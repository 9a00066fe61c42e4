"""Python.Function targets: sync and async callables, one taking the step context, and one returning a
value outside the CEL domain."""

from __future__ import annotations

import asyncio
import threading
from typing import Any


def sync_double(inputs: dict[str, Any]) -> dict[str, Any]:
    # sync functions run in a worker thread, off the event loop
    return {"doubled": inputs["n"] * 2, "offLoop": threading.current_thread() is not threading.main_thread()}


async def async_double(inputs: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(0.01)
    return {"doubled": inputs["n"] * 2, "async": True}


def with_context(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"run": ctx.run_id, "path": ctx.step_path, "attempt": ctx.attempt, "key": ctx.idempotency_key,
            "echo": inputs}


async def fail_until_third(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    if ctx.attempt < 3:
        raise RuntimeError(f"attempt {ctx.attempt} fails")
    return {"attempt": ctx.attempt}


_calls: dict[str, int] = {}


def attempt_of(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    _calls[inputs["id"]] = _calls.get(inputs["id"], 0) + 1
    return {"attempt": ctx.attempt}


def calls_of(inputs: dict[str, Any]) -> int:
    return _calls.get(inputs["id"], 0)


class Receipt:
    def __init__(self, number: str) -> None:
        self.number = number


def returns_object(inputs: dict[str, Any]) -> Any:
    return {"receipt": Receipt("R-1")}


def returns_tuple(inputs: dict[str, Any]) -> Any:
    return (1, 2)


def returns_none(inputs: dict[str, Any]) -> None:
    return None


def typed_values(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"big": 2**62, "raw": b"\x00\xff", "f": 1.5, "nested": [{"k": None}]}
