"""The PostgreSQL journal's reads (reference §7 "Postgres journal"): on a pooled connection, or on the ambient
transaction's when one is open in the calling context (spec §8.2: a ``Sql.Transaction`` body reads what it
journaled). Reads never go through the writer: they see the last commit and wait for nobody."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from telo.journal import paging
from telo.journal.claims import holder_is_dead, this_host
from telo.journal.model import Entry, RunFilter, RunPage, RunRecord
from telo.journal.postgres_queue_reads import PgQueueReads
from telo.journal.postgres_rows import db_errors, entry_from_row, record_from_row
from telo.journal.postgres_sql import PgSql

V = TypeVar("V")


class LoopReads(Generic[V]):
    """Reads of single runs asked for in one event-loop iteration, answered by ONE query on a worker thread.

    Why: a worker continuing a hundred runs reads a hundred records, and every durable step asks for its run's
    status (the cancel check); a query each, every one a thread hand-off and a turn at the pool's few
    connections, made those waits the longest part of a run's life on the worker (benchmarks/postgres.py:
    3 record reads a run took 27 ms each with 100 runs in flight)."""

    def __init__(self, read_many: Callable[[list[str]], Mapping[str, V]]) -> None:
        self._read_many = read_many
        self._asks: dict[asyncio.AbstractEventLoop, dict[str, list[asyncio.Future[V | None]]]] = {}

    def ask(self, run: str) -> asyncio.Future[V | None]:
        """The value for ``run`` (None if it has none), read with the others asked in this loop iteration."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[V | None] = loop.create_future()
        asks = self._asks.get(loop)
        if asks is None:
            asks = self._asks[loop] = {}
            loop.call_soon(self._answer, loop)
        asks.setdefault(run, []).append(future)
        return future

    def _answer(self, loop: asyncio.AbstractEventLoop) -> None:
        asks = self._asks.pop(loop, {})
        reading = loop.run_in_executor(None, self._read_many, list(asks))

        def answer(done: asyncio.Future[Mapping[str, V]]) -> None:
            error = done.exception()
            for run, futures in asks.items():
                for future in futures:
                    if future.done():
                        continue
                    if error is not None:
                        future.set_exception(error)
                    else:
                        future.set_result(done.result().get(run))

        reading.add_done_callback(answer)


class PgReads(PgQueueReads):
    """The read half of :class:`telo.journal.postgres.PostgresStore` (which provides the attributes below)."""

    _q: PgSql
    _pool: ConnectionPool[psycopg.Connection[Any]]

    def _conn(self, *, join: bool) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _one(self, query: Any, params: Mapping[str, Any] | tuple[Any, ...], *, action: str) -> dict[str, Any] | None:
        with db_errors(action), self._conn(join=True) as conn, conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(query, params).fetchone()

    def read_run(self, run: str) -> RunRecord | None:
        row = self._one(self._q.select_run, (run,), action="read a run")
        return None if row is None else record_from_row(row)

    def read_runs(self, runs: list[str]) -> dict[str, RunRecord]:
        """The records of ``runs`` that exist, read at once."""
        with db_errors("read runs"), self._conn(join=True) as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(self._q.select_runs, (runs,)).fetchall()
        return {record.run: record for record in map(record_from_row, rows)}

    def runs_of_queue(self, queue: str) -> list[RunRecord]:
        """``Store.runs_of_queue``: the running and parked runs of ``queue`` (its partial index)."""
        with db_errors("read a queue's runs"), self._conn(join=True) as conn, \
                conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(self._q.queue_runs, (queue,)).fetchall()
        return [record_from_row(row) for row in rows]

    def read_statuses(self, runs: list[str]) -> dict[str, str]:
        """The status of each of ``runs`` that exists, read at once (the cancel checks of many runs)."""
        with db_errors("read run statuses"), self._conn(join=True) as conn:
            return {str(run): str(status) for run, status in conn.execute(self._q.statuses, (runs,)).fetchall()}

    def run_parked_on(self, token: str) -> RunRecord | None:
        row = self._one(self._q.parked_on, (token,), action="find a parked run")
        return None if row is None else record_from_row(row)

    def read_entries(self, run: str) -> list[Entry]:
        with db_errors("read journal entries"), self._conn(join=True) as c, c.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(self._q.select_entries, (run,)).fetchall()
        return [entry_from_row(run, r) for r in rows]

    def read_entries_in_order(self, run: str) -> list[Entry]:
        """Under append_in_order's per-run lock: a send still to commit (inside a transaction of its sender's)
        is waited for, not missed (Store.read_entries_in_order)."""
        with db_errors("read journal entries"), self._conn(join=True) as c, c.transaction(), \
                c.cursor(row_factory=dict_row) as cur:
            cur.execute(self._q.lock_appends, (f"{self._q.channel}:{run}",))
            rows = cur.execute(self._q.select_entries, (run,)).fetchall()
        return [entry_from_row(run, r) for r in rows]

    def journal_mark(self, run: str) -> tuple[int, int]:
        with db_errors("read journal entries"), self._conn(join=True) as c:
            row = c.execute(self._q.entry_mark, (run,)).fetchone()
        return (int(row[0]), int(row[1])) if row is not None else (0, 0)

    def _dead_local_holders(self, conn: psycopg.Connection[Any], now_ms: int) -> list[str]:
        """Holders of live-looking claims that are dead processes on this host (claims.holder_is_dead).

        Only a handful of distinct holders exist (one per workflow instance and resumer), so they are
        checked in Python and handed back to SQL as a list, keeping the due query's LIMIT exact.
        """
        rows = conn.execute(self._q.dead_holder_candidates, (now_ms, f"@{this_host()}:")).fetchall()
        return [r[0] for r in rows if holder_is_dead(r[0])]

    def due_runs(self, now_ms: int, limit: int) -> list[str]:
        # A short transaction of its own: SKIP LOCKED passes over rows a concurrent sweep is looking at.
        with db_errors("look for due runs"), self._pool.connection() as conn, conn.transaction():
            dead = self._dead_local_holders(conn, now_ms)
            rows = conn.execute(self._q.due, {"now": now_ms, "dead": dead, "limit": max(limit, 0)}).fetchall()
        return [r[0] for r in rows]

    def list_runs(self, flt: RunFilter) -> RunPage:
        where: list[str] = []
        params: dict[str, Any] = {"limit": max(flt.limit, 0) + 1}
        if flt.status is not None:
            where.append("status = %(status)s")
            params["status"] = flt.status
        if flt.workflow is not None:
            where.append("workflow = %(workflow)s")
            params["workflow"] = flt.workflow
        if flt.since is not None:
            where.append("COALESCE(created_at, 0) >= %(since)s")
            params["since"] = flt.since
        if flt.after is not None:
            params["c_at"], params["c_run"] = paging.decode_cursor(flt.after)
            where.append('(COALESCE(created_at, 0), run COLLATE "C") < (%(c_at)s, %(c_run)s)')
        query = self._q.list_runs(where)
        with db_errors("list runs"), self._conn(join=True) as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(query, params).fetchall()
        records = [record_from_row(r) for r in rows]
        page, more = records[: flt.limit], len(records) > flt.limit
        return RunPage(page, paging.encode_cursor(page[-1]) if more and page else None)

