"""The fault suite's effects: each call appends ONE fsynced line to the ledger before it does its work.

    <idempotency key> <step> <pid> <monotonic ns>

The ledger (``FAULT_LEDGER``) is the test's view of the outside world (as the crash suite's, tests/crash/
workflows/ledger.py): a charge line on disk is a charge made, by that process, whatever happens next.
``FAULT_PREPARE_MS`` makes ``prepare`` take that long after its line (a window in which to pause or signal the
process); ``prepare_blocking`` spends it blocking the event loop, as a synchronous call in an ``async def``.
``FAULT_CHARGE_MS`` does the same for ``charge``; ``FAULT_FAIL_CHARGE`` makes ``charge`` raise; the refund's
``FAULT_REFUND_MS`` gives a window inside the compensation.
"""

from __future__ import annotations

import os
import time
from typing import Any


def _write(key: str, step: str) -> None:
    fd = os.open(os.environ["FAULT_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key} {step} {os.getpid()} {time.monotonic_ns()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _pause(variable: str) -> None:
    delay = float(os.environ.get(variable, "0")) / 1000
    if delay > 0:
        time.sleep(delay)


def prepare(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    _write(ctx.idempotency_key, "prepare")
    _pause("FAULT_PREPARE_MS")
    # FAULT_PREPARE_BYTES: a result that big, so that its receipt needs new blocks of a full filesystem (a small
    # append can fit in the slack of the journal file's last block)
    return {"prepared": inputs["id"], "pad": "x" * int(os.environ.get("FAULT_PREPARE_BYTES", "0"))}


async def prepare_blocking(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    _write(ctx.idempotency_key, "prepare")
    _pause("FAULT_PREPARE_MS")  # time.sleep on the event loop's thread: nothing else of this process's loop runs
    return {"prepared": inputs["id"]}


def charge(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    _write(ctx.idempotency_key, "charge")
    _pause("FAULT_CHARGE_MS")
    if os.environ.get("FAULT_FAIL_CHARGE"):
        raise RuntimeError(f"card declined for {inputs['id']}")
    return {"charged": inputs["id"], "by": os.getpid()}


def refund(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    _write(ctx.idempotency_key, "refund")
    _pause("FAULT_REFUND_MS")
    return {"refunded": inputs["id"], "because": inputs.get("error")}


def notify(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    _write(ctx.idempotency_key, "notify")
    return {"notified": inputs["id"]}
