"""The queue overrides of the SQLite journal: the table ``<prefix>_queues`` (schema v7,
:mod:`telo.journal.sqlite_migrate`) that ``telo queues set`` writes and workers read (issue 16;
:mod:`telo.journal.queue_overrides` has what a row means).

A write is one upsert (or delete) through the store's writer, so two operators changing different limits of
one queue at once both land; a read is one statement on a pooled WAL connection, which never waits for the
writer — a worker reads the whole (small) table at most once a second (:mod:`telo.kinds.queue_overrides`).
"""

from __future__ import annotations

import sqlite3
from functools import cache
from typing import TYPE_CHECKING, TypeVar

from telo.journal.queue_overrides import COLUMNS, LIMIT_FIELDS, QueueOverride, from_row, row_of
from telo.journal.sqlite_group import Op

if TYPE_CHECKING:  # (sqlite_schema imports this module for the table's DDL)
    from telo.journal.sqlite_schema import Sql

T = TypeVar("T")

@cache
def _statements(table: str) -> dict[str, str]:
    # A limit the new row leaves NULL keeps the stored one (a set changes only what it names); the rate's
    # period goes with its limit.
    keep = ", ".join(f"{n} = ifnull(excluded.{n}, {n})" for n in LIMIT_FIELDS if n != "rate_period_ms")
    values = ", ".join("?" * (len(LIMIT_FIELDS) + 3))
    return {
        "all": f"SELECT {COLUMNS} FROM {table} ORDER BY queue",
        "upsert": f"INSERT INTO {table} ({COLUMNS}) VALUES ({values}) ON CONFLICT (queue) DO UPDATE SET {keep}, "
                  "rate_period_ms = CASE WHEN excluded.rate_limit IS NULL THEN rate_period_ms "
                  "ELSE excluded.rate_period_ms END, set_by = excluded.set_by, set_at = excluded.set_at "
                  f"RETURNING {COLUMNS}",
        "delete": f"DELETE FROM {table} WHERE queue = ? RETURNING {COLUMNS}",
    }


class SqliteQueueOverrides:
    """The override calls of :class:`telo.journal.sqlite.SqliteStore` (which provides ``_sql``, ``_read`` and
    ``_lifecycle``)."""

    _sql: Sql

    def _read(self, fn: Op[T]) -> T:
        raise NotImplementedError

    def _lifecycle(self, what: str, fn: Op[T], *, isolated: bool = False) -> T:
        raise NotImplementedError

    def queue_overrides(self) -> dict[str, QueueOverride]:
        statement = _statements(self._sql.queues)["all"]

        def op(conn: sqlite3.Connection) -> dict[str, QueueOverride]:
            return {o.queue: o for o in map(from_row, conn.execute(statement))}

        return self._read(op)

    def set_queue_override(self, override: QueueOverride) -> QueueOverride:
        statement = _statements(self._sql.queues)["upsert"]

        def op(conn: sqlite3.Connection) -> QueueOverride:
            return from_row(conn.execute(statement, row_of(override)).fetchone())

        return self._lifecycle("telo queues set", op)

    def clear_queue_override(self, queue: str) -> QueueOverride | None:
        statement = _statements(self._sql.queues)["delete"]

        def op(conn: sqlite3.Connection) -> QueueOverride | None:
            row = conn.execute(statement, (queue,)).fetchone()
            return None if row is None else from_row(row)

        return self._lifecycle("telo queues set --reset", op)
