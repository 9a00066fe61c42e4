"""The one source of time, ids and randomness (ARCHITECTURE §2: tests fake it, nothing else reads the clock).

Two kinds of reads go through here, and each call site says which it needs:

- the INJECTED clock (a :class:`Clock`: the application's, a test's :class:`FakeClock`) for everything a run
  can observe or record — due times, claim timestamps, CEL ``now()``, a retry's jitter — so that a test
  controls them;
- the REAL clock (:data:`SYSTEM_CLOCK`) for what must follow real elapsed time whatever a test does to its
  clock: claim leases (other processes judge them in real time), polling intervals, a caller's timeout.

Ids (:func:`uuid4`, :func:`uuid7`, :func:`random_bits`, :func:`token_urlsafe`) always draw from the operating
system's randomness: a seeded source would repeat them across processes and tests. ``tests/unit/test_clock_reads.py``
fails when any other module of telo reads the time or a random source directly.
"""

from __future__ import annotations

import os
import random
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

    def random(self) -> float:
        """A uniform draw from [0, 1) (a retry's jitter: recorded in the journal, so a replay never draws it
        again)."""
        ...


class SystemClock:
    def __init__(self) -> None:
        self._rng = random.Random()  # seeded from the operating system

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def now_ns(self) -> int:
        return time.time_ns()

    def monotonic(self) -> float:
        return time.monotonic()

    def random(self) -> float:
        return self._rng.random()


class FakeClock:
    """A clock tests move by hand; ``advance`` makes durable sleeps due instantly. Its random draws come from
    a generator seeded with ``seed``: the same test draws the same jitter every time."""

    def __init__(self, start_ms: int = 1_767_225_600_000, *, seed: int = 0) -> None:  # 2026-01-01T00:00:00Z
        self._ns = start_ms * 1_000_000
        self._mono = 0.0
        self._rng = random.Random(seed)

    def now_ms(self) -> int:
        return self._ns // 1_000_000

    def now_ns(self) -> int:
        return self._ns

    def monotonic(self) -> float:
        return self._mono

    def random(self) -> float:
        return self._rng.random()

    def advance(self, *, ms: int = 0, seconds: float = 0.0) -> None:
        delta = ms * 1_000_000 + int(seconds * 1e9)
        self._ns += delta
        self._mono += delta / 1e9


SYSTEM_CLOCK = SystemClock()


def uuid4() -> str:
    return str(uuid.uuid4())


def uuid4_hex() -> str:
    """A random UUIDv4 as 32 hex digits (unique file and run-name suffixes)."""
    return uuid.uuid4().hex


def random_bits(k: int) -> int:
    """``k`` random bits from the operating system (the random fields of generated UUIDs)."""
    return secrets.randbits(k)


def token_urlsafe(nbytes: int) -> str:
    """An unguessable URL-safe token (the dashboard's CSRF token): never from a seeded source."""
    return secrets.token_urlsafe(nbytes)


def uuid7(clock: Clock = SYSTEM_CLOCK) -> str:
    """An RFC 9562 UUIDv7: 48-bit epoch ms, then random bits, so ids sort by creation time."""
    ms = clock.now_ms() & ((1 << 48) - 1)
    rand = random_bits(80)
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
