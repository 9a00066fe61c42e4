"""How many runs one process executes at once through its resumers (issue 14: a worker claims at most what it
can run now, and leaves the other due runs to other workers; :mod:`telo.kinds.resumer`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

# Runs one worker process executes at once unless told otherwise (`telo worker --concurrency`, a resumer's
# `concurrency`). A hundred in flight share group commits well (BENCHMARKS.md); fewer spread due runs wider
# across workers.
DEFAULT_CONCURRENCY: Final = 100


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
