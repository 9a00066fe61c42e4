"""What the group-commit tests of every journal share: hold the writer thread so that what is queued meanwhile
forms ONE batch (:mod:`telo.journal.group_commit`; the SQLite and PostgreSQL stores)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any


class Gate:
    """Holds the writer thread of ``store`` (a store with a group-commit ``_writer``) inside a batch, so that
    what is submitted meanwhile forms the next batch."""

    def __init__(self, store: Any) -> None:
        self.entered, self.release = threading.Event(), threading.Event()

        def hold(conn: Any) -> None:
            self.entered.set()
            assert self.release.wait(10)

        self.done = store._writer.submit(hold)
        assert self.entered.wait(10)

    def open(self) -> None:
        self.release.set()
        self.done.result(10)


def one_batch(store: Any, submit: Callable[[], Sequence[asyncio.Future[Any]]]) -> list[Any]:
    """Run ``submit`` on an event loop while the writer thread is held, so that all it queues forms ONE batch;
    each future's result (or exception), in order."""

    async def main() -> list[Any]:
        commits = store.stats.commits
        gate = Gate(store)
        futures = submit()
        await asyncio.to_thread(gate.open)
        out = await asyncio.gather(*futures, return_exceptions=True)
        assert store.stats.commits == commits + 2  # the gate's batch, then all of these in one
        return list(out)

    return asyncio.run(main())
