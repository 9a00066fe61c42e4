"""The crash workflows' effects: each call appends ONE fsynced line to the ledger before it returns.

    <idempotency key> <step> <pid> <monotonic ns>

The ledger (``CRASH_LEDGER``) is the test's view of the outside world: a line is on disk before the effect
can return, so whatever kills the process afterwards, the test knows the effect happened, by which process,
under which key. ``CRASH_EFFECT_MS`` makes each effect take that long after its line is written (a window
for a random kill to land inside it); the ``inside-effect`` fault point sits between the two.
"""

from __future__ import annotations

import os
import time
from typing import Any

from telo import faults


def _write(line: str) -> None:
    fd = os.open(os.environ["CRASH_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one small O_APPEND write: lines of concurrent effects never interleave
        os.fsync(fd)
    finally:
        os.close(fd)


def effect(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    key = ctx.idempotency_key
    if not key:
        raise RuntimeError(f"effect {inputs!r} ran without an idempotency key (outside a durable run?)")
    _write(f"{key} {inputs['step']} {os.getpid()} {time.monotonic_ns()}\n")
    faults.point("inside-effect")
    delay = float(os.environ.get("CRASH_EFFECT_MS", "0")) / 1000
    if delay > 0:
        time.sleep(delay)
    return {"key": key, "step": inputs["step"]}
