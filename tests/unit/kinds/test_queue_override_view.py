"""How a process reads ``telo queues set`` overrides (issue 16, telo.kinds.queue_overrides): at most once per
``TTL_S`` per journal, inline for a store whose reads never block (memory, SQLite), on a thread for one whose do
(PostgreSQL) — the claim that asked goes on with the limits known — and a failed read keeps them."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from telo.errors import Code, JournalError
from telo.journal.memory import MemoryStore
from telo.journal.queue_overrides import QueueOverride
from telo.kinds import queue_overrides
from telo.kinds.queue_overrides import OverrideView


class Counting(MemoryStore):
    """A memory store that counts its override reads, and may say its reads block (as PostgreSQL's do)."""

    def __init__(self, *, blocking: bool = False) -> None:
        super().__init__()
        self.reads = 0
        self.fail = False
        if blocking:
            self.inline_calls = False

    def queue_overrides(self) -> dict[str, QueueOverride]:
        self.reads += 1
        if self.fail:
            raise JournalError(Code.JOURNAL_UNAVAILABLE, "down")
        return super().queue_overrides()


def test_an_inline_store_is_read_at_most_once_per_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(queue_overrides.SYSTEM_CLOCK, "monotonic", lambda: now[0])
    store = Counting()
    view = OverrideView(store)
    assert dict(view.current()) == {} and store.reads == 1
    store.set_queue_override(QueueOverride("q", concurrency=3))
    for _ in range(100):  # a busy worker's claims within one TTL: no read
        assert dict(view.current()) == {}
    assert store.reads == 1
    now[0] += queue_overrides.TTL_S
    assert view.current()["q"].concurrency == 3 and store.reads == 2
    store.fail = True
    now[0] += queue_overrides.TTL_S
    assert view.current()["q"].concurrency == 3 and store.reads == 3  # a failed read keeps what is known
    assert view.current()["q"].concurrency == 3 and store.reads == 3  # ... and is tried again a TTL later


def test_a_blocking_store_is_read_on_a_thread_while_the_claim_goes_on() -> None:
    store = Counting(blocking=True)
    store.set_queue_override(QueueOverride("q", concurrency=3))

    async def claims() -> tuple[Mapping[str, QueueOverride], Mapping[str, QueueOverride]]:
        view = OverrideView(store)
        first = view.current()  # the read starts on a thread; this claim goes on with what is known (nothing)
        assert view.current() is first and store.reads <= 1  # one read at a time
        for _ in range(200):
            await asyncio.sleep(0.005)
            if view.current():
                break
        return first, view.current()

    first, later = asyncio.run(claims())
    assert dict(first) == {} and later["q"].concurrency == 3 and store.reads == 1
