"""Queued runs granted on the PostgreSQL journal (issue 16; :mod:`telo.journal.queues` has the rule;
docs/proposals/admission-control.md).

Two workers must not spend one queue's budget: both could count two free slots and grant two runs each. So each
queue is granted in a transaction of its own, on a pooled connection, that first takes
``pg_advisory_xact_lock`` of the queue (a hash of the table and the queue's name): the claimers of one queue
serialise for the few statements of a grant — counted after the lock, under READ COMMITTED each statement sees
what the previous holder of the lock committed — while claimers of other queues, and every unqueued claim, do
not wait. Candidates are picked ``FOR UPDATE SKIP LOCKED`` as the unqueued path picks its runs, so a row another
write holds is passed over, never waited for. The unqueued path (``postgres_ops.claim_due``: one statement in
the group commit, issue 14) is untouched; a claim with queues costs, per queue, one transaction of five
statements: the lock, the count, the dead local holders, the candidates, the grant — six under a ``rateLimit``.

A rate limit is measured on the **database's** clock, so that workers' clocks do not matter (proposal "Admission
and dequeue are claims under the limits"): after the lock, one statement reads ``clock_timestamp()`` and counts
the queue's runs started within the period before it (the ``started`` index), and the grant records that time
as the ``started_at`` of each run it starts. Without a rate limit the grant reads the database's clock itself.
A run granted again (``started_at`` set) keeps its first start.

A transaction per queue, and one lock per transaction, is also what keeps two claimers from deadlocking on
each other's queue locks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from telo.journal.claims import holder_is_dead, this_host
from telo.journal.model import AdmitResult, RunRecord
from telo.journal.postgres_ops import PgAdmit, admit_group
from telo.journal.postgres_rows import RUN_COLS, record_from_row
from telo.journal.postgres_sql import DUE_WHERE, FILTERS, PgSql
from telo.journal.queues import (
    AskKey,
    Candidate,
    QueueLimits,
    Tally,
    ask_key,
    fill,
    merged_limits,
    queue_order_sql,
    wanted_queues,
)

Connect = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]


@dataclass(frozen=True, slots=True)
class _Statements:
    table: str  # the runs table, quoted: the advisory lock's key is the table's and the queue's name
    lock: str
    holding: str
    started: str
    candidates: str
    grant: str


_CACHE: dict[str, _Statements] = {}
# The database's clock in epoch ms: clock_timestamp(), the time the statement reads it (now() would be the
# transaction's start, before the lock was waited for).
_DB_NOW = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"


def _statements(q: PgSql) -> _Statements:
    key = q.select_run
    found = _CACHE.get(key)
    if found is None:
        def fmt(text: str) -> str:
            return sql.SQL(text).format(**q.parts).as_string(None)

        found = _CACHE[key] = _Statements(
            table=fmt("{runs}"),
            lock="SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            holding=fmt("SELECT status, queue_key, claim_holder, claim_until FROM {runs} WHERE queue = %(q)s AND "
                        "((status = 'running' AND claim_holder IS NOT NULL AND claim_until > %(now)s) "
                        "OR (status = 'parked' AND %(hold)s))"),
            # the database's now, and the queue's starts within the rate window before it
            started=fmt(f"WITH c AS (SELECT {_DB_NOW} AS now) SELECT c.now, (SELECT count(*) FROM {{runs}} "
                        "WHERE queue = %(q)s AND started_at > c.now - %(period)s) FROM c"),
            candidates=fmt(
                "SELECT r.run, r.queue_key, r.status, r.started_at IS NOT NULL FROM {runs} r WHERE r.queue = %(q)s "
                "AND " + DUE_WHERE + FILTERS
                + " AND NOT (r.run = ANY(%(seen)b::text[])) AND ((r.queue_key IS NULL AND NOT %(null_full)s) "
                "OR NOT (r.queue_key = ANY(%(full)b::text[]))) AND (NOT %(parked_only)s OR r.status = 'parked') "
                "AND (NOT %(started_only)s OR r.started_at IS NOT NULL)"
                + queue_order_sql("postgres", "r") + " LIMIT %(n)s FOR UPDATE OF r SKIP LOCKED"),
            grant=fmt("UPDATE {runs} r SET claim_holder = %(h)s, claim_until = %(until)s, "
                      "claim_fence = COALESCE(r.claim_fence, 0) + 1, status = 'running', parked_path = NULL, "
                      "parked_resource = NULL, parked_token = NULL, parked_reason = NULL, due_at = NULL, "
                      f"started_at = COALESCE(r.started_at, %(started)s, {_DB_NOW}), "
                      "updated_at = %(now)s WHERE r.run = ANY(%(runs)b::text[]) RETURNING "
                      + ", ".join(f"r.{c}" for c in RUN_COLS)),
        )
    return found


def claim_queued(connect: Connect, q: PgSql, holder: str, ttl_ms: int, now_ms: int, wanted: int, *,
                 only: Sequence[str] | None, workflows: Sequence[str] | None, skip: Collection[str],
                 queues: Mapping[str, QueueLimits]) -> list[RunRecord]:
    """Grant ``holder`` up to ``wanted`` queued due runs of ``queues`` (name order), each queue in its own
    transaction under its advisory lock; the records as granted, per queue in due order."""
    st = _statements(q)
    out: list[RunRecord] = []
    for name, limits in wanted_queues(queues):
        if len(out) >= wanted:
            break
        with connect() as conn, conn.transaction():
            out += _grant_queue(conn, st, q, name, limits, holder, ttl_ms, now_ms, wanted - len(out),
                                {"workflows": None if workflows is None else list(workflows),
                                 "only": None if only is None else list(only), "skip": list(skip)})
    return out


def _grant_queue(conn: psycopg.Connection[Any], st: _Statements, q: PgSql, name: str, limits: QueueLimits,
                 holder: str, ttl_ms: int, now_ms: int, wanted: int, filters: dict[str, Any]) -> list[RunRecord]:
    conn.execute(st.lock, (f"{st.table}:{name}",))
    tally = Tally()
    for status, key, claim_holder, until in conn.execute(st.holding, {"q": name, "now": now_ms,
                                                                      "hold": limits.hold_parked}):
        tally.add(status, key, claim_holder, until, now_ms, limits)
    started_at = None  # (None: the grant reads the database's clock itself)
    if limits.rate_limit is not None and limits.rate_period_ms is not None:
        row = conn.execute(st.started, {"q": name, "period": limits.rate_period_ms}).fetchone()
        assert row is not None
        started_at, tally.started = int(row[0]), int(row[1])
    # dead local holders' live-by-time claims of due runs are taken over, as by the unqueued path
    dead = [h for h in _local_holders(conn, q, now_ms) if holder_is_dead(h)]

    def read(n: int, full: list[str | None], parked_only: bool, started_only: bool,
             seen: list[str]) -> list[Candidate]:
        return conn.execute(st.candidates, {**filters, "q": name, "now": now_ms, "dead": dead, "seen": seen,
                                            "null_full": None in full, "full": [k for k in full if k is not None],
                                            "parked_only": parked_only, "started_only": started_only,
                                            "n": n}).fetchall()

    chosen = fill(tally, limits, wanted, read)
    if not chosen:
        return []
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(st.grant, {"h": holder, "until": now_ms + ttl_ms, "now": now_ms, "runs": chosen,
                                      "started": started_at}).fetchall()
    records = {record.run: record for record in map(record_from_row, rows)}
    return [records[run] for run in chosen if run in records]


def _local_holders(conn: psycopg.Connection[Any], q: PgSql, now_ms: int) -> list[str]:
    rows = conn.execute(q.dead_holder_candidates, (now_ms, f"@{this_host()}:")).fetchall()
    return [str(r[0]) for r in rows]


def admit_and_grant(connect: Connect, q: PgSql, admissions: list[PgAdmit], holder: str, ttl_ms: int, now_ms: int,
                    queues: Mapping[str, QueueLimits]) -> list[tuple[bool, Any]]:
    """Queued starts admitted and granted in ONE transaction on a pooled connection (``Store.admit_granted``):
    their admissions in one statement, then, under each queue's advisory lock (name order), the grant of those
    admitted — the limits counted after the lock as for any grant. (ok, (AdmitResult, granted record or None))
    or (False, error) per admission. The due runs left waiting are NOTIFYed (delivered at the commit); the ones
    granted are running here already."""
    st = _statements(q)
    for op in admissions:
        op.due_now = False  # (NOTIFYed below only if left waiting)
    with connect() as conn, conn.transaction():
        admitted = admit_group(conn, admissions)
        runs = [op.run for op, (ok, result) in zip(admissions, admitted, strict=True) if ok and result.admitted
                and op.record.queue is not None]
        granted: dict[str, RunRecord] = {}
        for name, limits in wanted_queues(queues):
            if len(granted) >= len(runs):
                break
            for record in _grant_queue(conn, st, q, name, limits, holder, ttl_ms, now_ms, len(runs) - len(granted),
                                       {"workflows": None, "only": runs, "skip": []}):
                granted[record.run] = record
        waiting = [run for run in runs if run not in granted]
        if waiting:
            conn.execute(q.notify_many, (q.channel, waiting))
    return [(True, (result, granted.get(op.run))) if ok else (False, result)
            for op, (ok, result) in zip(admissions, admitted, strict=True)]


# grant(admissions, holder, ttl_ms, now_ms, queues): :func:`admit_and_grant`'s outcomes, bound to a store
Grant = Callable[[list[PgAdmit], str, int, int, Mapping[str, QueueLimits]], list[tuple[bool, Any]]]
Granted = tuple[AdmitResult, RunRecord | None]
_Ask = tuple[PgAdmit, int, Mapping[str, QueueLimits], "asyncio.Future[Granted]"]


class StartAsks:
    """The queued starts (``PostgresStore.admit_granted_async``, issue 16) of one loop iteration, admitted and
    granted together: one transaction (:func:`admit_and_grant`) for all of them, not an admission in the group
    commit and a grant each.

    Why (benchmarks/queue_overhead.py): a start's admission in the group commit waited behind the batches of every
    body's writes (48 ms a run at 100 in flight), and the grants asked one by one serialised on the queue's lock
    and the pool's few connections. Together — each start's reserved share of ``workerConcurrency`` summed
    (:func:`telo.journal.queues.merged_limits`) — the grant is the one rule, counted under the lock."""

    def __init__(self, grant: Grant) -> None:
        self._grant = grant
        self._asks: dict[asyncio.AbstractEventLoop, dict[AskKey, list[_Ask]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # (a task only the loop references may be collected)

    def ask(self, admission: PgAdmit, holder: str, ttl_ms: int, now_ms: int,
            queues: Mapping[str, QueueLimits]) -> asyncio.Future[Granted]:
        """The admission's outcome and its grant (the record as granted) or None, with the others of this loop
        iteration."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Granted] = loop.create_future()
        pending = self._asks.get(loop)
        if pending is None:
            pending = self._asks[loop] = {}
            loop.call_soon(self._flush, loop)
        pending.setdefault(ask_key(holder, ttl_ms, queues), []).append((admission, now_ms, queues, future))
        return future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        for key, asks in self._asks.pop(loop, {}).items():
            task = loop.create_task(self._together(key, asks))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _together(self, key: AskKey, asks: list[_Ask]) -> None:
        holder, ttl_ms, _ = key
        outcomes: list[tuple[bool, Any]]
        try:  # (blocking: a pooled connection's transaction, on a worker thread)
            outcomes = await asyncio.to_thread(self._grant, [a[0] for a in asks], holder, ttl_ms,
                                               max(a[1] for a in asks), merged_limits([a[2] for a in asks]))
        except Exception as exc:  # (the transaction failed: every start of it raises its error)
            outcomes = [(False, exc)] * len(asks)
        for (*_, future), (ok, value) in zip(asks, outcomes, strict=True):
            if not future.done():
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
