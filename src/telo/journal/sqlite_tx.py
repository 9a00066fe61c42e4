"""The SQLite journal's connections besides the writer's: the read pool and joinable transactions (spec §8.2).

Reads take a pooled connection (in WAL a reader sees the last commit and never blocks the writer). A
transaction takes one too, holds ``BEGIN IMMEDIATE`` on it, and is made ambient through a ContextVar so the
store's appends and reads in that context (and in helper threads that copied it) run on it
(:func:`open_transaction`). Lifecycle writes stay outside it: SQLite has one write lock per file, which the
transaction holds, so such a write made in its own context could only wait for itself — it is refused at once
(:func:`lifecycle_refused`).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import count

from telo.errors import Code, JournalError
from telo.journal.process import check_process, closed_error, fork_generation
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


def ambient_of(store: Store) -> SqliteTransaction | None:
    """The innermost open transaction of ``store`` in this context, if any (every append asks: kept cheap)."""
    open_txs = AMBIENT.get()
    if not open_txs:  # the common case
        return None
    for tx in reversed(open_txs):
        if tx.store is store and tx.open:
            return tx
    return None


@contextmanager
def open_transaction(store: Store, pool: Pool) -> Iterator[SqliteTransaction]:
    """A transaction of ``store`` on a connection of ``pool``, ambient in this context while the block runs:
    committed when it ends normally, rolled back when it raises. Opened while another of ``store``'s is
    ambient, it is a SAVEPOINT of that one, on its connection."""
    outer = ambient_of(store)
    conn: sqlite3.Connection | None = None
    if outer is not None:
        name = f"tx{next(SAVEPOINTS)}"
        with outer.lock:
            outer.connection.execute(f"SAVEPOINT {name}")
        tx = SqliteTransaction(store, outer.connection, outer.lock, name)
    else:
        conn = pool.take()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            pool.give(conn)
            raise _tx_error("begin", exc) from exc
        except BaseException:
            pool.give(conn)
            raise
        tx = SqliteTransaction(store, conn, threading.RLock(), None)
    token = AMBIENT.set((*AMBIENT.get(), tx))
    try:
        yield tx
    except BaseException:
        tx.open = False
        with tx.lock:
            finish(tx, commit=False)
        raise
    else:
        tx.open = False
        with tx.lock:
            try:
                finish(tx, commit=True)
            except sqlite3.Error as exc:
                raise _tx_error("commit", exc) from exc
    finally:
        tx.open = False
        AMBIENT.reset(token)
        if conn is not None:
            pool.give(conn)


def lifecycle_refused(what: str) -> JournalError:
    """The error of a lifecycle write made where one of the store's transactions is ambient (module docstring)."""
    return JournalError(
        Code.JOURNAL_IN_TRANSACTION,
        f"{what} cannot run inside an open SQLite journal transaction: lifecycle writes commit on "
        "their own, and SQLite's one write lock is held by that transaction",
        hint="make the call before the transaction opens or after it ends",
    )


def _tx_error(what: str, exc: sqlite3.Error) -> JournalError:
    return JournalError(
        Code.JOURNAL_WRITE_FAILED,
        f"the SQLite journal could not {what} a transaction: {exc}",
        hint="check the disk (space, permissions) and whether another process holds the journal locked "
        "for longer than the busy timeout",
    )
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
