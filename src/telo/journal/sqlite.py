"""The SQLite journal: one file, WAL, durable commits shared by many runs (ARCHITECTURE §3-§4; reference §7).

The tables mirror the PostgreSQL journal (:mod:`telo.journal.sqlite_schema`); the semantics are the store
protocol's (:mod:`telo.journal.store`), held to the memory store's answers by the conformance suite.

- **Writes** go through one writer thread per store that commits whatever is queued in one transaction
  (:mod:`telo.journal.sqlite_writer`, group commit). ``synchronous=FULL`` by default, so an acknowledged
  append survives a power loss.
- **Reads** use a small pool of connections; in WAL they read the last commit and never block the writer.
- **Several processes** may share one file: every write transaction is ``BEGIN IMMEDIATE`` (SQLite's one
  write lock, waited for up to the busy timeout), appends are first-writer-wins on the (run, path) key, and
  claims are conditional UPDATEs (reference §7 claimRun), a dead local holder's claim taken over by a
  compare-and-set on its holder text (reference §6 "Claims", :mod:`telo.journal.claims`).
- **Transactions** (spec §8.2): :meth:`SqliteStore.transaction` holds ``BEGIN IMMEDIATE`` on a dedicated
  connection and makes it ambient in the current context; appends and reads in that context join it, so a
  rollback discards their entries. Lifecycle writes (admit, complete, park, claim, ...) stay outside any
  transaction as in the reference; SQLite has one write lock per file, so such a call made *inside* the
  transaction's own context could only wait for itself — it is refused at once instead.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import fields
from functools import partial
from typing import Any, TypeVar
from weakref import finalize

from telo.clock import SYSTEM_CLOCK, Clock
from telo.errors import Code, JournalError
from telo.journal import cancels, paging
from telo.journal.chain import WriteChain
from telo.journal.claims import Fence, holder_is_dead
from telo.journal.integrity import checksum
from telo.journal.memory import unknown_run
from telo.journal.model import (
    Admission,
    AdmitResult,
    Claim,
    Entry,
    Outcome,
    Parked,
    RunFilter,
    RunPage,
    RunRecord,
)
from telo.journal.sqlite_append import AppendOp, SeqBases, append_group, check_claim
from telo.journal.sqlite_group import savepoint
from telo.journal.sqlite_lifecycle import AdmitOp, CompleteOp, admit_group, complete_group
from telo.journal.sqlite_schema import (
    RECORD_SELECT,
    Sql,
    check_options,
    columns_for,
    connect,
    create_schema,
    entry_from_row,
    error_json,
    json_text,
    reasons_json,
    record_from_row,
)
from telo.journal.sqlite_tx import AMBIENT, SAVEPOINTS, Pool, SqliteTransaction, finish
from telo.journal.sqlite_writer import GroupCommitWriter, WriterStats
from telo.journal.store import Store, StoreTransaction

T = TypeVar("T")
Op = Callable[[sqlite3.Connection], T]

# lifecycle_async: while set, _lifecycle submits its operation and returns the future instead of waiting for it.
_SUBMITTING: ContextVar[bool] = ContextVar("telo_sqlite_submitting", default=False)
# The lifecycle writes lifecycle_async serves: each returns its _lifecycle result as is.
_ASYNC_LIFECYCLE = frozenset({"admit", "claim", "complete", "park", "unpark"})

# update_run takes RunRecord field names; updated_at is the store's to set (as in the memory store).
_RECORD_FIELDS = {f.name for f in fields(RunRecord)} - {"run", "updated_at", "claim", "fence"}


def _shutdown(writer: GroupCommitWriter, pool: Pool) -> None:
    writer.close()
    pool.close()


class SqliteStore(Store):
    """A journal in one SQLite file (see the module docstring)."""

    kind = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "FULL",
        clock: Clock = SYSTEM_CLOCK,
        busy_timeout_ms: int = 30000,
        table: str = "telo_durable",
    ) -> None:
        self.path = os.fspath(path)
        self.synchronous = check_options(self.path, synchronous)
        self._sql = Sql.for_prefix(table)
        self._clock = clock
        self._busy_timeout_ms = busy_timeout_ms
        conn = self._connect()
        try:
            create_schema(conn, self._sql, self.path)
        except BaseException:
            conn.close()
            raise
        self._seqs = SeqBases()
        # The order groups run in within a batch: a run's admission, its entries, then its completion. Any
        # other operation may write entries unseen by the seq bases: they are forgotten before it runs.
        self._writer = GroupCommitWriter(
            conn, f"telo-sqlite-writer:{os.path.basename(self.path)}",
            groups=((AdmitOp, admit_group), (AppendOp, append_group), (CompleteOp, complete_group)),
            after_begin=self._seqs.sync, before_other=self._seqs.clear, after_failure=self._seqs.clear,
        )
        self._targets: dict[tuple[tuple[str, str], ...], str] = {}
        # status_async: per event loop, the runs whose status was asked for in this loop iteration
        self._status_asks: dict[asyncio.AbstractEventLoop, dict[str, list[asyncio.Future[str | None]]]] = {}
        # The pool must not reference self, or the finalizer below would keep the store alive forever.
        self._pool = Pool(partial(connect, self.path, synchronous=self.synchronous,
                                   busy_timeout_ms=busy_timeout_ms))
        # A store dropped without close() still stops its thread and closes its connections.
        self._finalizer = finalize(self, _shutdown, self._writer, self._pool)

    def _connect(self) -> sqlite3.Connection:
        return connect(self.path, synchronous=self.synchronous, busy_timeout_ms=self._busy_timeout_ms)

    @property
    def stats(self) -> WriterStats:
        """Group-commit counters: ``commits`` (of which ``inline_commits``), ``ops``, ``max_batch``,
        ``failed_ops``, ``failed_batches``."""
        return self._writer.stats

    def close(self) -> None:
        """Finish every queued write, stop the writer thread and close the connections. Idempotent."""
        self._finalizer()

    def __enter__(self) -> SqliteStore:
        return self

    # --- plumbing: where a call runs ---------------------------------------------------------------------

    def _ambient(self) -> SqliteTransaction | None:
        open_txs = AMBIENT.get()
        if not open_txs:  # the common case, kept cheap: appends call this every time
            return None
        for tx in reversed(open_txs):
            if tx.store is self and tx.open:
                return tx
        return None

    def _read(self, fn: Op[T]) -> T:
        tx = self._ambient()
        if tx is not None:
            with tx.lock:
                return fn(tx.connection)
        conn = self._pool.take()
        try:
            return fn(conn)
        finally:
            self._pool.give(conn)

    def _lifecycle(self, what: str, fn: Op[T], *, isolated: bool = True) -> T:
        """A run-lifecycle write: always through the writer, never inside an ambient transaction."""
        if self._ambient() is not None:
            raise JournalError(
                Code.JOURNAL_IN_TRANSACTION,
                f"{what} cannot run inside an open SQLite journal transaction: lifecycle writes commit on "
                "their own, and SQLite's one write lock is held by that transaction",
                hint="make the call before the transaction opens or after it ends",
            )
        if _SUBMITTING.get():  # lifecycle_async: the caller awaits the future
            return self._writer.submit_async(fn, isolated=isolated)  # type: ignore[return-value]
        return self._writer.call(fn, isolated=isolated)

    def lifecycle_async(self, method: str, *args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        """``admit``, ``claim``, ``complete``, ``park`` or ``unpark`` for a caller on an event loop (called on
        its thread): the same operation, submitted to the group commit with an asyncio future
        rather than run on a thread that blocks until its commit.

        Why (benchmarks/durable.py): every run admits, claims and completes; on a worker thread each of those
        cost two thread hand-offs and a blocked thread, and the executor's thread count capped how many of
        them one group commit could take.
        """
        if method not in _ASYNC_LIFECYCLE:
            raise ValueError(f"not an asynchronous lifecycle write: {method!r}")
        token = _SUBMITTING.set(True)
        try:
            future: asyncio.Future[Any] = getattr(self, method)(*args, **kwargs)
        finally:
            _SUBMITTING.reset(token)
        return future

    def _in_transaction(self, tx: SqliteTransaction, fn: Op[T]) -> T:
        """Run an entry write on the ambient transaction's connection, undoing only it should it raise."""
        with tx.lock, savepoint(tx.connection, "entry"):
            return fn(tx.connection)

    def _entry_write(self, fn: Op[T], *, isolated: bool = False) -> T:
        """An entry write: joins the ambient transaction if there is one, else goes to the group commit.

        An append needs no SAVEPOINT in a batch: it writes with one statement, all or nothing.
        """
        tx = self._ambient()
        if tx is not None:
            return self._in_transaction(tx, fn)
        return self._writer.call(fn, isolated=isolated)

    # --- runs ----------------------------------------------------------------------------------------------

    def admit(self, admission: Admission, *, claim: Claim | None = None) -> AdmitResult:
        """``claim``: the new run's first claim, written with its row (a run started by this process is
        executed by it; SQLite only). A run that already exists keeps its claim, whatever it is."""
        op = AdmitOp(self._sql, admission, self._clock.now_ms(), claim, self._seqs)
        return self._lifecycle("admit", op, isolated=False)  # one INSERT OR IGNORE, then a read

    def read_run(self, run: str) -> RunRecord | None:
        sql = self._sql

        def op(conn: sqlite3.Connection) -> RunRecord | None:
            row = conn.execute(sql.select_run, (run,)).fetchone()
            return None if row is None else record_from_row(row)

        return self._read(op)

    def read_statuses(self, runs: list[str]) -> dict[str, str]:
        """The status of each of ``runs`` that exists, read at once (the cancel checks of many runs)."""
        table = self._sql.runs

        def op(conn: sqlite3.Connection) -> dict[str, str]:
            found: dict[str, str] = {}
            for i in range(0, len(runs), 500):
                chunk = runs[i:i + 500]
                marks = ", ".join("?" * len(chunk))
                found.update(conn.execute(f"SELECT run, status FROM {table} WHERE run IN ({marks})", chunk))
            return found

        return self._read(op)

    def status_async(self, run: str) -> asyncio.Future[str | None]:
        """The run's status (None if unknown), for a caller on an event loop (called on its thread).

        Every durable step checks its run's status before its effect (the cancel check). The checks asked for
        in one loop iteration share ONE read, made at the start of the next iteration on the loop's thread:
        with a hundred runs in flight, a read each — or a thread hand-off each — was a large share of the
        CPU a step costs (benchmarks/durable.py). Inside an ambient transaction it reads at once.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()
        if self._ambient() is not None:
            record = self.read_run(run)
            future.set_result(None if record is None else record.status)
            return future
        asks = self._status_asks.get(loop)
        if asks is None:
            asks = self._status_asks[loop] = {}
            loop.call_soon(self._answer_statuses, loop)
        asks.setdefault(run, []).append(future)
        return future

    def _answer_statuses(self, loop: asyncio.AbstractEventLoop) -> None:
        asks = self._status_asks.pop(loop, {})
        try:
            found = self.read_statuses(list(asks))
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

    def _update(self, what: str, run: str, stmt: str, params: tuple[Any, ...],
                chain: WriteChain | None = None, fence: Fence | None = None) -> RunRecord:
        """One UPDATE of the run's row; ``fence``: ``stmt`` ends with the fence's condition (holder, token)."""
        returning = f"{stmt} RETURNING {RECORD_SELECT}"  # the updated record, without a read after it
        sql = self._sql
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

        # One UPDATE, all or nothing (nothing written when it raises): no SAVEPOINT needed.
        return self._lifecycle(what, op, isolated=False)

    def complete(self, run: str, outcome: Outcome, *, chain: WriteChain | None = None,
                 fence: Fence | None = None) -> RunRecord:
        """``chain``: the execution's deferred appends (telo.journal.chain) — the completion commits only if
        every one of them did; queued after them, it needs no wait for them first."""
        o = outcome
        params = (o.status, o.result, o.result_v, error_json(o.error), o.collapsed_regions,
                  reasons_json(o.collapse_reasons), o.replayed_steps, self._clock.now_ms(), run)
        op = CompleteOp(self._sql, run, params, chain, fence, self._seqs)
        record: RunRecord = self._lifecycle("complete", op, isolated=False)
        if o.status == "cancelled":
            cancels.notice(record)
        return record

    def park(self, run: str, parked: Parked, *, chain: WriteChain | None = None,
             fence: Fence | None = None) -> RunRecord:
        p = parked
        params = (p.path, p.resource, p.token, p.at, p.reason, p.at, self._clock.now_ms(), run)
        fence = fence if fence is not None or chain is None else chain.fence
        stmt = self._sql.park if fence is None else self._sql.park_fenced
        return self._update("park", run, stmt, params, chain, fence)

    def unpark(self, run: str) -> bool:
        stmt, params = self._sql.unpark, (self._clock.now_ms(), run)
        return self._lifecycle("unpark", lambda conn: conn.execute(stmt, params).rowcount > 0, isolated=False)

    def update_run(self, run: str, *, fence: Fence | None = None, **changes: Any) -> RunRecord:
        bad = set(changes) - _RECORD_FIELDS
        if bad:
            raise TypeError(f"not run record fields: {sorted(bad)}")
        cols: list[tuple[str, Any]] = []
        for name, value in changes.items():
            cols += columns_for(name, value)
        cols.append(("updated_at", self._clock.now_ms()))
        stmt = self._sql.update([c for c, _ in cols], fenced=fence is not None)
        return self._update("record update", run, stmt, (*(v for _, v in cols), run), fence=fence)

    def run_parked_on(self, token: str) -> RunRecord | None:
        stmt = self._sql.parked_on

        def op(conn: sqlite3.Connection) -> RunRecord | None:
            row = conn.execute(stmt, (token,)).fetchone()
            return None if row is None else record_from_row(row)

        return self._read(op)

    def due_runs(self, now_ms: int, limit: int) -> list[str]:
        """reference §7 dueRuns; a live-by-time claim counts as free when its holder died on this host."""
        sql = self._sql

        def op(conn: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
            free = conn.execute(sql.due_free, {"now": now_ms, "limit": limit}).fetchall()
            claimed = conn.execute(sql.due_claimed, {"now": now_ms}).fetchall()
            return free, claimed

        free, claimed = self._read(op)
        dead: dict[str, bool] = {}  # few distinct holders (one per process): probe each once
        due = {run: due_at for run, due_at in free}
        for run, due_at, holder in claimed:
            if holder not in dead:
                dead[holder] = holder_is_dead(holder)
            if dead[holder]:
                due[run] = due_at
        ordered = sorted(due.items(), key=lambda rd: (rd[1] is not None, rd[1] or 0, rd[0]))
        return [run for run, _ in ordered[:limit]]

    def list_runs(self, flt: RunFilter) -> RunPage:
        params: dict[str, Any] = {"status": flt.status, "workflow": flt.workflow, "since": flt.since,
                                  "limit": flt.limit + 1}
        if flt.after is not None:
            params["after_created"], params["after_run"] = paging.decode_cursor(flt.after)
        stmt = self._sql.list_runs(flt.status is not None, flt.workflow is not None, flt.since is not None,
                                   flt.after is not None)
        rows = self._read(lambda conn: conn.execute(stmt, params).fetchall())
        runs = [record_from_row(r) for r in rows]
        page, more = runs[: flt.limit], len(runs) > flt.limit
        return RunPage(page, paging.encode_cursor(page[-1]) if more and page else None)

    # --- claims --------------------------------------------------------------------------------------------

    def claim(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> int | None:
        sql = self._sql
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

        return self._lifecycle("claim", op, isolated=False)  # each UPDATE is all or nothing on its own

    def renew(self, run: str, fence: Fence, ttl_ms: int, now_ms: int) -> bool:
        stmt = self._sql.renew
        params = {"until": now_ms + ttl_ms, "run": run, "holder": fence.holder, "token": fence.token}
        return self._lifecycle("renew", lambda conn: conn.execute(stmt, params).rowcount == 1, isolated=False)

    def release(self, run: str, holder: str, token: int | None = None) -> None:
        stmt = self._sql.release if token is None else self._sql.release_fenced
        params = (run, holder) if token is None else (run, holder, token)
        self._lifecycle("release", lambda conn: conn.execute(stmt, params).rowcount, isolated=False)

    # --- entries -------------------------------------------------------------------------------------------

    def append(self, run: str, entry: Entry, *, fence: Fence | None = None) -> Entry:
        return self._entry_write(self._append_op(run, entry, fence=fence))

    def deliver(self, token: str, value: str | None, v: int | None) -> str | None:
        """One writer operation (one write transaction): the park is found, the entry stored at its path
        unless one is there, and the run unparked — nothing another writer can interleave with."""
        sql = self._sql
        now = self._clock.now_ms()

        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(sql.parked_on, (token,)).fetchone()
            if row is None:
                return None
            record = record_from_row(row)
            assert record.parked is not None  # parked_on selects parked runs with a token
            entry = Entry(record.parked.path, "step", value, v, None, None)
            stored = conn.execute(sql.append, (record.run, entry.path, "step", None, None, value, v, checksum(entry)))
            if stored.fetchone() is None:
                return None  # another delivery stored its payload first
            conn.execute(sql.unpark, (now, record.run))
            return record.run

        return self._lifecycle("deliver", op)  # two statements: isolated, so a failure undoes both

    def submit_append(self, run: str, entry: Entry, *, fence: Fence | None = None) -> Future[Entry]:
        """:meth:`append` without blocking: the future resolves (after the durable COMMIT) to the stored entry.

        For asyncio callers: ``await asyncio.wrap_future(store.submit_append(run, entry))`` needs no thread
        per call. Inside an ambient transaction the append runs at once and the future is already done.
        """
        op = self._append_op(run, entry, fence=fence)
        tx = self._ambient()
        if tx is None:
            return self._writer.submit(op, isolated=False)
        done: Future[Entry] = Future()
        try:
            done.set_result(self._in_transaction(tx, op))
        except Exception as exc:
            done.set_exception(exc)
        return done

    def submit_append_async(self, run: str, entry: Entry, *, fence: Fence | None = None) -> asyncio.Future[Entry]:
        """:meth:`submit_append` for a caller on an event loop (called on its thread): an asyncio future,
        settled with the rest of its group-commit batch in one loop wake-up (see ``submit_async``)."""
        return self._submit_async(self._append_op(run, entry, fence=fence))

    def submit_deferred(self, run: str, entry: Entry, chain: WriteChain) -> asyncio.Future[Entry]:
        """A deferred append (telo.journal.chain): queued for the group commit like
        :meth:`submit_append_async`, refused should an earlier write of ``chain`` have failed, and breaking
        ``chain`` should it fail or find another value stored at its path. Called on the loop's thread."""
        return self._submit_async(self._append_op(run, entry, chain))

    def _submit_async(self, op: AppendOp) -> asyncio.Future[Entry]:
        tx = self._ambient()
        if tx is None:
            return self._writer.submit_async(op, isolated=False)
        done: asyncio.Future[Entry] = asyncio.get_running_loop().create_future()
        try:  # inside an ambient transaction the append runs at once
            done.set_result(self._in_transaction(tx, op))
        except Exception as exc:
            done.set_exception(exc)
        return done

    def commit_queued(self) -> bool:
        """Commit the queued writes on the calling thread if the writer thread is not at it (see
        ``GroupCommitWriter.commit_queued``); False if it is."""
        return self._writer.commit_queued()

    def _append_op(self, run: str, entry: Entry, chain: WriteChain | None = None, *,
                   fence: Fence | None = None) -> AppendOp:
        return AppendOp(self._sql, run, entry, self._target_json(entry.target), chain, self._seqs, fence)

    def _target_json(self, target: Mapping[str, str] | None) -> str | None:
        # A run journals the same few targets over and over: encode each once.
        if target is None:
            return None
        key = tuple(target.items())
        text = self._targets.get(key)
        if text is None:
            if len(self._targets) >= 4096:
                self._targets.clear()
            text = self._targets[key] = json_text(dict(target))
        return text

    def read_entries(self, run: str) -> list[Entry]:
        stmt = self._sql.select_entries
        rows = self._read(lambda conn: conn.execute(stmt, (run,)).fetchall())
        return [entry_from_row(r, run) for r in rows]

    def truncate_before(self, run: str, seq: int) -> int:
        sql = self._sql

        def op(conn: sqlite3.Connection) -> int:
            # Remember the greatest seq being deleted, so later appends never reuse a number.
            conn.execute(sql.raise_floor, (run, seq))
            return int(conn.execute(sql.truncate, (run, seq)).rowcount)

        return self._entry_write(op, isolated=True)

    # --- transactions ----------------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[SqliteTransaction]:
        """Open a transaction that appends and reads in this context join (spec §8.2; module docstring).

        Commits when the block ends normally, rolls back (discarding the entries appended inside) when it
        raises — including a suspension. Nested, it is a SAVEPOINT of the enclosing transaction.
        """
        outer = self._ambient()
        conn: sqlite3.Connection | None = None
        if outer is not None:
            name = f"tx{next(SAVEPOINTS)}"
            with outer.lock:
                outer.connection.execute(f"SAVEPOINT {name}")
            tx = SqliteTransaction(self, outer.connection, outer.lock, name)
        else:
            conn = self._pool.take()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                self._pool.give(conn)
                raise _tx_error("begin", exc) from exc
            except BaseException:
                self._pool.give(conn)
                raise
            tx = SqliteTransaction(self, conn, threading.RLock(), None)
        token = AMBIENT.set((*AMBIENT.get(), tx))
        try:
            yield tx
        except BaseException:
            tx.open = False
            with tx.lock:
                finish(tx, commit=False)
            raise
        else:
            tx.open = False
            with tx.lock:
                try:
                    finish(tx, commit=True)
                except sqlite3.Error as exc:
                    raise _tx_error("commit", exc) from exc
        finally:
            tx.open = False
            AMBIENT.reset(token)
            if conn is not None:
                self._pool.give(conn)

    def _transaction_open(self, tx: StoreTransaction) -> bool:
        return isinstance(tx, SqliteTransaction) and tx.store is self and tx.open


def _tx_error(what: str, exc: sqlite3.Error) -> JournalError:
    return JournalError(
        Code.JOURNAL_WRITE_FAILED,
        f"the SQLite journal could not {what} a transaction: {exc}",
        hint="check the disk (space, permissions) and whether another process holds the journal locked "
        "for longer than the busy timeout",
    )
