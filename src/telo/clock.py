"""The one injectable source of time and ids (ARCHITECTURE §2: tests fake it, nothing else reads the clock)."""

from __future__ import annotations

import os
import secrets
import time
import uuid
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock epoch milliseconds (what journals record: due times, claims)."""
        ...

    def now_ns(self) -> int:
        """Wall-clock epoch nanoseconds (CEL ``now()``)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic clock (timeouts, polling)."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def now_ns(self) -> int:
        return time.time_ns()

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock tests move by hand; ``advance`` makes durable sleeps due instantly."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:  # 2026-01-01T00:00:00Z
        self._ns = start_ms * 1_000_000
        self._mono = 0.0

    def now_ms(self) -> int:
        return self._ns // 1_000_000

    def now_ns(self) -> int:
        return self._ns

    def monotonic(self) -> float:
        return self._mono

    def advance(self, *, ms: int = 0, seconds: float = 0.0) -> None:
        delta = ms * 1_000_000 + int(seconds * 1e9)
        self._ns += delta
        self._mono += delta / 1e9


SYSTEM_CLOCK = SystemClock()


def uuid4() -> str:
    return str(uuid.uuid4())


def uuid7(clock: Clock = SYSTEM_CLOCK) -> str:
    """An RFC 9562 UUIDv7: 48-bit epoch ms, then random bits, so ids sort by creation time."""
    ms = clock.now_ms() & ((1 << 48) - 1)
    rand = int.from_bytes(secrets.token_bytes(10), "big")
    value = (ms << 80) | (0x7 << 76) | ((rand >> 68) & 0xFFF) << 64 | (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def process_start_ticks(pid: int | None = None) -> int | None:
    """The start time of a process in clock ticks since boot (Linux ``/proc/<pid>/stat`` field 22).

    Together with the pid it names one process instance: a recycled pid has a different start time.
    """
    try:
        with open(f"/proc/{pid or os.getpid()}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; fields resume after the last ')'.
    rest = raw[raw.rindex(b")") + 2 :].split()
    return int(rest[19])
