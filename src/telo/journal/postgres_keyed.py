"""Keyed admissions on the PostgreSQL journal (issue 16 step 4; :mod:`telo.journal.keyed` has the rule).

Each keyed admission is a transaction of its own on a pooled connection — not a member of the group commit's
batch, which a wait for another process's admission of the same key would hold up (and two batches waiting on
each other's keys could deadlock) — that first takes ``pg_advisory_xact_lock`` of the table, the queue and the
key: admissions of one key, in any number of processes, serialise for the few statements of the rule, and
under READ COMMITTED each statement sees what the previous holder of the lock committed. Admissions of other
keys, and every unkeyed write, do not wait. The unique partial indexes (:mod:`telo.journal.postgres_schema`) are
the backstop for a writer that skips the lock: its insert is refused (``ON CONFLICT DO NOTHING``) and the rule
decides again. A debounce that meets a run a worker is granting at that instant waits for the grant's row lock,
then finds the run started and admits a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from telo.journal import keyed
from telo.journal.columns import json_text
from telo.journal.model import Admission, AdmitResult, Outcome, RunRecord
from telo.journal.postgres_rows import record_from_row
from telo.journal.postgres_sql import PgSql

Connect = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"


def _statements(q: PgSql) -> tuple[str, str, str, str]:
    return _by_table(q.select_run, q)  # (a PgSql holds a dict: cached by one of its texts, as postgres_queues)


_CACHE: dict[str, tuple[str, str, str, str]] = {}


def _by_table(key: str, q: PgSql) -> tuple[str, str, str, str]:
    found = _CACHE.get(key)
    if found is not None:
        return found

    def fmt(text: str) -> str:
        return sql.SQL(text).format(**q.parts).as_string(None)

    found = _CACHE[key] = (
        fmt("{runs}"),
        fmt("UPDATE {runs} SET inputs = %(inputs)s, inputs_codec_version = %(inputs_v)s, queue_key = %(queue_key)s, "
            "priority = %(priority)s, due_at = %(due_at)s, updated_at = %(now)s WHERE queue = %(queue)s "
            "AND workflow IS NOT DISTINCT FROM %(workflow)s AND debounce_key = %(key)s AND status = 'scheduled' "
            "AND started_at IS NULL RETURNING {cols}"),
        fmt("SELECT {cols} FROM {runs} WHERE queue = %s AND dedup_key = %s "
            "AND status IN ('scheduled', 'running', 'parked') ORDER BY COALESCE(created_at, 0), run COLLATE \"C\""),
        fmt("INSERT INTO {runs} (run, status, due_at, inputs, inputs_codec_version, workflow, manifest_digest, "
            "digest_scope, created_at, updated_at, epoch, queue, queue_key, priority, dedup_key, debounce_key) "
            "VALUES (%(run)s, %(status)s, %(due_at)s, %(inputs)s, %(inputs_v)s, %(workflow)s, %(digest)s, "
            "%(scope)s, %(now)s, %(now)s, 0, %(queue)s, %(queue_key)s, %(priority)s, %(dedup_key)s, "
            "%(debounce_key)s) ON CONFLICT DO NOTHING RETURNING run"),
    )
    return found


def live_runs(conn: psycopg.Connection[Any], q: PgSql, queue: str, dedup_key: str) -> list[RunRecord]:
    """The live runs of ``queue`` holding ``dedup_key`` (one, the index permitting), on the ``(queue, dedup_key)``
    index — what the rule reads, and the store's ``live_runs_of_key`` (:mod:`telo.journal.postgres_queue_reads`)."""
    with conn.cursor(row_factory=dict_row) as cur:
        return [record_from_row(row) for row in cur.execute(_statements(q)[2], (queue, dedup_key)).fetchall()]


class _Ops:
    """:class:`telo.journal.keyed.KeyedOps` on one transaction's connection."""

    def __init__(self, conn: psycopg.Connection[Any], q: PgSql) -> None:
        self.conn = conn
        self.q = q
        _, self.debounce_stmt, _, self.insert_stmt = _statements(q)

    def _rows(self, statement: str, params: Any) -> list[RunRecord]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            return [record_from_row(row) for row in cur.execute(statement, params).fetchall()]

    def by_id(self, run: str) -> RunRecord | None:
        found = self._rows(self.q.select_run, (run,))
        return found[0] if found else None

    def debounce(self, admission: Admission, now_ms: int) -> RunRecord | None:
        a = admission
        found = self._rows(self.debounce_stmt, {
            "inputs": a.inputs, "inputs_v": a.inputs_v, "queue_key": a.queue_key, "priority": a.priority,
            "due_at": a.due_at, "now": now_ms, "queue": a.queue, "workflow": a.workflow, "key": a.debounce_key})
        return found[0] if found else None

    def live(self, admission: Admission) -> list[RunRecord]:
        if admission.queue is None or admission.dedup_key is None:
            return []  # (as the statement's `= NULL` would: no run)
        return live_runs(self.conn, self.q, admission.queue, admission.dedup_key)

    def cancel(self, run: str, outcome: Outcome, now_ms: int) -> None:
        # the very statement of Store.complete, unfenced: an operator's cancel (telo.durable.operator.cancel_run)
        o = outcome
        self.conn.execute(self.q.complete, {
            "status": o.status, "result": o.result, "result_v": o.result_v,
            "error": json_text(dict(o.error)) if o.error else None, "regions": o.collapsed_regions,
            "reasons": json_text(list(o.collapse_reasons)), "replayed": o.replayed_steps, "now": now_ms, "run": run})

    def insert(self, admission: Admission, now_ms: int) -> bool:
        a = admission
        row = self.conn.execute(self.insert_stmt, {
            "run": a.run, "status": a.status, "due_at": a.due_at, "inputs": a.inputs, "inputs_v": a.inputs_v,
            "workflow": a.workflow, "digest": a.manifest_digest, "scope": a.digest_scope, "now": now_ms,
            "queue": a.queue, "queue_key": a.queue_key, "priority": a.priority, "dedup_key": a.dedup_key,
            "debounce_key": a.debounce_key}).fetchone()
        return row is not None


def admit_keyed(connect: Connect, q: PgSql, admission: Admission, now_ms: int) -> AdmitResult:
    """Decide ``admission`` by the rule, under the advisory lock of its key(s), in one transaction; a run admitted
    due now is NOTIFYed (delivered at commit), as a batch's admissions are."""
    table = _statements(q)[0]
    a = admission
    locks = sorted(lock for lock in (
        None if a.dedup_key is None else f"{table}:{a.queue}:dedup:{a.dedup_key}",
        None if a.debounce_key is None else f"{table}:{a.queue}:{a.workflow}:debounce:{a.debounce_key}",
    ) if lock is not None)  # (one, a queue having one kind of key; sorted, were there two)
    with connect() as conn, conn.transaction():
        for lock in locks:
            conn.execute(_LOCK, (lock,))
        result = keyed.admit_with(_Ops(conn, q), admission, now_ms)
        if result.admitted and a.status == "scheduled" and a.due_at is not None and a.due_at <= now_ms:
            conn.execute(q.notify_many, (q.channel, [a.run]))
    return result
