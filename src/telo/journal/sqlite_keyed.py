"""Keyed admissions on the SQLite journal (issue 16 step 4; :mod:`telo.journal.keyed` has the rule).

One operation of the writer, run alone under a SAVEPOINT inside its ``BEGIN IMMEDIATE`` — which no other
process's writer can interleave with, so what the rule reads (a live run of the key, an unstarted one to
debounce) is what holds when the admission commits: racing admissions of one key, in any number of processes,
make one run. The unique partial indexes of schema v7 (:mod:`telo.journal.sqlite_schema`) refuse a second run
should a writer skip the rule. Each statement reads the index it needs: ``(queue, dedup_key)`` over live runs,
``(queue, workflow, debounce_key)`` over unstarted ones — the queries repeat the indexes' conditions so that
SQLite uses them.
"""

from __future__ import annotations

import sqlite3
from functools import cache

from telo.journal import keyed
from telo.journal.model import Admission, AdmitResult, Outcome, RunRecord
from telo.journal.sqlite_lifecycle import AdmitOp
from telo.journal.sqlite_rows import RECORD_SELECT, error_json, reasons_json, record_from_row
from telo.journal.sqlite_schema import ADMIT_COLUMNS, ADMIT_VALUES, Sql


@cache
def _statements(runs: str) -> tuple[str, str, str]:
    debounce = (f"UPDATE {runs} SET inputs = :inputs, inputs_codec_version = :inputs_v, queue_key = :queue_key, "
                "priority = :priority, due_at = :due_at, updated_at = :now WHERE queue = :queue "
                "AND workflow IS :workflow AND debounce_key = :key AND status = 'scheduled' AND started_at IS NULL "
                f"RETURNING {RECORD_SELECT}")
    live = (f"SELECT {RECORD_SELECT} FROM {runs} WHERE queue = ? AND dedup_key = ? "
            "AND status IN ('scheduled', 'running', 'parked') ORDER BY ifnull(created_at, 0), run")
    insert = (f"INSERT OR IGNORE INTO {runs} ({ADMIT_COLUMNS}, dedup_key, debounce_key) "
              f"VALUES ({ADMIT_VALUES}, ?, ?)")
    return debounce, live, insert


def live_runs(conn: sqlite3.Connection, runs: str, queue: str, dedup_key: str) -> list[RunRecord]:
    """The live runs of ``queue`` holding ``dedup_key`` (one, the index permitting), on the ``(queue, dedup_key)``
    index — what the rule reads, and the store's ``live_runs_of_key`` (:mod:`telo.journal.sqlite_queue_reads`)."""
    return [record_from_row(row) for row in conn.execute(_statements(runs)[1], (queue, dedup_key)).fetchall()]


class _Ops:
    """:class:`telo.journal.keyed.KeyedOps` on the writer's connection."""

    def __init__(self, conn: sqlite3.Connection, sql: Sql) -> None:
        self.conn = conn
        self.sql = sql
        self.debounce_stmt, _, self.insert_stmt = _statements(sql.runs)

    def by_id(self, run: str) -> RunRecord | None:
        row = self.conn.execute(self.sql.select_run, (run,)).fetchone()
        return None if row is None else record_from_row(row)

    def debounce(self, admission: Admission, now_ms: int) -> RunRecord | None:
        a = admission
        row = self.conn.execute(self.debounce_stmt, {
            "inputs": a.inputs, "inputs_v": a.inputs_v, "queue_key": a.queue_key, "priority": a.priority,
            "due_at": a.due_at, "now": now_ms, "queue": a.queue, "workflow": a.workflow, "key": a.debounce_key,
        }).fetchone()
        return None if row is None else record_from_row(row)

    def live(self, admission: Admission) -> list[RunRecord]:
        if admission.queue is None or admission.dedup_key is None:
            return []  # (as the statement's `= NULL` would: no run)
        return live_runs(self.conn, self.sql.runs, admission.queue, admission.dedup_key)

    def cancel(self, run: str, outcome: Outcome, now_ms: int) -> None:
        # the very statement of Store.complete, unfenced: an operator's cancel (telo.durable.operator.cancel_run)
        o = outcome
        self.conn.execute(self.sql.complete_returning, (
            o.status, o.result, o.result_v, error_json(o.error), o.collapsed_regions,
            reasons_json(o.collapse_reasons), o.replayed_steps, now_ms, run)).fetchone()

    def insert(self, admission: Admission, now_ms: int) -> bool:
        params = (*AdmitOp(self.sql, admission, now_ms).params, admission.dedup_key, admission.debounce_key)
        return self.conn.execute(self.insert_stmt, params).rowcount == 1


class KeyedAdmitOp:
    """A keyed ``admit`` as a writer operation (not grouped: run it isolated)."""

    __slots__ = ("admission", "now_ms", "sql")

    def __init__(self, sql: Sql, admission: Admission, now_ms: int) -> None:
        self.sql = sql
        self.admission = admission
        self.now_ms = now_ms

    def __call__(self, conn: sqlite3.Connection) -> AdmitResult:
        return keyed.admit_with(_Ops(conn, self.sql), self.admission, self.now_ms)
