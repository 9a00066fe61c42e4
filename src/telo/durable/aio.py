"""Async access to a synchronous journal store.

Store calls block (a file fsync, a SQLite group commit, a PostgreSQL round trip), so the event loop hands
them to worker threads; a SQLite store's ``submit_append`` returns a future directly, so a hundred runs
appending at once wait on one group commit without holding a thread each. The memory store does no I/O and
is called inline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from telo.journal.model import Admission, AdmitResult, Entry, Outcome, Parked, RunRecord
from telo.journal.store import Store

T = TypeVar("T")


class AsyncStore:
    def __init__(self, store: Store) -> None:
        self.sync = store
        self._inline = store.kind == "memory"
        self._submit = getattr(store, "submit_append", None)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._inline:
            return fn(*args)
        return await asyncio.to_thread(fn, *args)

    async def append(self, run: str, entry: Entry) -> Entry:
        if self._submit is not None:
            # Called on the loop thread, so the store sees this task's ambient transaction, if any.
            stored: Entry = await asyncio.wrap_future(self._submit(run, entry))
            return stored
        return await self._call(self.sync.append, run, entry)

    async def admit(self, admission: Admission) -> AdmitResult:
        return await self._call(self.sync.admit, admission)

    async def read_run(self, run: str) -> RunRecord | None:
        return await self._call(self.sync.read_run, run)

    async def read_entries(self, run: str) -> list[Entry]:
        return await self._call(self.sync.read_entries, run)

    async def park(self, run: str, parked: Parked) -> RunRecord:
        return await self._call(self.sync.park, run, parked)

    async def unpark(self, run: str) -> bool:
        return await self._call(self.sync.unpark, run)

    async def complete(self, run: str, outcome: Outcome) -> RunRecord:
        return await self._call(self.sync.complete, run, outcome)

    async def claim(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> bool:
        return await self._call(self.sync.claim, run, holder, ttl_ms, now_ms)

    async def release(self, run: str, holder: str) -> None:
        await self._call(self.sync.release, run, holder)

    async def update_run(self, run: str, **fields: Any) -> RunRecord:
        return await self._call(lambda: self.sync.update_run(run, **fields))

    async def due_runs(self, now_ms: int, limit: int) -> list[str]:
        return await self._call(self.sync.due_runs, now_ms, limit)

    async def run_parked_on(self, token: str) -> RunRecord | None:
        return await self._call(self.sync.run_parked_on, token)

    def writes_inside(self, zone: Any) -> bool:
        return self.sync.writes_inside(zone)
