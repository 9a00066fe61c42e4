"""Claims in bulk on the SQLite journal (issue 14): a worker claims, in one write transaction, at most the due
runs it can execute now (:meth:`telo.journal.store.Store.claim_due`), and renews the claims of the runs it
executes in one statement (:meth:`telo.journal.store.Store.renew_many`).

The due runs are chosen and granted inside the writer's ``BEGIN IMMEDIATE``, which no other process's writer
can interleave with: two workers asking at once get disjoint runs, each only what it asked for, and the rest
stays due for the others. The rule is ``due_runs``' (reference §7 dueRuns: free or lapsed claims, and claims of
holders that died on this host), in its order, each grant bumping the run's fencing token; a run granted is
started in the same statement (``running``, its park lifted), and its record comes back with it, so a worker
reads and writes nothing more before it executes the run. Queued runs (issue 16) are granted in the same
transaction, after the unqueued ones, as their queues' limits allow (:mod:`telo.journal.sqlite_queues`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from functools import cache

from telo.journal.claims import Fence, this_host
from telo.journal.model import RunRecord
from telo.journal.queues import QueueLimits
from telo.journal.sqlite_group import Op
from telo.journal.sqlite_queues import granted_runs
from telo.journal.sqlite_reads import due_order
from telo.journal.sqlite_rows import RECORD_SELECT, record_from_row
from telo.journal.sqlite_schema import CLEAR_PARK, Sql

# The caller's filters, each a JSON array (json_each); :workflows and :only NULL for "any".
_FILTERS = (" AND (:workflows IS NULL OR r.workflow IS NULL OR r.workflow IN (SELECT value FROM json_each(:workflows)))"
            " AND (:only IS NULL OR r.run IN (SELECT value FROM json_each(:only)))"
            " AND r.run NOT IN (SELECT value FROM json_each(:skip))")


@cache
def _statements(runs: str, due_where: str) -> tuple[str, str, str]:
    # unqueued runs only: a queued one is granted by telo.journal.sqlite_queues, under its queue's limits
    free = (f"SELECT r.run, r.due_at FROM {runs} r WHERE {due_where}{_FILTERS} AND r.queue IS NULL "
            "AND (r.claim_holder IS NULL OR r.claim_until IS NULL OR r.claim_until <= :now) "
            "ORDER BY r.due_at IS NOT NULL, r.due_at, r.run LIMIT :limit")
    # live-by-time claims of holders on this host: due_order keeps those whose process is gone
    held = (f"SELECT r.run, r.due_at, r.claim_holder FROM {runs} r WHERE {due_where}{_FILTERS} AND r.queue IS NULL "
            "AND r.claim_holder IS NOT NULL AND r.claim_until > :now AND instr(r.claim_holder, :host) > 0")
    # granted and started: a scheduled run runs, a due park is lifted (what the execution would write first);
    # a queued run's first grant is its start, which a rateLimit counts (telo.journal.queues)
    grant = (f"UPDATE {runs} SET claim_holder = :holder, claim_until = :until, "
             f"claim_fence = ifnull(claim_fence, 0) + 1, status = 'running', {CLEAR_PARK}, due_at = NULL, "
             "started_at = CASE WHEN queue IS NULL THEN started_at ELSE ifnull(started_at, :now) END, "
             "updated_at = :now WHERE run IN (SELECT value FROM json_each(:runs)) "
             "AND (claim_holder IS NULL OR claim_until IS NULL OR claim_until <= :now "
             f"OR claim_holder IN (SELECT value FROM json_each(:dead))) RETURNING {RECORD_SELECT}")
    return free, held, grant


def claim_due(sql: Sql, holder: str, ttl_ms: int, now_ms: int, limit: int, *, only: Sequence[str] | None,
              workflows: Sequence[str] | None, skip: Collection[str],
              queues: Mapping[str, QueueLimits] | None = None) -> Op[list[RunRecord]]:
    """Grant ``holder`` up to ``limit`` due runs until ``now_ms + ttl_ms`` and start them: the record of each, the
    unqueued in due order, then the queued ones ``queues`` allow (see the module docstring; the filters are
    ``Store.claim_due``'s)."""
    free, held, grant = _statements(sql.runs, sql.due_where)
    params = {"now": now_ms, "limit": limit, "host": f"@{this_host()}:", "skip": json.dumps(list(skip)),
              "workflows": None if workflows is None else json.dumps(list(workflows)),
              "only": None if only is None else json.dumps(list(only))}

    def op(conn: sqlite3.Connection) -> list[RunRecord]:
        candidates = (conn.execute(free, params).fetchall(), conn.execute(held, params).fetchall())
        chosen = due_order(candidates, limit)
        dead = [h for run, _, h in candidates[1] if run in chosen]  # (due_order kept only dead holders' runs)
        if queues and len(chosen) < limit:
            queued, queued_dead = granted_runs(conn, sql.runs, sql.due_where, _FILTERS, params, queues,
                                               limit - len(chosen))
            chosen, dead = chosen + queued, dead + queued_dead
        if not chosen:
            return []
        rows = conn.execute(grant, {"holder": holder, "until": now_ms + ttl_ms, "now": now_ms,
                                    "runs": json.dumps(chosen), "dead": json.dumps(dead)}).fetchall()
        records = {record.run: record for record in map(record_from_row, rows)}
        return [records[run] for run in chosen if run in records]

    return op


@cache
def _renewal(runs: str) -> str:
    return (f"UPDATE {runs} SET claim_until = c.until FROM (SELECT json_extract(value, '$[0]') AS run, "
            "json_extract(value, '$[1]') AS holder, json_extract(value, '$[2]') AS token, "
            "json_extract(value, '$[3]') AS until FROM json_each(?)) AS c "
            f"WHERE {runs}.run = c.run AND {runs}.claim_holder = c.holder AND {runs}.claim_fence = c.token "
            f"RETURNING {runs}.run")


def renew_many(sql: Sql, claims: Sequence[tuple[str, Fence, int]]) -> Op[list[bool]]:
    """Each claim extended to its ``until`` if it is still its fence's — one statement (``Store.renew_many``)."""
    rows = json.dumps([[run, fence.holder, fence.token, until] for run, fence, until in claims])
    statement = _renewal(sql.runs)

    def op(conn: sqlite3.Connection) -> list[bool]:
        renewed = {str(run) for (run,) in conn.execute(statement, (rows,)).fetchall()}
        return [run in renewed for run, _, _ in claims]

    return op
