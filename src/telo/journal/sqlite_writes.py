"""The SQLite journal's writes that run one at a time, each an operation of the writer's connection.

Appends, admissions and completions run as groups in a batch (:mod:`telo.journal.sqlite_append`,
:mod:`telo.journal.sqlite_lifecycle`); the writes here — parks and record updates, unparks, claims and their
renewals and releases, deliveries, compaction — are rarer, and each is one statement, or a few the writer
runs under a SAVEPOINT (``isolated``), so each leaves the database consistent should it fail. Fenced writes
(:mod:`telo.journal.claims` "Fencing") carry the fence's condition in their own statement.
"""

from __future__ import annotations

import sqlite3
from dataclasses import fields
from typing import Any, Final

from telo.journal.chain import WriteChain
from telo.journal.claims import Fence, holder_is_dead
from telo.journal.integrity import checksum
from telo.journal.model import Entry, Parked, RunRecord
from telo.journal.rules import unknown_run
from telo.journal.sqlite_append import check_claim
from telo.journal.sqlite_group import Op
from telo.journal.sqlite_rows import RECORD_SELECT, columns_for, record_from_row
from telo.journal.sqlite_schema import Sql

# update_run takes RunRecord field names; updated_at is the store's to set (as in the memory store).
_RECORD_FIELDS: Final = {f.name for f in fields(RunRecord)} - {"run", "updated_at", "claim", "fence"}


def row_update(sql: Sql, what: str, run: str, stmt: str, params: tuple[Any, ...],
               chain: WriteChain | None = None, fence: Fence | None = None) -> Op[RunRecord]:
    """One UPDATE of the run's row, handing back the updated record — all or nothing (nothing written when it
    raises), so it needs no SAVEPOINT; ``fence``: ``stmt`` ends with the fence's condition (holder, token)."""
    returning = f"{stmt} RETURNING {RECORD_SELECT}"  # the updated record, without a read after it
    if fence is not None:
        params = (*params, fence.holder, fence.token)

    def op(conn: sqlite3.Connection) -> RunRecord:
        if chain is not None:
            chain.check()  # settle nothing over a hole in the execution's deferred writes
        row = conn.execute(returning, params).fetchone()
        if row is None:
            if fence is not None:
                check_claim(conn, sql, run, fence, f"the {what}")
            raise unknown_run(run)
        return record_from_row(row)

    return op


def park(sql: Sql, run: str, p: Parked, now_ms: int, chain: WriteChain | None,
         fence: Fence | None) -> Op[RunRecord]:
    """Park the run; with a chain, after its writes and fenced by its fence (unless given another)."""
    params = (p.path, p.resource, p.token, p.at, p.reason, p.at, now_ms, run)
    fence = fence if fence is not None or chain is None else chain.fence
    stmt = sql.park if fence is None else sql.park_fenced
    return row_update(sql, "park", run, stmt, params, chain, fence)


def record_update(sql: Sql, run: str, changes: dict[str, Any], now_ms: int, fence: Fence | None) -> Op[RunRecord]:
    """``update_run``: RunRecord fields set by name (a TypeError at once for anything else)."""
    bad = set(changes) - _RECORD_FIELDS
    if bad:
        raise TypeError(f"not run record fields: {sorted(bad)}")
    cols: list[tuple[str, Any]] = []
    for name, value in changes.items():
        cols += columns_for(name, value)
    cols.append(("updated_at", now_ms))
    stmt = sql.update([c for c, _ in cols], fenced=fence is not None)
    return row_update(sql, "record update", run, stmt, (*(v for _, v in cols), run), fence=fence)


def unpark(sql: Sql, run: str, now_ms: int) -> Op[bool]:
    stmt, params = sql.unpark, (now_ms, run)
    return lambda conn: conn.execute(stmt, params).rowcount > 0


def claim(sql: Sql, run: str, holder: str, ttl_ms: int, now_ms: int) -> Op[int | None]:
    """reference §7 claimRun (each UPDATE all or nothing on its own); a dead local holder's claim is taken over."""
    params = {"holder": holder, "until": now_ms + ttl_ms, "run": run, "now": now_ms}

    def op(conn: sqlite3.Connection) -> int | None:
        granted = conn.execute(sql.claim, params).fetchone()
        if granted is not None:
            return int(granted[0])
        row = conn.execute(sql.holder_of, (run,)).fetchone()
        if row is None or row[0] is None or not holder_is_dead(row[0]):
            return None  # unknown run, or another live holder
        # Taken over only if the claim still names the holder we found dead (compare-and-set).
        taken = conn.execute(sql.claim_from, {**params, "old": row[0]}).fetchone()
        return None if taken is None else int(taken[0])

    return op


def renew(sql: Sql, run: str, fence: Fence, ttl_ms: int, now_ms: int) -> Op[bool]:
    stmt = sql.renew
    params = {"until": now_ms + ttl_ms, "run": run, "holder": fence.holder, "token": fence.token}
    return lambda conn: conn.execute(stmt, params).rowcount == 1


def release(sql: Sql, run: str, holder: str, token: int | None) -> Op[int]:
    stmt = sql.release if token is None else sql.release_fenced
    params = (run, holder) if token is None else (run, holder, token)
    return lambda conn: conn.execute(stmt, params).rowcount


def deliver(sql: Sql, token: str, value: str | None, v: int | None, now_ms: int) -> Op[str | None]:
    """Three statements in one write transaction (run it isolated, so a failure undoes them all): the park is
    found, the entry stored at its path unless one is there, and the run unparked — nothing another writer can
    interleave with."""
    def op(conn: sqlite3.Connection) -> str | None:
        row = conn.execute(sql.parked_on, (token,)).fetchone()
        if row is None:
            return None
        record = record_from_row(row)
        assert record.parked is not None  # parked_on selects parked runs with a token
        entry = Entry(record.parked.path, "step", value, v, None, None)
        stored = conn.execute(sql.append, (record.run, entry.path, "step", None, None, value, v, checksum(entry),
                                           now_ms))  # the delivery's time: this store's clock
        if stored.fetchone() is None:
            return None  # another delivery stored its payload first
        conn.execute(sql.unpark, (now_ms, record.run))
        return record.run

    return op


def truncate(sql: Sql, run: str, seq: int) -> Op[int]:
    """Delete the run's entries below ``seq`` (two statements: run it isolated)."""
    def op(conn: sqlite3.Connection) -> int:
        # Remember the greatest seq being deleted, so later appends never reuse a number.
        conn.execute(sql.raise_floor, (run, seq))
        return int(conn.execute(sql.truncate, (run, seq)).rowcount)

    return op
