"""How many runs one process executes at once through its resumers (issue 14: a worker claims at most what it
can run now, and leaves the other due runs to other workers; :mod:`telo.kinds.resumer`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

# Runs one worker process executes at once unless told otherwise (`telo worker --concurrency`, a resumer's
# `concurrency`). Measured with benchmarks/postgres.py (600 due runs, 1, 2 and 4 workers on 2 cores): 50 drains
# as fast as 100 with one worker (5,200 steps/s either way: fifty runs fill a group commit as well as a hundred)
# and spreads the runs evenly over four (22-28 % each, against 17-43 % at 100, where the workers that polled
# first took the whole second wave); 25 spreads as evenly but two workers then reached only 1.6x one.
DEFAULT_CONCURRENCY: Final = 50


class Slots:
    """How many runs one process executes at once through its resumers (issue 14: a worker claims at most what
    it can run now). ``telo worker`` gives all its resumers one; a resumer in a manifest has its own."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.busy = 0
        self._freed: list[Callable[[], None]] = []

    def free(self) -> int:
        return max(0, self.limit - self.busy)

    def on_freed(self, callback: Callable[[], None]) -> None:
        self._freed.append(callback)

    def give_back(self) -> None:
        self.busy -= 1
        for callback in self._freed:
            callback()

    def nudge(self) -> None:
        """Tell whoever waits for a free slot to look again (a claim deferred for fairness may be made now)."""
        for callback in self._freed:
            callback()
