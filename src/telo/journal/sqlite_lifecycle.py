"""Admissions and completions as group-commit operations of the SQLite journal (reference §7 admit/complete).

Like an append (:mod:`telo.journal.sqlite_append`), each is callable alone — one statement — and groupable: a
batch's admissions become one multi-row ``INSERT OR IGNORE … RETURNING run``, its completions one
``UPDATE … FROM (VALUES …) RETURNING …``. With a hundred runs in flight a batch holds a hundred of each; as
single statements every one of them cost the writer thread a GIL hand-off against the loop running the runs'
bodies (benchmarks/durable.py).

An admission may carry its run's first claim (``submit_admission``: a freshly started run is claimed by the
process starting it): the row is inserted claimed, rather than inserted and then updated.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from telo.journal.batch_plan import complete_in_group
from telo.journal.chain import WriteChain
from telo.journal.claims import Fence
from telo.journal.model import Admission, AdmitResult, Claim, RunRecord
from telo.journal.rules import unknown_run
from telo.journal.sqlite_append import SeqBases, check_claim
from telo.journal.sqlite_group import all_or_nothing, distinct_runs, parts
from telo.journal.sqlite_rows import record_from_row
from telo.journal.sqlite_schema import Sql


class AdmitOp:
    """``admit`` as a writer operation (first admission wins; a repeated one gets the stored record)."""

    __slots__ = ("claim", "params", "record", "run", "seqs", "sql")

    def __init__(self, sql: Sql, admission: Admission, now_ms: int, claim: Claim | None = None,
                 seqs: SeqBases | None = None) -> None:
        a = admission
        self.sql = sql
        self.seqs = seqs
        self.run = a.run
        self.claim = claim
        self.params = (a.run, a.status, a.due_at, a.inputs, a.inputs_v, a.workflow, a.manifest_digest,
                       a.digest_scope, now_ms, now_ms, claim.holder if claim else None,
                       claim.until if claim else None, 1 if claim else 0, a.queue, a.queue_key, a.priority)
        self.record = a.record(now_ms, claim)

    def __call__(self, conn: sqlite3.Connection) -> AdmitResult:
        if conn.execute(self.sql.admit, self.params).rowcount == 1:
            self.admitted()
            return AdmitResult(True, self.record)
        return self.existing(conn)

    def admitted(self) -> None:
        if self.seqs is not None:  # a run inserted just now has no entries (none exist without their run)
            self.seqs.note(self.run, 0)
            self.seqs.note_claim(self.run, self.claim.holder if self.claim else None, self.record.fence)

    def existing(self, conn: sqlite3.Connection) -> AdmitResult:
        return AdmitResult(False, read_record(conn, self.sql, self.run))


class CompleteOp:
    """``complete`` as a writer operation: the run's final status, result and error, its claim released.

    ``chain``: the execution's deferred appends (telo.journal.chain) — the completion commits only if every one
    of them did. ``fence``: the execution's claim (its chain's, for a deferred one) — the completion commits
    only while it is the run's."""

    __slots__ = ("chain", "fence", "params", "run", "seqs", "sql")

    def __init__(self, sql: Sql, run: str, params: tuple[Any, ...], chain: WriteChain | None,
                 fence: Fence | None = None, seqs: SeqBases | None = None) -> None:
        self.sql = sql
        self.run = run
        self.params = params  # the single statement's order: (status, …, updated_at, run)
        self.chain = chain
        self.fence = fence if fence is not None or chain is None else chain.fence
        self.seqs = seqs

    def __call__(self, conn: sqlite3.Connection) -> RunRecord:
        if self.chain is not None:
            self.chain.check()  # settle nothing over a hole in the execution's deferred writes
        fence = self.fence
        if self.seqs is not None:
            self.seqs.forget_claim(self.run)  # released by the completion (or, refused, not known)
        if fence is None:
            row = conn.execute(self.sql.complete_returning, self.params).fetchone()
        else:
            row = conn.execute(self.sql.complete_fenced, (*self.params, fence.holder, fence.token)).fetchone()
        if row is None:
            if fence is not None:
                check_claim(conn, self.sql, self.run, fence, "the completion")
            raise unknown_run(self.run)
        return record_from_row(row)

    def group_params(self) -> tuple[Any, ...]:
        """Its row of ``Sql.complete_many``: run first, then the single statement's values, then the fence."""
        fence = self.fence
        return (self.params[-1], *self.params[:-1], fence.holder if fence else None, fence.token if fence else None)


def read_record(conn: sqlite3.Connection, sql: Sql, run: str) -> RunRecord:
    row = conn.execute(sql.select_run, (run,)).fetchone()
    if row is None:
        raise unknown_run(run)
    return record_from_row(row)


def admit_group(conn: sqlite3.Connection, ops: list[AdmitOp]) -> list[tuple[bool, Any]]:
    """A batch's admissions in few statements (:func:`~telo.journal.sqlite_group.chunks`); (ok, AdmitResult)
    per op."""
    distinct_runs(ops)
    sql = ops[0].sql
    inserted: set[str] = set()
    for rows in all_or_nothing(conn, [(sql.admit_many(len(part)), [p for op in part for p in op.params])
                                      for part in parts(ops)], lambda cur: cur.fetchall()):
        inserted.update(row[0] for row in rows)
    results: list[tuple[bool, Any]] = []
    for op in ops:
        if op.run in inserted:
            op.admitted()
            results.append((True, AdmitResult(True, op.record)))
            continue
        try:
            results.append((True, op.existing(conn)))
        except Exception as exc:
            results.append((False, exc))
    return results


def complete_group(conn: sqlite3.Connection, ops: list[CompleteOp]) -> list[tuple[bool, Any]]:
    """A batch's completions in few statements (:func:`~telo.journal.sqlite_group.chunks`); (ok, RunRecord or
    error) per op. A completion whose chain is broken is refused without being written, as alone."""
    def settle(todo: list[CompleteOp]) -> dict[str, RunRecord]:
        sql, seqs = todo[0].sql, todo[0].seqs
        if seqs is not None:
            for op in todo:
                seqs.forget_claim(op.run)
        statements = [(sql.complete_many(len(part)), [p for op in part for p in op.group_params()])
                      for part in parts(todo)]
        return {record.run: record for rows in all_or_nothing(conn, statements, lambda cur: cur.fetchall())
                for record in map(record_from_row, rows)}

    return complete_in_group(ops, settle, lambda op: _not_settled(conn, op))


def _not_settled(conn: sqlite3.Connection, op: CompleteOp) -> Exception:
    """Why a completion of a group settled nothing: its fence no longer holds the run, or the run is unknown."""
    try:
        if op.fence is not None:
            check_claim(conn, op.sql, op.run, op.fence, "the completion")
        return unknown_run(op.run)
    except Exception as exc:
        return exc
