"""Queued runs granted on the SQLite journal (issue 16; :mod:`telo.journal.queues` has the rule).

Runs inside the writer's ``BEGIN IMMEDIATE`` that :func:`telo.journal.sqlite_claims.claim_due` grants in, after
the unqueued due runs: no other process's writer can interleave, so what is counted holding a queue's slots is
what holds them when the grant commits. Per queue, the runs holding slots are counted (the partial
``queue`` index) and, under a ``rateLimit``, the runs started within its period before the caller's ``now_ms``
(the ``started`` index: every process on one SQLite file reads one host's clock); then due candidates are read
in :func:`telo.journal.queues.queue_order_sql`, only as many as the queue has room for and never of a key at its
limit — a queue full of blocked runs costs one small read, and keeps no other run waiting. The grant
(:mod:`telo.journal.sqlite_claims`) sets a queued run's ``started_at`` on its first grant.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from functools import cache
from typing import Any

from telo.journal.queues import Candidate, QueueLimits, Tally, fill, queue_order_sql, wanted_queues


@cache
def _statements(runs: str, due_where: str, filters: str) -> tuple[str, str, str]:
    holding = (f"SELECT status, queue_key, claim_holder, claim_until FROM {runs} WHERE queue = :q AND "
               "((status = 'running' AND claim_holder IS NOT NULL AND claim_until > :now) "
               "OR (status = 'parked' AND :hold))")
    started = f"SELECT count(*) FROM {runs} WHERE queue = :q AND started_at > :since"
    candidates = (f"SELECT r.run, r.queue_key, r.status, r.started_at IS NOT NULL FROM {runs} r "
                  f"WHERE r.queue = :q AND {due_where}{filters} "
                  "AND (r.claim_holder IS NULL OR r.claim_until IS NULL OR r.claim_until <= :now "
                  "OR r.claim_holder IN (SELECT value FROM json_each(:dead))) "
                  "AND r.run NOT IN (SELECT value FROM json_each(:seen)) "
                  "AND ((r.queue_key IS NULL AND NOT :null_full) "
                  "OR r.queue_key NOT IN (SELECT value FROM json_each(:full))) "
                  "AND (NOT :parked_only OR r.status = 'parked') "
                  "AND (NOT :started_only OR r.started_at IS NOT NULL)"
                  + queue_order_sql("sqlite", "r") + " LIMIT :n")
    return holding, started, candidates


def granted_runs(conn: sqlite3.Connection, runs: str, due_where: str, filters: str, params: Mapping[str, Any],
                 queues: Mapping[str, QueueLimits] | None, wanted: int) -> tuple[list[str], list[str]]:
    """The queued runs to grant (at most ``wanted``, queue by queue in name order) and the dead holders whose
    live-by-time claims they may take over; ``params``: the caller's filters (``telo.journal.sqlite_claims``)."""
    holding, started, candidates = _statements(runs, due_where, filters)
    chosen: list[str] = []
    dead: list[str] = []
    now = params["now"]
    for name, limits in wanted_queues(queues):
        if len(chosen) >= wanted:
            break
        tally = Tally()
        for status, key, holder, until in conn.execute(holding, {"q": name, "now": now,
                                                                  "hold": limits.hold_parked}):
            tally.add(status, key, holder, until, now, limits)
        if limits.rate_limit is not None and limits.rate_period_ms is not None:
            since = now - limits.rate_period_ms
            tally.started = conn.execute(started, {"q": name, "since": since}).fetchone()[0]

        def read(n: int, full: list[str | None], parked_only: bool, started_only: bool, seen: list[str],
                 name: str = name, tally: Tally = tally) -> list[Candidate]:
            return conn.execute(candidates, {**params, "q": name, "dead": json.dumps(tally.dead), "n": n,
                                             "seen": json.dumps(seen), "null_full": None in full,
                                             "full": json.dumps([k for k in full if k is not None]),
                                             "parked_only": parked_only, "started_only": started_only}).fetchall()

        chosen += fill(tally, limits, wanted - len(chosen), read)
        dead += tally.dead
    return chosen, dead
