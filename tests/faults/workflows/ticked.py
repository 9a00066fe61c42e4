"""The schedule suite's effect (tests/faults/test_schedule_workers.py): for each tick it appends one line to the
ledger, fsynced, then works ~200 ms (so a kill may land while a run executes):

    <tick> <pid> <monotonic ns>
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any


async def effect(inputs: dict[str, Any]) -> dict[str, Any]:
    fd = os.open(os.environ["FAULT_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{inputs['tick']} {os.getpid()} {time.monotonic_ns()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    await asyncio.sleep(0.2)
    return {"tick": inputs["tick"]}
