"""Opening the SQLite journal's file: the options it accepts and the connections it makes (reference §7
"Postgres journal", mirrored by :mod:`telo.journal.sqlite`).

Every connection runs in autocommit mode (the store issues BEGIN/COMMIT), in write-ahead-log mode, with the
configured ``synchronous`` and busy timeout. Write-ahead logging is a property of the file, set by the first
connection that finds it missing. Switching a file to it takes an exclusive lock, and SQLite answers a
``PRAGMA journal_mode = WAL`` that meets another connection's lock with ``SQLITE_BUSY`` at once, without
calling the busy handler. So when several processes open one new journal at the same moment (a fleet's
workers starting together), all but one would fail with "database is locked" (eight processes opening one
fresh file together: 8 of 40 trials failed). :func:`_use_wal` therefore retries the switch itself, within the
same busy timeout as every other lock wait, and stops as soon as it reads that another opener made the switch.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Final

from telo.clock import SYSTEM_CLOCK
from telo.errors import Code, JournalError

SYNCHRONOUS_MODES: Final = ("NORMAL", "FULL", "EXTRA")
# RETURNING (3.35) lets an append bump the run's counter and learn the new seq in one statement.
MIN_SQLITE: Final = (3, 35, 0)
_WAL_RETRY_PAUSE_S: Final = 0.005  # how long a racing opener's switch holds its lock: a few milliseconds


def connect(path: str, *, synchronous: str, busy_timeout_ms: int) -> sqlite3.Connection:
    """A connection in autocommit mode (we issue BEGIN/COMMIT), WAL, the given ``synchronous`` and busy timeout.

    ``check_same_thread=False``: the writer and transaction connections are handed between threads, always
    under the owner's lock or by the single writer thread.
    """
    conn = sqlite3.connect(
        path,
        timeout=busy_timeout_ms / 1000,
        isolation_level=None,
        check_same_thread=False,
        cached_statements=128,
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        mode = _use_wal(conn, busy_timeout_ms)
        if mode != "wal":
            raise JournalError(
                Code.JOURNAL_CONFIG_INVALID,
                f"the SQLite journal {path!r} cannot use write-ahead logging (journal_mode is {mode!r})",
                hint="put the journal on a local filesystem that supports shared memory (not a network share)",
                data={"path": path},
            )
        conn.execute(f"PRAGMA synchronous = {synchronous}")
    except BaseException:
        conn.close()
        raise
    return conn


def _use_wal(conn: sqlite3.Connection, busy_timeout_ms: int) -> str:
    """Put the file in WAL mode unless it already is; the journal mode it ends in, lower-cased.

    Reading the mode first keeps the common case lock-free (the mode persists in the file). A switch that
    meets another opener's lock is retried until the busy timeout runs out — the module docstring says why
    the busy handler does not cover it — and then fails with SQLite's own "database is locked".
    """
    deadline = SYSTEM_CLOCK.monotonic() + busy_timeout_ms / 1000
    while True:
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if mode == "wal":
            return mode
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):  # (extended codes too)
                raise
            if SYSTEM_CLOCK.monotonic() >= deadline:
                raise
        time.sleep(_WAL_RETRY_PAUSE_S)


def check_options(path: str, synchronous: str) -> str:
    """The ``synchronous`` mode upper-cased, after checking the SQLite library, the mode and the path; makes the
    file's directory."""
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise JournalError(
            Code.JOURNAL_CONFIG_INVALID,
            f"the SQLite library is {sqlite3.sqlite_version}; the SQLite journal needs "
            f"{'.'.join(map(str, MIN_SQLITE))} or newer",
            hint="use a Python build that bundles a newer SQLite",
        )
    mode = synchronous.upper()
    if mode not in SYNCHRONOUS_MODES:
        raise JournalError(
            Code.JOURNAL_CONFIG_INVALID,
            f"synchronous={synchronous!r} is not one of {', '.join(SYNCHRONOUS_MODES)}",
            hint="FULL (the default) makes every acknowledged append survive a power loss",
            data={"synchronous": synchronous},
        )
    if path == ":memory:" or path.startswith("file::memory:") or path == "":
        raise JournalError(
            Code.JOURNAL_CONFIG_INVALID,
            "the SQLite journal needs a file: an in-memory SQLite database is private to one connection",
            hint="use the memory: journal for tests, or give the SQLite journal a file path",
        )
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    return mode
