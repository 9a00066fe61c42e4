"""One conformance suite, every store: the ``store`` fixture runs each test against all four.

``reopen`` gives a fresh store instance over the same file/directory/tables, for cross-instance checks.
The clock is a FakeClock shared by the store and the test, so due times and claim TTLs are exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from telo.clock import FakeClock
from telo.journal.store import Store
from tests.pg_support import fresh_prefix, pg_url

STORE_KINDS = ["memory", "sqlite", "file", "postgres"]


class StoreHarness:
    """Builds stores of one kind over one location; every store built is closed at teardown."""

    def __init__(self, kind: str, tmp_path: Path, clock: FakeClock) -> None:
        self.kind = kind
        self.clock = clock
        self._opened: list[Store] = []
        self._memory: Store | None = None
        self._location: dict[str, Any] = {}
        if kind == "sqlite":
            self._location = {"path": str(tmp_path / "journal.db")}
        elif kind == "file":
            self._location = {"directory": str(tmp_path / "journal")}
        elif kind == "postgres":
            self._location = {"url": pg_url(), "table": fresh_prefix()}

    @property
    def location(self) -> dict[str, Any]:
        """Where the store keeps its data (``path``, ``directory``, or ``url`` and ``table``; empty for memory):
        for tests that write a row or line the way an older writer did."""
        return dict(self._location)

    def open(self) -> Store:
        store: Store
        if self.kind == "memory":
            from telo.journal.memory import MemoryStore

            # Memory has no second instance over the same data: reopening hands back the same one.
            if self._memory is None:
                self._memory = MemoryStore(clock=self.clock)
            return self._memory
        if self.kind == "sqlite":
            from telo.journal.sqlite import SqliteStore

            store = SqliteStore(self._location["path"], clock=self.clock)
        elif self.kind == "file":
            from telo.journal.file import FileStore

            store = FileStore(self._location["directory"], clock=self.clock)
        else:
            from telo.journal.postgres import PostgresStore

            store = PostgresStore(self._location["url"], table=self._location["table"], clock=self.clock)
        self._opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self._opened:
            store.close()
        if self._memory is not None:
            self._memory.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=STORE_KINDS)
def harness(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[StoreHarness]:
    h = StoreHarness(request.param, tmp_path, clock)
    yield h
    h.close_all()


@pytest.fixture
def store(harness: StoreHarness) -> Store:
    return harness.open()


@pytest.fixture
def reopen(harness: StoreHarness) -> Callable[[], Store]:
    return harness.open
