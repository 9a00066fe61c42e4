"""Noticing, before each effect, that the run was cancelled: cancel stops a running body at its next step
(docs/guarantees.md; telo.journal.cancels).

The run's status is read when this process wrote a cancel since the last read, and otherwise at most every
:data:`telo.journal.cancels.POLL_MS` (a cancel from another process); on SQLite the reads of all the runs in
flight share one query per loop iteration.

The poll follows REAL time (SYSTEM_CLOCK), not the run's clock: it bounds only how long a cancel from another
process goes unseen — nothing a replay reads — and a test's frozen FakeClock must not keep a body from ever
seeing one.
"""

from __future__ import annotations

from telo.clock import SYSTEM_CLOCK
from telo.durable.aio import AsyncStore
from telo.durable.halting import RunCancelled
from telo.journal import cancels


class CancelPoll:
    """Whether one execution's run has been cancelled, as last read."""

    __slots__ = ("cancelled", "due", "generation", "run", "store")

    def __init__(self, store: AsyncStore, run: str) -> None:
        self.store, self.run = store, run
        self.cancelled = False
        self.generation = cancels.generation()
        self.due = SYSTEM_CLOCK.monotonic() + cancels.POLL_MS / 1000

    def raise_if_cancelled(self) -> None:
        """Raise ``RunCancelled`` if the run was seen cancelled (nothing is read)."""
        if self.cancelled:
            raise RunCancelled(f"run {self.run!r} was cancelled", data={"run": self.run})

    async def check(self, *, shared: bool) -> None:
        """Read the run's status when due (see the module docstring), then :meth:`raise_if_cancelled`.
        ``shared``: other runs execute in this process, whose reads may share one query."""
        generation = cancels.generation()
        if generation != self.generation or SYSTEM_CLOCK.monotonic() >= self.due:
            self.generation = generation
            if await self.store.run_status(self.run, shared=shared) == "cancelled":
                self.cancelled = True
            self.due = SYSTEM_CLOCK.monotonic() + cancels.POLL_MS / 1000
        self.raise_if_cancelled()
