"""A write SQLite itself refuses — a statement on a read-only journal file, a full disk reported by a statement
rather than by the COMMIT — reaches its caller as ``ERR_JOURNAL_WRITE_FAILED`` naming the journal, with a hint;
before, the driver's own ``sqlite3.OperationalError`` went up raw, and every CLI command writing to a read-only
journal printed a Python traceback (a user's walk-through, 2026-12-04; tests/cli/test_readonly_journal.py drives
that through the real command)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from telo.errors import JournalError
from telo.journal.model import Admission, Entry
from telo.journal.sqlite import SqliteStore


def _query_only(store: SqliteStore, on: bool) -> None:
    writer = store._writer
    with writer._conn_lock:  # (not a queued operation: its BEGIN IMMEDIATE would be refused too)
        writer._executor._conn.execute(f"PRAGMA query_only = {'ON' if on else 'OFF'}")  # type: ignore[attr-defined]


def test_a_statement_sqlite_refuses_is_the_catalogues_error_naming_the_journal(tmp_path: Path) -> None:
    path = str(tmp_path / "journal.db")
    with SqliteStore(path) as store:
        assert store.admit(Admission.of("r1")).admitted

        def refused(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO no_such_table VALUES (1)")

        with pytest.raises(JournalError) as exc:
            store._writer.call(refused)
        assert exc.value.code == "ERR_JOURNAL_WRITE_FAILED"
        assert path in exc.value.message and "no such table" in exc.value.message, exc.value.message
        assert isinstance(exc.value.__cause__, sqlite3.OperationalError)
        assert store.append("r1", Entry.decided("a", "value", 1)).path == "a"  # the journal goes on


def test_a_batch_on_a_journal_sqlite_will_not_write_says_it_is_read_only(tmp_path: Path) -> None:
    path = str(tmp_path / "journal.db")
    with SqliteStore(path) as store:
        assert store.admit(Admission.of("r1")).admitted
        # What a read-only file does to writes (SQLITE_READONLY), without the rights root keeps over any file:
        # the writer connection refuses every write while query_only is set.
        _query_only(store, True)
        with pytest.raises(JournalError) as exc:
            store.append("r1", Entry.decided("a", "value", 1))
        assert exc.value.code == "ERR_JOURNAL_WRITE_FAILED" and path in exc.value.message
        assert exc.value.hint is not None and "read-only" in exc.value.hint, exc.value.hint
        _query_only(store, False)
        assert store.append("r1", Entry.decided("a", "value", 1)).path == "a"  # nothing was half written
