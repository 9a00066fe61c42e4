"""A queue's state read from the PostgreSQL journal (issue 16; :mod:`telo.journal.queue_reads` has the states).

The statements are SQLite's (:mod:`telo.journal.sqlite_queue_reads`) in PostgreSQL's words: each reads the
partial ``(queue, status)`` index for the live statuses of one queue, ids compare ``COLLATE "C"`` as the grant
orders them (:mod:`telo.journal.postgres_queues`), and the reads of one snapshot share one ``REPEATABLE READ,
READ ONLY`` transaction — one snapshot, no lock taken, no claimer waited for (a queue's grant holds its
advisory lock, which a read never asks for).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from telo.journal.model import RunRecord
from telo.journal.postgres_keyed import live_runs
from telo.journal.postgres_rows import db_errors, record_from_row
from telo.journal.postgres_sql import PgSql
from telo.journal.queue_reads import QueueCount, QueueSnapshot, settle_dead
from telo.journal.queues import queue_order_sql

_STATE = ("CASE WHEN status = 'scheduled' THEN CASE WHEN due_at <= %(now)s THEN 'waiting' ELSE 'later' END "
          "WHEN status = 'running' THEN CASE WHEN claim_holder IS NOT NULL AND claim_until > %(now)s "
          "THEN 'running' ELSE 'unclaimed' END WHEN due_at <= %(now)s THEN 'parkedDue' ELSE 'parked' END")
_HOLDER = ("CASE WHEN status = 'running' AND claim_holder IS NOT NULL AND claim_until > %(now)s "
           "THEN claim_holder END")
# Before a run in grant order (telo.journal.queues.queue_order_sql), as on SQLite.
_AHEAD_UNTIMED = ' AND due_at IS NULL AND (COALESCE(priority, 0), run COLLATE "C") < (%(priority)s, %(run)s)'
_AHEAD_TIMED = (' AND (due_at IS NULL OR (COALESCE(priority, 0), due_at, run COLLATE "C") '
                '< (%(priority)s, %(due)s, %(run)s))')
_LIVE = "status IN ('scheduled', 'running', 'parked')"  # the (queue, status) index's ranges

_CACHE: dict[str, dict[str, str]] = {}


def _statements(q: PgSql) -> dict[str, str]:
    found = _CACHE.get(q.select_run)
    if found is None:
        def fmt(text: str) -> str:
            return sql.SQL(text).format(**q.parts).as_string(None)

        counts = (f"SELECT {_STATE}, queue_key, {_HOLDER}, count(*) FROM {{runs}} "
                  "WHERE queue = %(q)s AND " + _LIVE)
        found = _CACHE[q.select_run] = {
            "counts": fmt(counts + " GROUP BY 1, 2, 3"),
            "ahead_untimed": fmt(counts + _AHEAD_UNTIMED + " GROUP BY 1, 2, 3"),
            "ahead_timed": fmt(counts + _AHEAD_TIMED + " GROUP BY 1, 2, 3"),
            "oldest": fmt("SELECT {cols} FROM {runs} WHERE queue = %(q)s AND " + _LIVE + " AND ("
                          "(status IN ('scheduled', 'parked') AND due_at <= %(now)s) OR (status = 'running' AND "
                          "(claim_holder IS NULL OR claim_until IS NULL OR claim_until <= %(now)s "
                          "OR claim_holder = ANY(%(dead)s::text[])))) "
                          + queue_order_sql("postgres") + " LIMIT %(n)s"),
            "starts": fmt("SELECT count(*) FROM {runs} WHERE queue = %(q)s AND started_at > %(since)s"),
            "frees": fmt("SELECT started_at FROM {runs} WHERE queue = %(q)s AND started_at > %(since)s "
                         "ORDER BY started_at LIMIT 1 OFFSET %(k)s"),
            "names": fmt("WITH RECURSIVE q(name) AS (SELECT min(queue) FROM {runs} WHERE queue IS NOT NULL "
                         "UNION ALL SELECT (SELECT min(queue) FROM {runs} WHERE queue > q.name) FROM q "
                         "WHERE q.name IS NOT NULL) SELECT name FROM q WHERE name IS NOT NULL"),
        }
    return found


def _counts(rows: list[Any]) -> list[QueueCount]:
    return [QueueCount(str(state), key, int(n), holder) for state, key, holder, n in rows]


@contextmanager
def _snapshot(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """One REPEATABLE READ, READ ONLY transaction; inside an ambient transaction, that one's snapshot."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        yield
        return
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def snapshot(conn: psycopg.Connection[Any], q: PgSql, queue: str, now_ms: int, ahead_of: RunRecord | None,
             oldest: int, rate: tuple[int, int] | None) -> QueueSnapshot:
    """``Store.queue_snapshot`` on ``conn``: the counts, those ahead of ``ahead_of``, the ``oldest`` waiting runs,
    the rate window's starts."""
    st = _statements(q)
    with _snapshot(conn):
        counts, dead = settle_dead(_counts(conn.execute(st["counts"], {"q": queue, "now": now_ms}).fetchall()))
        ahead: tuple[QueueCount, ...] = ()
        if ahead_of is not None:
            which = "ahead_untimed" if ahead_of.due_at is None else "ahead_timed"
            params = {"q": queue, "now": now_ms, "due": ahead_of.due_at, "priority": ahead_of.priority or 0,
                      "run": ahead_of.run}
            ahead = settle_dead(_counts(conn.execute(st[which], params).fetchall()))[0]
        records: tuple[RunRecord, ...] = ()
        if oldest > 0:
            with conn.cursor(row_factory=dict_row) as cur:
                rows = cur.execute(st["oldest"], {"q": queue, "now": now_ms, "dead": list(dead),
                                                  "n": oldest}).fetchall()
            records = tuple(map(record_from_row, rows))
        started = frees_at = None
        if rate is not None:
            limit, period = rate
            since = now_ms - period
            found = conn.execute(st["starts"], {"q": queue, "since": since}).fetchone()
            started = int(found[0]) if found is not None else 0
            if started >= limit:
                first = conn.execute(st["frees"], {"q": queue, "since": since, "k": started - limit}).fetchone()
                frees_at = None if first is None else int(first[0]) + period
    return QueueSnapshot(counts, ahead, records, dead, started, frees_at)


class PgQueueReads:
    """The queue reads of :class:`telo.journal.postgres.PostgresStore` (which provides ``_q`` and ``_conn``)."""

    _q: PgSql

    def _conn(self, *, join: bool) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def queue_snapshot(self, queue: str, now_ms: int, *, ahead_of: RunRecord | None = None, oldest: int = 0,
                       rate: tuple[int, int] | None = None) -> QueueSnapshot:
        with db_errors("read a queue"), self._conn(join=True) as conn:
            return snapshot(conn, self._q, queue, now_ms, ahead_of, oldest, rate)

    def queue_names(self) -> list[str]:
        with db_errors("read the queues"), self._conn(join=True) as conn:
            return sorted(str(name) for (name,) in conn.execute(_statements(self._q)["names"]).fetchall())

    def live_runs_of_key(self, queue: str, dedup_key: str) -> list[RunRecord]:
        """The live runs of ``queue`` holding ``dedup_key`` (:class:`telo.journal.keyed.KeyReads`)."""
        with db_errors("read a queue's key"), self._conn(join=True) as conn:
            return live_runs(conn, self._q, queue, dedup_key)
