"""What the SQLite journal's operations and group runners (and its other partial undos) share
(:mod:`telo.journal.sqlite_append`, :mod:`telo.journal.sqlite_lifecycle`): an operation is a function of a
connection (:data:`Op`); the executor runs a batch's operations of one kind together through a runner, which
writes them with few multi-row statements — or raises having written nothing of them, and the executor runs
them one at a time (:mod:`telo.journal.batch_plan`, :class:`telo.journal.sqlite_writer.SqliteBatches`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from telo.journal.batch_plan import OneAtATime, chunks, distinct_runs, parts

__all__ = ["OneAtATime", "Op", "all_or_nothing", "chunks", "distinct_runs", "parts", "savepoint"]

T = TypeVar("T")
# An operation of the SQLite journal: what it does on the connection it is given (a read's, or the writer's).
Op = Callable[[sqlite3.Connection], T]


def all_or_nothing(conn: sqlite3.Connection, statements: Sequence[tuple[str, Sequence[Any]]],
                   read: Callable[[sqlite3.Cursor], T]) -> list[T]:
    """Run ``statements`` as one unit — each read by ``read`` as it runs — or leave nothing of them written
    and raise (a group runner's contract). One statement is that on its own; several share a SAVEPOINT."""
    if len(statements) == 1:
        text, params = statements[0]
        return [read(conn.execute(text, params))]
    with savepoint(conn, "grp"):
        return [read(conn.execute(text, params)) for text, params in statements]


@contextmanager
def savepoint(conn: sqlite3.Connection, name: str) -> Iterator[None]:
    """The block's writes, undone should it raise (unless SQLite already rolled the whole transaction back)."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")
