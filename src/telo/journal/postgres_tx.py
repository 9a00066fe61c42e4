"""The PostgreSQL journal's joinable transactions (spec §8.2; reference §7 "Transactions").

A transaction holds a pooled connection in ``BEGIN`` and is made ambient through a ContextVar, so the store's
appends and reads in that context join it and a rollback discards their entries with the body's effects.
Lifecycle calls never join it: they describe the run rather than its work and must not vanish with a
rolled-back body (:mod:`telo.journal.postgres`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from telo.errors import Code, JournalError
from telo.journal.postgres_rows import db_errors
from telo.journal.postgres_session import limit_joinable
from telo.journal.store import Store, StoreTransaction


class PgTransaction(StoreTransaction):
    """An open ``BEGIN`` (or, nested, a SAVEPOINT) on a connection of the store's pool."""

    def __init__(self, store: Store, connection: psycopg.Connection[Any]) -> None:
        self.store = store
        self.connection = connection
        self.is_open = True


# Open transactions in this context, innermost last; one variable for every store (see ambient_of).
AMBIENT: ContextVar[tuple[PgTransaction, ...]] = ContextVar("telo_pg_ambient", default=())


def ambient_of(store: Store) -> PgTransaction | None:
    """The innermost open transaction of ``store`` in this context, if any."""
    for tx in reversed(AMBIENT.get()):
        if tx.store is store and tx.is_open:
            return tx
    return None


@contextmanager
def open_transaction(store: Store, pool: ConnectionPool[psycopg.Connection[Any]]) -> Iterator[StoreTransaction]:
    """A transaction of ``store``, ambient while the block runs: committed when it ends normally, rolled back
    when it raises. Opened while another of ``store``'s is ambient, it is a SAVEPOINT on that connection."""
    outer = ambient_of(store)
    if outer is not None:
        with _open(store, outer.connection, outermost=False) as tx:
            yield tx
        return
    with db_errors("open a transaction"):
        conn = pool.getconn()
    try:
        with _open(store, conn, outermost=True) as tx:
            yield tx
    finally:
        pool.putconn(conn)


def joined(store: Store, tx: StoreTransaction) -> bool:
    """"Exactly when" (spec §8.2): ``tx`` is open, and the very transaction ``store``'s appends in this context
    join."""
    ambient = ambient_of(store)
    return isinstance(tx, PgTransaction) and tx.is_open and ambient is not None \
        and ambient.connection is tx.connection


@contextmanager
def _open(store: Store, conn: psycopg.Connection[Any], *, outermost: bool) -> Iterator[StoreTransaction]:
    tx = PgTransaction(store, conn)
    body_done = False
    try:
        with conn.transaction():  # BEGIN (or SAVEPOINT); COMMIT on normal exit, ROLLBACK on any raise
            if outermost:  # idle past the holder's lease, the server ends it (telo.journal.postgres_session)
                limit_joinable(conn, store.claim_ttl_ms)
            token = AMBIENT.set((*AMBIENT.get(), tx))
            try:
                yield tx
            finally:
                tx.is_open = False
                AMBIENT.reset(token)
            body_done = True
    except psycopg.Error as exc:
        if not body_done:
            raise  # the body's own error (for example its SQL) reaches the caller unchanged
        raise JournalError(
            Code.JOURNAL_FAILED,
            f"the PostgreSQL journal transaction failed to commit: {exc}",
            data={"sqlstate": exc.sqlstate} if exc.sqlstate else None,
        ) from exc
