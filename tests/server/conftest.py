"""The server tests' journal and HTTP client: a SQLite journal in the test's directory and a Starlette
TestClient on the dashboard over it. A module that needs a fake clock overrides ``clock``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from telo.clock import SYSTEM_CLOCK, Clock
from telo.journal.sqlite import SqliteStore
from telo.server.app import create_app

BASE = "http://127.0.0.1:8765"  # the TestClient's origin (what the CSRF checks compare against)


@pytest.fixture
def clock() -> Clock:
    return SYSTEM_CLOCK


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Iterator[SqliteStore]:
    s = SqliteStore(str(tmp_path / "journal.db"), clock=clock)
    yield s
    s.close()


@pytest.fixture
def client(store: SqliteStore) -> Iterator[TestClient]:
    with TestClient(create_app(store, journal_label="journal.db"), base_url=BASE) as c:
        yield c
