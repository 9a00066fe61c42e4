"""A queue's state read from the SQLite journal (issue 16; :mod:`telo.journal.queue_reads` has the states).

Every statement reads the partial ``(queue, status)`` index (sqlite_schema: ``… WHERE queue IS NOT NULL``) for
the live statuses of one queue, never a queue's settled history (a rate window's starts: the
``(queue, started_at)`` index); the reads of a snapshot share one read
transaction, so its counts, the runs ahead of a place and the oldest runs agree (WAL: one snapshot, no wait
for the writer). The queue names are read by a loose index scan (one index probe per queue), not a scan of
every run a queue ever had.
"""

from __future__ import annotations

import json
import sqlite3
from functools import cache
from typing import Any, TypeVar

from telo.journal.model import RunRecord
from telo.journal.queue_reads import QueueCount, QueueSnapshot, settle_dead
from telo.journal.queues import queue_order_sql
from telo.journal.sqlite_group import Op
from telo.journal.sqlite_keyed import live_runs
from telo.journal.sqlite_rows import RECORD_SELECT, record_from_row
from telo.journal.sqlite_schema import Sql

T = TypeVar("T")

_STATE = ("CASE WHEN status = 'scheduled' THEN CASE WHEN due_at <= :now THEN 'waiting' ELSE 'later' END "
          "WHEN status = 'running' THEN CASE WHEN claim_holder IS NOT NULL AND claim_until > :now THEN 'running' "
          "ELSE 'unclaimed' END WHEN due_at <= :now THEN 'parkedDue' ELSE 'parked' END")
_HOLDER = "CASE WHEN status = 'running' AND claim_holder IS NOT NULL AND claim_until > :now THEN claim_holder END"
# Before a run in grant order (telo.journal.queues.queue_order_sql: due_at IS NOT NULL, priority, due_at, run):
# with no due time, only runs without one and before it by (priority, run); with one, every run without one,
# and those before it by (priority, due_at, run).
_AHEAD_UNTIMED = " AND due_at IS NULL AND (ifnull(priority, 0), run) < (:priority, :run)"
_AHEAD_TIMED = " AND (due_at IS NULL OR (ifnull(priority, 0), due_at, run) < (:priority, :due, :run))"
_LIVE = "status IN ('scheduled', 'running', 'parked')"  # the (queue, status) index's ranges


@cache
def _statements(runs: str) -> dict[str, str]:
    counts = (f"SELECT {_STATE}, queue_key, {_HOLDER}, count(*) FROM {runs} "
              "WHERE queue = :q AND " + _LIVE)
    return {
        "counts": counts + " GROUP BY 1, 2, 3",
        "ahead_untimed": counts + _AHEAD_UNTIMED + " GROUP BY 1, 2, 3",
        "ahead_timed": counts + _AHEAD_TIMED + " GROUP BY 1, 2, 3",
        "oldest": (f"SELECT {RECORD_SELECT} FROM {runs} WHERE queue = :q AND " + _LIVE + " AND ("
                   "(status IN ('scheduled', 'parked') AND due_at <= :now) OR (status = 'running' AND "
                   "(claim_holder IS NULL OR claim_until IS NULL OR claim_until <= :now "
                   "OR claim_holder IN (SELECT value FROM json_each(:dead))))) "
                   + queue_order_sql("sqlite") + " LIMIT :n"),
        "starts": f"SELECT count(*) FROM {runs} WHERE queue = :q AND started_at > :since",
        "frees": (f"SELECT started_at FROM {runs} WHERE queue = :q AND started_at > :since "
                  "ORDER BY started_at LIMIT 1 OFFSET :k"),
        "names": (f"WITH RECURSIVE q(name) AS (SELECT min(queue) FROM {runs} WHERE queue IS NOT NULL "
                  f"UNION ALL SELECT (SELECT min(queue) FROM {runs} WHERE queue > q.name) FROM q "
                  "WHERE q.name IS NOT NULL) SELECT name FROM q WHERE name IS NOT NULL"),
    }


def _counts(rows: list[Any]) -> list[QueueCount]:
    return [QueueCount(str(state), key, int(n), holder) for state, key, holder, n in rows]


def snapshot(sql: Sql, queue: str, now_ms: int, ahead_of: RunRecord | None, oldest: int,
             rate: tuple[int, int] | None) -> Op[QueueSnapshot]:
    """``Store.queue_snapshot``: the counts, those ahead of ``ahead_of``, the ``oldest`` waiting runs, the rate
    window's starts."""
    st = _statements(sql.runs)

    def op(conn: sqlite3.Connection) -> QueueSnapshot:
        own = not conn.in_transaction  # (inside an ambient transaction its snapshot is the one)
        if own:
            conn.execute("BEGIN")
        try:
            counts, dead = settle_dead(_counts(conn.execute(st["counts"], {"q": queue, "now": now_ms}).fetchall()))
            ahead: tuple[QueueCount, ...] = ()
            if ahead_of is not None:
                which = "ahead_untimed" if ahead_of.due_at is None else "ahead_timed"
                rows = conn.execute(st[which], {"q": queue, "now": now_ms, "due": ahead_of.due_at,
                                                "priority": ahead_of.priority or 0, "run": ahead_of.run}).fetchall()
                ahead = settle_dead(_counts(rows))[0]
            records = () if oldest <= 0 else tuple(
                record_from_row(row) for row in conn.execute(
                    st["oldest"], {"q": queue, "now": now_ms, "dead": json.dumps(list(dead)), "n": oldest}))
            started = frees_at = None
            if rate is not None:
                limit, period = rate
                since = now_ms - period
                started = int(conn.execute(st["starts"], {"q": queue, "since": since}).fetchone()[0])
                if started >= limit:
                    first = conn.execute(st["frees"], {"q": queue, "since": since, "k": started - limit}).fetchone()
                    frees_at = None if first is None else int(first[0]) + period
        finally:
            if own:
                conn.execute("COMMIT")
        return QueueSnapshot(counts, ahead, records, dead, started, frees_at)

    return op


def names(sql: Sql) -> Op[list[str]]:
    """``Store.queue_names``."""
    statement = _statements(sql.runs)["names"]

    def op(conn: sqlite3.Connection) -> list[str]:
        return sorted(str(name) for (name,) in conn.execute(statement))

    return op


class SqliteQueueReads:
    """The queue reads of :class:`telo.journal.sqlite.SqliteStore` (which provides ``_sql`` and ``_read``)."""

    _sql: Sql

    def _read(self, fn: Op[T]) -> T:
        raise NotImplementedError

    def queue_snapshot(self, queue: str, now_ms: int, *, ahead_of: RunRecord | None = None, oldest: int = 0,
                       rate: tuple[int, int] | None = None) -> QueueSnapshot:
        return self._read(snapshot(self._sql, queue, now_ms, ahead_of, oldest, rate))

    def queue_names(self) -> list[str]:
        return self._read(names(self._sql))

    def live_runs_of_key(self, queue: str, dedup_key: str) -> list[RunRecord]:
        """The live runs of ``queue`` holding ``dedup_key`` (:class:`telo.journal.keyed.KeyReads`)."""
        runs = self._sql.runs
        return self._read(lambda conn: live_runs(conn, runs, queue, dedup_key))
