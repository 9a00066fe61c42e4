"""The queue overrides of the PostgreSQL journal: the telo-only table ``<prefix>_queues`` that ``telo queues set``
writes and workers read (issue 16; :mod:`telo.journal.queue_overrides` has what a row means).

The table is created with telo's other extension DDL (:func:`telo.journal.postgres_schema.ensure_schema`);
upstream runtimes sharing the journal never read it. A write is one upsert (or delete) on a pooled autocommit
connection — an operator's write, not a run's, so it does not ride the group commit — and two operators changing
different limits of one queue at once both land. A read is one statement over the whole (small) table, made by a
worker at most once a second (:mod:`telo.kinds.queue_overrides`). A journal whose tables were created by hand
(``create_table=False``) without this one reads as having no overrides, and refuses to write one with
``ERR_JOURNAL_SCHEMA_MISSING``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import sql

from telo.errors import Code, JournalError
from telo.journal.postgres_rows import db_errors
from telo.journal.queue_overrides import COLUMNS, LIMIT_FIELDS, QueueOverride, from_row, row_of

if TYPE_CHECKING:
    from telo.journal.postgres_schema import Names

T = TypeVar("T")
_UNDEFINED_TABLE = "42P01"
_CACHE: dict[str, dict[str, str]] = {}


def _statements(names: Names) -> dict[str, str]:
    found = _CACHE.get(names.queues)
    if found is None:
        table = sql.Identifier(names.queues).as_string(None)
        # A limit the new row leaves NULL keeps the stored one (a set changes only what it names); the rate's
        # period goes with its limit.
        keep = ", ".join(f"{n} = COALESCE(EXCLUDED.{n}, t.{n})" for n in LIMIT_FIELDS if n != "rate_period_ms")
        values = ", ".join(["%s"] * (len(LIMIT_FIELDS) + 3))
        found = _CACHE[names.queues] = {
            "all": f"SELECT {COLUMNS} FROM {table} ORDER BY queue",
            "upsert": f"INSERT INTO {table} AS t ({COLUMNS}) VALUES ({values}) ON CONFLICT (queue) DO UPDATE SET "
                      f"{keep}, rate_period_ms = CASE WHEN EXCLUDED.rate_limit IS NULL THEN t.rate_period_ms "
                      "ELSE EXCLUDED.rate_period_ms END, set_by = EXCLUDED.set_by, set_at = EXCLUDED.set_at "
                      f"RETURNING {COLUMNS}",
            "delete": f"DELETE FROM {table} WHERE queue = %s RETURNING {COLUMNS}",
        }
    return found


class PgQueueOverrides:
    """The override calls of :class:`telo.journal.postgres.PostgresStore` (which provides ``_names`` and
    ``_conn``)."""

    _names: Names

    def _conn(self, *, join: bool) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def queue_overrides(self) -> dict[str, QueueOverride]:
        try:
            rows = self._on_override_table("read the queue overrides",
                                           lambda c: c.execute(self._override_sql("all")).fetchall())
        except JournalError as exc:
            if (exc.data or {}).get("sqlstate") == _UNDEFINED_TABLE:
                return {}  # tables made by hand without it: no override was ever set
            raise
        return {o.queue: o for o in map(from_row, rows)}

    def set_queue_override(self, override: QueueOverride) -> QueueOverride:
        row = self._override_write("set a queue override",
                                   lambda c: c.execute(self._override_sql("upsert"), row_of(override)).fetchone())
        assert row is not None  # (an upsert returns its row)
        return from_row(row)

    def clear_queue_override(self, queue: str) -> QueueOverride | None:
        row = self._override_write("reset a queue override",
                                   lambda c: c.execute(self._override_sql("delete"), (queue,)).fetchone())
        return None if row is None else from_row(row)

    def _override_sql(self, name: str) -> str:
        return _statements(self._names)[name]

    def _on_override_table(self, action: str, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        with db_errors(action), self._conn(join=False) as conn:
            return fn(conn)

    def _override_write(self, action: str, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        try:
            return self._on_override_table(action, fn)
        except JournalError as exc:
            if (exc.data or {}).get("sqlstate") != _UNDEFINED_TABLE:
                raise
            raise JournalError(Code.JOURNAL_SCHEMA_MISSING,
                               f"the PostgreSQL journal has no table {self._names.queues!r} of queue overrides",
                               hint="open the journal once with create_table=True (it creates the table), or "
                                    "create it yourself", data={"missing": {self._names.queues: ["*"]}}) from exc
