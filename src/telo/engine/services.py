"""What the step interpreter needs from the runtime, injectable for tests: the event bus, the clock (the one
source of time and randomness, telo.clock) and how to sleep."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from telo.clock import SYSTEM_CLOCK, Clock
from telo.engine.dispatch import EventBus


async def _default_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


@dataclass
class Services:
    """What the interpreter needs from the runtime, injectable for tests."""

    events: EventBus = field(default_factory=EventBus)
    clock: Clock = SYSTEM_CLOCK
    sleep: Callable[[float], Awaitable[None]] = _default_sleep

