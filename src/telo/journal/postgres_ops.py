"""The PostgreSQL journal's writes as group-commit operations (reference §7 "Postgres journal").

Each write is a function of the writer's connection (:mod:`telo.journal.postgres_writer`), run inside the
batch's transaction. Appends, admissions and completions are classes, callable alone — one statement — and
groupable: a batch runs consecutive ones together as one ``unnest`` statement
(:mod:`telo.journal.postgres_groups`). The rest — parks, record updates, unparks, claims, renewals, releases,
deliveries — are rarer and run alone.

One rule every operation keeps, because a PostgreSQL statement that fails aborts its whole transaction: an
operation raises a Python error (an unknown run, a refused fence, a broken chain) only before it wrote
anything, or after a single statement that wrote nothing. What writes several statements is declared
``isolated`` and runs under a SAVEPOINT. A driver error inside any operation makes the executor roll the
batch back and run it again with each operation isolated, so it fails alone.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row

from telo.errors import JournalCorrupt
from telo.journal.batch_plan import complete_in_group, distinct_runs
from telo.journal.chain import WriteChain, stored_for
from telo.journal.claims import Fence, fence_refused, holder_is_dead, this_host
from telo.journal.integrity import checksum
from telo.journal.model import Admission, AdmitResult, Claim, Entry, Parked, RunRecord
from telo.journal.postgres_rows import columns_for, entry_from_row, record_from_row
from telo.journal.postgres_sql import PgSql
from telo.journal.rules import unknown_run

Conn = psycopg.Connection[Any]
T = TypeVar("T")
# A write of the PostgreSQL journal: what it does on the writer's connection (or an ambient transaction's).
Op = Callable[[Conn], T]


def read_record(conn: Conn, q: PgSql, run: str) -> RunRecord:
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(q.select_run, (run,)).fetchone()
    if row is None:
        raise unknown_run(run)
    return record_from_row(row)


def check_claim(conn: Conn, q: PgSql, run: str, fence: Fence, what: str) -> None:
    """Raise ``ClaimLost`` unless the run's claim is ``fence``'s (``unknown_run`` for a run not in the journal)."""
    row = conn.execute(q.claim_of, (run,)).fetchone()
    if row is None:
        raise unknown_run(run)
    if row[0] != fence.holder or row[1] != fence.token:
        raise fence_refused(run, fence, what, row[0], row[1])


class PgAppend:
    """One append (first writer wins; fenced: only while the run's claim is the fence's)."""

    __slots__ = ("at", "chain", "crc", "entry", "fence", "q", "run", "target")

    def __init__(self, q: PgSql, run: str, entry: Entry, target: str | None, at: int,
                 chain: WriteChain | None = None, fence: Fence | None = None) -> None:
        self.q = q
        self.run = run
        self.entry = entry
        self.target = target  # the entry's target as JSON text
        self.chain = chain  # set for a deferred append (telo.journal.chain)
        # the execution's claim (a deferred append's is its chain's): written only while the run's claim is it
        self.fence = fence if fence is not None or chain is None else chain.fence
        self.crc = checksum(entry)
        self.at = at  # its written_at: the entry's own, or the store's clock when the append was made

    def row(self) -> tuple[Any, ...]:
        """Its row of ``PgSql.append_many``'s arrays."""
        e, fence = self.entry, self.fence
        return (self.run, e.path, e.kind, e.decision, self.target, e.value, e.v, self.crc, self.at,
                fence.holder if fence else None, fence.token if fence else None)

    def __call__(self, conn: Conn) -> Entry:
        if self.chain is not None:
            self.chain.check()
        e, q, fence = self.entry, self.q, self.fence
        params: dict[str, Any] = {"run": self.run, "path": e.path, "kind": e.kind, "decision": e.decision,
                                  "target": self.target, "value": e.value, "v": e.v, "checksum": self.crc,
                                  "at": self.at}
        if fence is not None:
            params.update(f_holder=fence.holder, f_token=fence.token)
        row = conn.execute(q.append if fence is None else q.append_fenced, params).fetchone()
        if row is not None:
            return self.stored(row[0])
        if fence is not None:
            check_claim(conn, q, self.run, fence, f"the entry at {e.path!r}")
        return self.settle(self.existing(conn))

    def settle(self, stored: Entry) -> Entry:
        """First writer wins: what the append returns having found ``stored`` at its path (chain.stored_for)."""
        return stored_for(self.chain, self.run, self.entry, stored)

    def stored(self, seq: int) -> Entry:
        e = self.entry
        return Entry(e.path, e.kind, e.value, e.v, e.decision, e.target, seq, self.at)

    def existing(self, conn: Conn) -> Entry:
        """The entry an earlier writer stored at this op's path."""
        with conn.cursor(row_factory=dict_row) as cur:
            first = cur.execute(self.q.select_entry, (self.run, self.entry.path)).fetchone()
        if first is not None:
            return entry_from_row(self.run, first)
        if conn.execute(self.q.run_exists, (self.run,)).fetchone() is None:
            raise unknown_run(self.run)
        raise JournalCorrupt(
            f"journal entry {self.entry.path!r} of run {self.run!r} conflicted on write but cannot be read back",
            data={"run": self.run, "path": self.entry.path},
        )


