"""What the SQLite journal's operations and group runners (and its other partial undos) share
(:mod:`telo.journal.sqlite_append`, :mod:`telo.journal.sqlite_lifecycle`): an operation is a function of a
connection (:data:`Op`); the writer runs a batch's operations of one kind together through a runner, which
writes them with few multi-row statements — or raises having written nothing of them, and the writer runs them
one at a time (:class:`telo.journal.sqlite_writer.GroupCommitWriter`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
# An operation of the SQLite journal: what it does on the connection it is given (a read's, or the writer's).
Op = Callable[[sqlite3.Connection], T]


class OneAtATime(Exception):
    """Raised by a group runner, with nothing of the group left written, to have the writer run its
    operations one by one (which isolates whatever it could not handle together)."""


def parts(ops: list[T]) -> list[list[T]]:
    """``ops`` split as :func:`chunks` splits their count."""
    out, done = [], 0
    for size in chunks(len(ops)):
        out.append(ops[done:done + size])
        done += size
    return out


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


def chunks(rows: int) -> list[int]:
    """``rows`` in statements of at most 256 rows (well inside SQLite's limit on bound parameters): up to 32
    rows one statement of exactly that many, else powers of two, largest first, so that few distinct
    statement texts are prepared and cached."""
    if rows <= 32:
        return [rows] if rows else []
    sizes = []
    size = 256
    while rows:
        while rows >= size:
            sizes.append(size)
            rows -= size
        size //= 2
    return sizes
