"""The SQLite journal's connections besides the writer's: the read pool and joinable transactions (spec §8.2).

Reads take a pooled connection (in WAL a reader sees the last commit and never blocks the writer). A
transaction takes one too, holds ``BEGIN IMMEDIATE`` on it, and is made ambient through a ContextVar so the
store's appends and reads in that context (and in helper threads that copied it) run on it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextvars import ContextVar
from itertools import count

from telo.journal.sqlite_writer import check_process, closed_error, fork_generation
from telo.journal.store import Store, StoreTransaction


class SqliteTransaction(StoreTransaction):
    """An open ``BEGIN IMMEDIATE`` (or, nested, a SAVEPOINT) on a dedicated connection (spec §8.2).

    ``store`` is the SQLite store that opened it (typed as any store: the store compares it by identity only,
    and this module must not import the store's).
    """

    def __init__(
        self, store: Store, connection: sqlite3.Connection, lock: threading.RLock, savepoint: str | None
    ) -> None:
        self.store = store
        self.connection = connection
        self.lock = lock  # the connection may be used from helper threads that copied the context
        self.savepoint = savepoint
        self.open = True


# The transactions open in this context, innermost last (a tuple: contexts copy it, never share it).
AMBIENT: ContextVar[tuple[SqliteTransaction, ...]] = ContextVar("telo_sqlite_transactions", default=())
SAVEPOINTS = count(1)
# Idle connections kept for reuse; a burst of concurrent readers beyond this opens and closes extra ones.
MAX_IDLE = 16


class Pool:
    """Idle read/transaction connections, reused LIFO; connections returned after close are closed."""

    def __init__(self, make: Callable[[], sqlite3.Connection]) -> None:
        self._make = make
        self._generation = fork_generation()
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise closed_error()
            check_process(self._generation)
            if self._idle:
                return self._idle.pop()
        return self._make()

    def give(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:  # a broken transaction must not leak into the next user's reads
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                conn.close()
                return
        with self._lock:
            if not self._closed and len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def finish(tx: SqliteTransaction, *, commit: bool) -> None:
    conn = tx.connection
    if not conn.in_transaction:
        return  # the caller's own SQL already ended it; there is nothing left to commit or undo
    if tx.savepoint is not None:
        if not commit:
            conn.execute(f"ROLLBACK TO {tx.savepoint}")
        conn.execute(f"RELEASE {tx.savepoint}")
        return
    if not commit:
        conn.execute("ROLLBACK")
        return
    try:
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