class PgAdmit:
    """``admit``: first admission wins, a repeated one gets the stored record; ``claim``: the run's first claim
    written with its row (fencing token 1)."""

    __slots__ = ("claim", "due_now", "q", "record", "row_values", "run")

    def __init__(self, q: PgSql, admission: Admission, now_ms: int, claim: Claim | None = None) -> None:
        a = admission
        self.q = q
        self.run = a.run
        self.claim = claim
        self.row_values = (a.run, a.status, a.due_at, a.inputs, a.inputs_v, a.workflow, a.manifest_digest,
                           a.digest_scope, now_ms, claim.holder if claim else None, claim.until if claim else None,
                           1 if claim else None, a.queue, a.queue_key, a.priority)
        self.record = a.record(now_ms, claim)
        # A scheduled run that is already due is worth a wake-up (NOTIFY); a future one is found by the sweep,
        # and a running one is executed by its admitter, which claims it right away.
        self.due_now = a.status == "scheduled" and a.due_at is not None and a.due_at <= now_ms

    def __call__(self, conn: Conn) -> AdmitResult:
        result: AdmitResult = _one(admit_group(conn, [self]))
        return result

    def existing(self, conn: Conn) -> AdmitResult:
        return AdmitResult(False, read_record(conn, self.q, self.run))


class PgComplete:
    """``complete``: the run's final status, result and error, its park and claim cleared. ``chain``: it
    commits only if every earlier write of the execution did; ``fence``: only while the claim is the fence's."""

    __slots__ = ("chain", "fence", "q", "row_values", "run")

    def __init__(self, q: PgSql, run: str, row_values: tuple[Any, ...], chain: WriteChain | None,
                 fence: Fence | None = None) -> None:
        self.q = q
        self.run = run
        self.row_values = row_values  # (run, status, result, result_v, error, regions, reasons, replayed, now)
        self.chain = chain
        self.fence = fence if fence is not None or chain is None else chain.fence

    def row(self) -> tuple[Any, ...]:
        fence = self.fence
        return (*self.row_values, fence.holder if fence else None, fence.token if fence else None)

    def __call__(self, conn: Conn) -> RunRecord:
        record: RunRecord = _one(complete_group(conn, [self]))
        return record


def _one(results: list[tuple[bool, Any]]) -> Any:
    ok, value = results[0]
    if not ok:
        raise value
    return value


def admit_group(conn: Conn, ops: list[PgAdmit]) -> list[tuple[bool, Any]]:
    """Admissions of distinct runs in ONE statement; (ok, AdmitResult) per op. The due scheduled runs among
    those admitted are NOTIFYed, delivered when the batch commits."""
    distinct_runs(ops)
    q = ops[0].q
    columns = [list(c) for c in zip(*(op.row_values for op in ops), strict=True)]
    admitted = {row[0] for row in conn.execute(q.admit_many, columns).fetchall()}
    due = [op.run for op in ops if op.due_now and op.run in admitted]
    if due:
        conn.execute(q.notify_many, (q.channel, due))
    results: list[tuple[bool, Any]] = []
    for op in ops:
        if op.run in admitted:
            results.append((True, AdmitResult(True, op.record)))
            continue
        try:
            results.append((True, op.existing(conn)))
        except Exception as exc:
            results.append((False, exc))
    return results


def complete_group(conn: Conn, ops: list[PgComplete]) -> list[tuple[bool, Any]]:
    """Completions of distinct runs in ONE statement; (ok, RunRecord or error) per op. One whose chain is
    broken is refused without being written, as alone."""
    def settle(todo: list[PgComplete]) -> dict[str, RunRecord]:
        columns = [list(c) for c in zip(*(op.row() for op in todo), strict=True)]
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(todo[0].q.complete_many, columns).fetchall()
        return {record.run: record for record in map(record_from_row, rows)}

    return complete_in_group(ops, settle, lambda op: _not_settled(conn, op))


def _not_settled(conn: Conn, op: PgComplete) -> Exception:
    """Why a completion settled nothing: its fence no longer holds the run, or the run is unknown."""
    try:
        if op.fence is not None:
            check_claim(conn, op.q, op.run, op.fence, "the completion")
        return unknown_run(op.run)
    except Exception as exc:
        return exc


def row_update(q: PgSql, what: str, run: str, query: str, params: dict[str, Any],
               chain: WriteChain | None = None, fence: Fence | None = None) -> Op[RunRecord]:
    """One UPDATE of the run's row returning the record — with ``fence`` (``query`` its fenced statement), only
    while the run's claim is the fence's; with ``chain``, only if its earlier writes all committed."""
    if fence is not None:
        params = {**params, "f_holder": fence.holder, "f_token": fence.token}
    params = {**params, "run": run}

    def op(conn: Conn) -> RunRecord:
        if chain is not None:
            chain.check()  # settle nothing over a hole in the execution's deferred writes
        with conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(query, params).fetchone()
        if row is None:
            if fence is not None:
                check_claim(conn, q, run, fence, f"the {what}")
            raise unknown_run(run)
        return record_from_row(row)

    return op


