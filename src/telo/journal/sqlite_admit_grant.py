"""A queued start's admission and its first grant in one SQLite write transaction (issue 16,
docs/proposals/admission-control.md "Built so far": the benchmark row; :meth:`telo.journal.store.Store.admit_granted`).

Why: a queued start used to await its admission's commit on its own, then wait for a slot with the other
waiters of its process, each ask one more commit (benchmarks/queue_overhead.py: 0.75x the unqueued throughput at
100 in flight). As one writer operation the admission and the grant share the batch's commit — and so do the
starts of one batch: their admissions are one multi-row INSERT (:func:`telo.journal.sqlite_lifecycle.admit_group`)
and their grants one :func:`telo.journal.sqlite_claims.claim_due` per holder and queue, under the queue's limits
counted inside the same ``BEGIN IMMEDIATE`` as every other grant (:mod:`telo.journal.sqlite_queues`). Nothing is
granted of a run this operation did not admit (an existing id answers as ``admit`` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from telo.journal import sqlite_claims
from telo.journal.model import Admission, AdmitResult, RunRecord
from telo.journal.queues import QueueLimits, ask_key, merged_limits
from telo.journal.sqlite_append import SeqBases
from telo.journal.sqlite_group import distinct_runs, savepoint
from telo.journal.sqlite_lifecycle import AdmitOp, admit_group
from telo.journal.sqlite_schema import Sql
from telo.journal.sqlite_tx import lifecycle_refused

if TYPE_CHECKING:
    from telo.journal.group_commit import GroupCommitWriter
    from telo.journal.sqlite_group import Op
    from telo.journal.store import Store

T = TypeVar("T")

Granted = tuple[AdmitResult, RunRecord | None]


class AdmitGrantOp:
    """``admit_granted`` as a writer operation: callable alone, and groupable by :func:`admit_grant_group`."""

    __slots__ = ("admit", "decided", "holder", "now_ms", "queues", "run", "seqs", "sql", "ttl_ms")

    def __init__(self, sql: Sql, admission: Admission, holder: str, ttl_ms: int, now_ms: int,
                 queues: Mapping[str, QueueLimits], seqs: SeqBases | None = None,
                 decided: asyncio.Future[Granted] | None = None) -> None:
        self.sql, self.seqs, self.decided = sql, seqs, decided
        self.run = admission.run
        self.admit = AdmitOp(sql, admission, now_ms, None, seqs)
        self.holder, self.ttl_ms, self.now_ms, self.queues = holder, ttl_ms, now_ms, queues

    def __call__(self, conn: sqlite3.Connection) -> Granted:
        ok, value = admit_grant_group(conn, [self])[0]
        if not ok:
            raise value
        result: Granted = value
        return result


def admit_grant_group(conn: sqlite3.Connection, ops: list[AdmitGrantOp]) -> list[tuple[bool, Any]]:
    """A batch's queued starts: their admissions in few statements, then one grant per :func:`ask_key` of the
    runs admitted — all or nothing (a SAVEPOINT: the group runner's contract). (ok, (AdmitResult, granted
    record or None)) per op."""
    distinct_runs(ops)
    with savepoint(conn, "grant"):
        admitted = admit_group(conn, [op.admit for op in ops])
        asks: dict[Any, list[AdmitGrantOp]] = {}
        for op, (ok, result) in zip(ops, admitted, strict=True):
            if ok and result.admitted and op.admit.record.queue is not None:
                asks.setdefault(ask_key(op.holder, op.ttl_ms, op.queues), []).append(op)
        granted: dict[str, RunRecord] = {}
        for same in asks.values():
            first = same[0]
            grant = sqlite_claims.claim_due(first.sql, first.holder, first.ttl_ms, max(op.now_ms for op in same),
                                            len(same), only=[op.run for op in same], workflows=None, skip=(),
                                            queues=merged_limits([op.queues for op in same]))
            for record in grant(conn):
                granted[record.run] = record
                if first.seqs is not None:  # the claim the grant wrote, as an admission notes its own
                    first.seqs.note_claim(record.run, record.claim.holder if record.claim else None, record.fence)
    out = [(True, (result, granted.get(op.run))) if ok else (False, result)
           for op, (ok, result) in zip(ops, admitted, strict=True)]
    _decide(ops, out)
    return out


def _decide(ops: list[AdmitGrantOp], out: list[tuple[bool, Any]]) -> None:
    """Tell each start's loop what was decided for it, before the batch commits (one hand-off per loop): the
    start executes the granted run meanwhile, as an unqueued start runs its body while its admission commits —
    the body's writes queue behind this batch (FIFO), and an effect that must not be repeated blindly waits for
    them, so it never runs for a grant that did not commit (telo.kinds.queued.admit_queued)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Granted], Granted]]] = {}
    for op, (ok, value) in zip(ops, out, strict=True):
        if ok and op.decided is not None:
            by_loop.setdefault(op.decided.get_loop(), []).append((op.decided, value))
    for loop, decisions in by_loop.items():
        with contextlib.suppress(RuntimeError):  # (a loop closed meanwhile: nobody waits)
            loop.call_soon_threadsafe(_settle, decisions)


def _settle(decisions: list[tuple[asyncio.Future[Granted], Granted]]) -> None:
    for future, value in decisions:
        if not future.done():
            future.set_result(value)


class SqliteAdmitGranted:
    """``admit_granted`` of :class:`telo.journal.sqlite.SqliteStore` (which provides what is declared here)."""

    _sql: Sql
    _seqs: SeqBases
    _writer: GroupCommitWriter

    def _lifecycle(self, what: str, fn: Op[T], *, isolated: bool = False) -> T:
        raise NotImplementedError

    def _ambient(self) -> Any:
        raise NotImplementedError

    def admit_granted(self, admission: Admission, holder: str, ttl_ms: int, now_ms: int,
                      queues: Mapping[str, QueueLimits]) -> Granted:
        """One write transaction; a keyed admission is decided alone (the generic form)."""
        if admission.keyed:
            from telo.journal.store import Store

            return Store.admit_granted(cast("Store", self), admission, holder, ttl_ms, now_ms, queues)
        op = AdmitGrantOp(self._sql, admission, holder, ttl_ms, now_ms, queues, self._seqs)
        return self._lifecycle("admit", op, isolated=True)  # (two writes: a SAVEPOINT when it runs alone)

    def admit_granted_async(self, admission: Admission, holder: str, ttl_ms: int, now_ms: int,
                            queues: Mapping[str, QueueLimits], *,
                            decided: asyncio.Future[Granted] | None = None) -> asyncio.Future[Granted]:
        """``decided``: settled with the outcome once the writer ran the operation, before its batch commits."""
        if admission.keyed or self._ambient() is not None:
            raise lifecycle_refused("admit")  # (a keyed admission: admit_async, decided alone)
        op = AdmitGrantOp(self._sql, admission, holder, ttl_ms, now_ms, queues, self._seqs, decided)
        return self._writer.submit_async(op, isolated=True)
