"""The queue suite's step (tests/faults/test_queue_workers.py): it appends a ``start`` line, works ~100 ms, and
appends an ``end`` line, each fsynced, so the ledger shows when each run's work was in progress:

    <run> <tenant> <start|end> <pid> <monotonic ns>

``QUEUE_WORK_MS`` sets how long it works.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any


def _write(run: str, tenant: str, what: str) -> None:
    fd = os.open(os.environ["QUEUE_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{run} {tenant} {what} {os.getpid()} {time.monotonic_ns()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


async def work(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    _write(inputs["id"], inputs["tenant"], "start")
    await asyncio.sleep(float(os.environ.get("QUEUE_WORK_MS", "100")) / 1000)
    _write(inputs["id"], inputs["tenant"], "end")
    return {"done": inputs["id"]}
