"""The SQLite journal's reads, each an operation of a connection (reference §7 "Postgres journal", mirrored).

The store runs them on a pooled connection — in WAL a reader sees the last commit and never waits for the
writer — or, while one of its transactions is ambient, on that transaction's connection, so that a read
inside it sees what was appended inside it (spec §8.2; :mod:`telo.journal.sqlite_tx`). Nothing here writes.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any

from telo.journal import paging
from telo.journal.claims import holder_is_dead
from telo.journal.model import Entry, RunFilter, RunPage, RunRecord
from telo.journal.sqlite_group import Op
from telo.journal.sqlite_rows import RECORD_SELECT, entry_from_row, record_from_row
from telo.journal.sqlite_schema import Sql

# The runs a status read asks for with one statement (well inside SQLite's limit on bound parameters).
_STATUS_CHUNK = 500
# Due runs: (run, due_at) of the unclaimed and lapsed ones; (run, due_at, holder) of the live-by-time claims.
DueCandidates = tuple[list[Any], list[Any]]


def run_record(sql: Sql, run: str) -> Op[RunRecord | None]:
    def op(conn: sqlite3.Connection) -> RunRecord | None:
        row = conn.execute(sql.select_run, (run,)).fetchone()
        return None if row is None else record_from_row(row)

    return op


def runs_of_queue(sql: Sql, queue: str) -> Op[list[RunRecord]]:
    """``Store.runs_of_queue``: the running and parked runs of ``queue`` (its partial index)."""
    statement = (f"SELECT {RECORD_SELECT} FROM {sql.runs} WHERE queue = ? AND status IN ('running', 'parked') "
                 "ORDER BY run")

    def op(conn: sqlite3.Connection) -> list[RunRecord]:
        return [record_from_row(row) for row in conn.execute(statement, (queue,))]

    return op


def statuses(sql: Sql, runs: list[str]) -> Op[dict[str, str]]:
    """The status of each of ``runs`` that exists."""
    table = sql.runs

    def op(conn: sqlite3.Connection) -> dict[str, str]:
        found: dict[str, str] = {}
        for i in range(0, len(runs), _STATUS_CHUNK):
            chunk = runs[i:i + _STATUS_CHUNK]
            marks = ", ".join("?" * len(chunk))
            found.update(conn.execute(f"SELECT run, status FROM {table} WHERE run IN ({marks})", chunk))
        return found

    return op


def answer_statuses(asks: dict[str, list[asyncio.Future[str | None]]],
                    read: Callable[[list[str]], dict[str, str]]) -> None:
    """Settle the status futures of one loop iteration with ONE read (``SqliteStore.status_async``); should the
    read fail, every asker gets its error."""
    try:
        found = read(list(asks))
    except BaseException as exc:
        for futures in asks.values():
            for future in futures:
                if not future.done():
                    future.set_exception(exc)
        if not isinstance(exc, Exception):
            raise
        return
    for run, futures in asks.items():
        for future in futures:
            if not future.done():
                future.set_result(found.get(run))


def parked_on(sql: Sql, token: str) -> Op[RunRecord | None]:
    stmt = sql.parked_on

    def op(conn: sqlite3.Connection) -> RunRecord | None:
        row = conn.execute(stmt, (token,)).fetchone()
        return None if row is None else record_from_row(row)

    return op


def due_candidates(sql: Sql, now_ms: int, limit: int) -> Op[DueCandidates]:
    """reference §7 dueRuns, with the claim condition split out: the free runs, and the live-by-time claims
    (:func:`due_order` keeps those whose holder is dead)."""
    def op(conn: sqlite3.Connection) -> DueCandidates:
        free = conn.execute(sql.due_free, {"now": now_ms, "limit": limit}).fetchall()
        claimed = conn.execute(sql.due_claimed, {"now": now_ms}).fetchall()
        return free, claimed

    return op


def due_order(candidates: DueCandidates, limit: int) -> list[str]:
    """The due runs, oldest due first (NULL first): the free ones, and those claimed by a holder that died on
    this host (probed outside the read, off its connection)."""
    free, claimed = candidates
    dead: dict[str, bool] = {}  # few distinct holders (one per process): probe each once
    due = {run: due_at for run, due_at in free}
    for run, due_at, holder in claimed:
        if holder not in dead:
            dead[holder] = holder_is_dead(holder)
        if dead[holder]:
            due[run] = due_at
    ordered = sorted(due.items(), key=lambda rd: (rd[1] is not None, rd[1] or 0, rd[0]))
    return [run for run, _ in ordered[:limit]]


def runs_page(sql: Sql, flt: RunFilter) -> Op[RunPage]:
    """One page of runs, newest first (:mod:`telo.journal.paging`)."""
    params: dict[str, Any] = {"status": flt.status, "workflow": flt.workflow, "since": flt.since,
                              "limit": flt.limit + 1}
    if flt.after is not None:
        params["after_created"], params["after_run"] = paging.decode_cursor(flt.after)
    stmt = sql.list_runs(flt.status is not None, flt.workflow is not None, flt.since is not None,
                         flt.after is not None)

    def op(conn: sqlite3.Connection) -> RunPage:
        runs = [record_from_row(r) for r in conn.execute(stmt, params).fetchall()]
        page, more = runs[: flt.limit], len(runs) > flt.limit
        return RunPage(page, paging.encode_cursor(page[-1]) if more and page else None)

    return op


def mark(sql: Sql, run: str) -> Op[tuple[int, int]]:
    """:meth:`Store.journal_mark` from the (run, seq) index, no entry decoded."""
    stmt = sql.entry_mark

    def op(conn: sqlite3.Connection) -> tuple[int, int]:
        count, last = conn.execute(stmt, (run,)).fetchone()
        return int(count), int(last)

    return op


def entries(sql: Sql, run: str) -> Op[list[Entry]]:
    """The run's entries in seq order, each verified (:func:`~telo.journal.sqlite_rows.entry_from_row`)."""
    stmt = sql.select_entries

    def op(conn: sqlite3.Connection) -> list[Entry]:
        return [entry_from_row(r, run) for r in conn.execute(stmt, (run,)).fetchall()]

    return op