def park(q: PgSql, run: str, p: Parked, now_ms: int, chain: WriteChain | None,
         fence: Fence | None) -> Op[RunRecord]:
    """Park the run; fenced (by ``fence``, or the chain's) it keeps the claim for the body to release."""
    fence = fence if fence is not None or chain is None else chain.fence
    params = {"path": p.path, "resource": p.resource, "token": p.token, "reason": p.reason, "at": p.at,
              "now": now_ms}
    return row_update(q, "park", run, q.park if fence is None else q.park_fenced, params, chain, fence)


def record_update(q: PgSql, run: str, changes: dict[str, Any], now_ms: int,
                  fence: Fence | None) -> Op[RunRecord]:
    """``update_run``: RunRecord fields set by name (a TypeError at once for anything else)."""
    columns = {"updated_at": now_ms, **columns_for(changes)}
    return row_update(q, "record update", run, q.update(columns, fenced=fence is not None).as_string(None),
                      columns, fence=fence)


def unpark(q: PgSql, run: str, now_ms: int) -> Op[bool]:
    """A parked run running again, and a NOTIFY (sent when the batch commits) so a worker sweeps at once."""
    def op(conn: Conn) -> bool:
        if conn.execute(q.unpark, (now_ms, run)).rowcount == 0:
            return False
        conn.execute(q.notify_many, (q.channel, [run]))
        return True

    return op


def claim(q: PgSql, run: str, holder: str, ttl_ms: int, now_ms: int) -> Op[int | None]:
    """reference §7 claimRun: granted when free or lapsed; a dead local holder's claim is taken over by a
    compare-and-set on the claim that was judged (each UPDATE all or nothing on its own)."""
    params = {"h": holder, "until": now_ms + ttl_ms, "run": run, "now": now_ms}

    def op(conn: Conn) -> int | None:
        granted = conn.execute(q.claim, params).fetchone()
        if granted is not None:
            return int(granted[0])
        current = conn.execute(q.claim_current, (run,)).fetchone()
        if current is None:
            return None
        other, until = current
        if not isinstance(other, str) or not holder_is_dead(other):
            return None
        taken = conn.execute(q.claim_from, {**params, "other": other, "was": until}).fetchone()
        return None if taken is None else int(taken[0])

    return op


def release(q: PgSql, run: str, holder: str, token: int | None) -> Op[int]:
    query = q.release if token is None else q.release_fenced
    params = (run, holder) if token is None else (run, holder, token)
    return lambda conn: conn.execute(query, params).rowcount


def deliver(q: PgSql, token: str, value: str | None, v: int | None, now_ms: int) -> Op[str | None]:
    """The parked run's row locked (a racing delivery waits, then finds it unparked), the entry stored at its
    park path unless one is there, the run unparked and a NOTIFY sent — several statements: run it isolated."""
    def op(conn: Conn) -> str | None:
        row = conn.execute(q.deliver_find, (token,)).fetchone()
        if row is None:
            return None
        run, path = row
        crc = checksum(Entry(path, "step", value, v, None, None))
        if conn.execute(q.deliver_insert, (run, path, value, v, crc, now_ms)).fetchone() is None:
            return None  # another delivery stored its payload first
        conn.execute(q.deliver_unpark, (now_ms, run))
        conn.execute(q.notify_many, (q.channel, [run]))
        return str(run)

    return op


def claim_due(q: PgSql, holder: str, ttl_ms: int, now_ms: int, limit: int, *, only: Sequence[str] | None,
              workflows: Sequence[str] | None, skip: Collection[str]) -> Op[list[RunRecord]]:
    """Fair claiming (``Store.claim_due``): up to ``limit`` due runs granted to ``holder`` and started by the
    statement that picks them, ``FOR UPDATE SKIP LOCKED`` — two workers asking at once get disjoint runs and
    neither waits for the other; the record of each, in due order."""
    def op(conn: Conn) -> list[RunRecord]:
        rows = conn.execute(q.dead_holder_candidates, (now_ms, f"@{this_host()}:")).fetchall()
        dead = [r[0] for r in rows if holder_is_dead(r[0])]
        params = {"now": now_ms, "dead": dead, "limit": limit, "h": holder, "until": now_ms + ttl_ms,
                  "workflows": None if workflows is None else list(workflows),
                  "only": None if only is None else list(only), "skip": list(skip)}
        with conn.cursor(row_factory=dict_row) as cur:
            granted = cur.execute(q.claim_due, params).fetchall()
        granted.sort(key=lambda r: (r["was_due"] is not None, r["was_due"] or 0, r["run"]))
        return [record_from_row(row) for row in granted]

    return op
