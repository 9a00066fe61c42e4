"""The SQLite journal: one file, WAL, durable commits shared by many runs (ARCHITECTURE §3-§4; reference §7).

The tables mirror the PostgreSQL journal (:mod:`telo.journal.sqlite_schema`); the semantics are the store
protocol's (:mod:`telo.journal.store`), held to the memory store's answers by the conformance suite.

- **Writes** go through one writer thread per store that commits whatever is queued in one transaction
  (:mod:`telo.journal.group_commit`, :mod:`telo.journal.sqlite_writer`). ``synchronous=FULL`` by default, so
  an acknowledged append survives a power loss.
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
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, TypeVar
from weakref import finalize

from telo.clock import SYSTEM_CLOCK, Clock
from telo.journal import cancels, keyed, sqlite_claims
from telo.journal import sqlite_reads as reads
from telo.journal import sqlite_writes as writes
from telo.journal.chain import WriteChain
from telo.journal.claims import Fence
from telo.journal.columns import TargetTexts
from telo.journal.group_commit import GroupCommitWriter, WriterStats
from telo.journal.model import Admission, AdmitResult, Claim, Entry, Outcome, Parked, RunFilter, RunPage, RunRecord
from telo.journal.queues import QueueLimits
from telo.journal.sqlite_admit_grant import AdmitGrantOp, SqliteAdmitGranted, admit_grant_group
from telo.journal.sqlite_append import AppendOp, SeqBases, append_group
from telo.journal.sqlite_connect import check_options, connect
from telo.journal.sqlite_group import Op, savepoint
from telo.journal.sqlite_keyed import KeyedAdmitOp
from telo.journal.sqlite_lifecycle import AdmitOp, CompleteOp, admit_group, complete_group
from telo.journal.sqlite_migrate import create_schema
from telo.journal.sqlite_open import unopenable
from telo.journal.sqlite_queue_overrides import SqliteQueueOverrides
from telo.journal.sqlite_queue_reads import SqliteQueueReads
from telo.journal.sqlite_rows import error_json, reasons_json
from telo.journal.sqlite_schema import Sql
from telo.journal.sqlite_tx import Pool, SqliteTransaction, ambient_of, lifecycle_refused, open_transaction
from telo.journal.sqlite_writer import sqlite_writer
from telo.journal.store import GroupCommitStore, Store, StoreTransaction

T = TypeVar("T")


def _shutdown(writer: GroupCommitWriter, pool: Pool) -> None:
    writer.close()
    pool.close()


class SqliteStore(SqliteAdmitGranted, SqliteQueueReads, SqliteQueueOverrides, Store, GroupCommitStore):
    """A journal in one SQLite file (see the module docstring); its writes queued from an event loop share the
    group commit (:class:`telo.journal.store.GroupCommitStore`).

    The store decides where each operation runs — a read on the pool (:mod:`telo.journal.sqlite_reads`), a
    write through the writer, grouped (:mod:`telo.journal.sqlite_append`, :mod:`telo.journal.sqlite_lifecycle`)
    or not (:mod:`telo.journal.sqlite_writes`), an entry write or a read inside the ambient transaction.
    """

    kind = "sqlite"
    inline_reads = True  # a WAL read on a pooled connection, which never waits for the writer

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
        try:
            conn = self._connect()
            try:
                create_schema(conn, self._sql, self.path)
            except BaseException:
                conn.close()
                raise
        except sqlite3.DatabaseError as exc:  # a directory, a text file, a damaged journal: say which
            diagnosis = unopenable(self.path, exc)
            if diagnosis is None:
                raise
            raise diagnosis from exc
        self._seqs = SeqBases()
        # The order groups run in within a batch: a run's admission, its entries, its completion (queued starts
        # last: the batch's completions free slots first). Any other operation may write entries unseen by the seq
        # bases: they are forgotten before it runs.
        self._writer = sqlite_writer(
            conn, f"telo-sqlite-writer:{os.path.basename(self.path)}",
            groups=((AdmitOp, admit_group), (AppendOp, append_group), (CompleteOp, complete_group),
                    (AdmitGrantOp, admit_grant_group)),
            after_begin=self._seqs.sync, before_other=self._seqs.clear, after_failure=self._seqs.clear,
            path=self.path,
        )
        self._targets = TargetTexts()
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

    # this store's innermost ambient transaction, if any: the function itself as the method (appends ask
    # every time, and a wrapper would cost them a call)
    _ambient = ambient_of

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

    def _lifecycle(self, what: str, fn: Op[T], *, isolated: bool = False) -> T:
        """A run-lifecycle write: always through the writer, never inside an ambient transaction.
        ``isolated`` (a SAVEPOINT around it) only for one of several statements: one is all or nothing."""
        if self._ambient() is not None:
            raise lifecycle_refused(what)
        return self._writer.call(fn, isolated=isolated)

    def _lifecycle_async(self, what: str, fn: Op[T]) -> asyncio.Future[T]:
        """:meth:`_lifecycle` for a caller on an event loop (on its thread): the operation is queued for the
        group commit with an asyncio future, rather than run on a thread that blocks until its commit.

        Why (benchmarks/durable.py): every run admits, claims and completes; on a worker thread each of those
        cost two thread hand-offs and a blocked thread, and the executor's thread count capped how many of
        them one group commit could take. (Every lifecycle write served so is one statement, or an UPDATE
        then a read: all or nothing without a SAVEPOINT.)
        """
        if self._ambient() is not None:
            raise lifecycle_refused(what)
        return self._writer.submit_async(fn, isolated=False)

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
        if admission.keyed:  # decided by its queue's key, alone under a SAVEPOINT (issue 16 step 4)
            op = KeyedAdmitOp(self._sql, admission, self._clock.now_ms())
            return keyed.noticed(self._lifecycle("admit", op, isolated=True))
        # one INSERT OR IGNORE, then a read
        return self._lifecycle("admit", AdmitOp(self._sql, admission, self._clock.now_ms(), claim, self._seqs))

    def admit_async(self, admission: Admission, *, claim: Claim | None = None) -> asyncio.Future[AdmitResult]:
        if admission.keyed:
            if self._ambient() is not None:
                raise lifecycle_refused("admit")
            op = KeyedAdmitOp(self._sql, admission, self._clock.now_ms())
            return keyed.notice_when_done(self._writer.submit_async(op, isolated=True))
        return self._lifecycle_async("admit", AdmitOp(self._sql, admission, self._clock.now_ms(), claim, self._seqs))

    def read_run(self, run: str) -> RunRecord | None:
        return self._read(reads.run_record(self._sql, run))

    def read_statuses(self, runs: list[str]) -> dict[str, str]:
        """The status of each of ``runs`` that exists, read at once (the cancel checks of many runs)."""
        return self._read(reads.statuses(self._sql, runs))

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
        reads.answer_statuses(self._status_asks.pop(loop, {}), self.read_statuses)

    def complete(self, run: str, outcome: Outcome, *, chain: WriteChain | None = None,
                 fence: Fence | None = None) -> RunRecord:
        """``chain``: the execution's deferred appends (telo.journal.chain) — the completion commits only if
        every one of them did; queued after them, it needs no wait for them first."""
        record = self._lifecycle("complete", self._complete_op(run, outcome, chain, fence))
        if outcome.status == "cancelled":
            cancels.notice()
        return record

    def complete_async(self, run: str, outcome: Outcome, *, chain: WriteChain | None = None,
                       fence: Fence | None = None) -> asyncio.Future[RunRecord]:
        future = self._lifecycle_async("complete", self._complete_op(run, outcome, chain, fence))
        if outcome.status == "cancelled":
            cancels.notice(future)
        return future

    def _complete_op(self, run: str, o: Outcome, chain: WriteChain | None, fence: Fence | None) -> CompleteOp:
        params = (o.status, o.result, o.result_v, error_json(o.error), o.collapsed_regions,
                  reasons_json(o.collapse_reasons), o.replayed_steps, self._clock.now_ms(), run)
        return CompleteOp(self._sql, run, params, chain, fence, self._seqs)

    def park(self, run: str, parked: Parked, *, chain: WriteChain | None = None,
             fence: Fence | None = None) -> RunRecord:
        return self._lifecycle("park", writes.park(self._sql, run, parked, self._clock.now_ms(), chain, fence))

    def park_async(self, run: str, parked: Parked, *, chain: WriteChain | None = None,
                   fence: Fence | None = None) -> asyncio.Future[RunRecord]:
        return self._lifecycle_async("park", writes.park(self._sql, run, parked, self._clock.now_ms(), chain, fence))

    def unpark(self, run: str) -> bool:
        return self._lifecycle("unpark", writes.unpark(self._sql, run, self._clock.now_ms()))

    def unpark_async(self, run: str) -> asyncio.Future[bool]:
        return self._lifecycle_async("unpark", writes.unpark(self._sql, run, self._clock.now_ms()))

    def update_run(self, run: str, *, fence: Fence | None = None, **changes: Any) -> RunRecord:
        op = writes.record_update(self._sql, run, changes, self._clock.now_ms(), fence)
        return self._lifecycle("record update", op)

    def update_run_async(self, run: str, *, fence: Fence | None = None, **changes: Any) -> asyncio.Future[RunRecord]:
        op = writes.record_update(self._sql, run, changes, self._clock.now_ms(), fence)
        return self._lifecycle_async("record update", op)

    def read_run_async(self, run: str) -> asyncio.Future[RunRecord | None]:
        """Read at once (a WAL read never waits for the writer); the future is done on return."""
        future: asyncio.Future[RunRecord | None] = asyncio.get_running_loop().create_future()
        future.set_result(self.read_run(run))
        return future

    def run_parked_on(self, token: str) -> RunRecord | None:
        return self._read(reads.parked_on(self._sql, token))

    def due_runs(self, now_ms: int, limit: int) -> list[str]:
        """reference §7 dueRuns; a live-by-time claim counts as free when its holder died on this host."""
        return reads.due_order(self._read(reads.due_candidates(self._sql, now_ms, limit)), limit)

    def list_runs(self, flt: RunFilter) -> RunPage:
        return self._read(reads.runs_page(self._sql, flt))

    def runs_of_queue(self, queue: str) -> list[RunRecord]:
        return self._read(reads.runs_of_queue(self._sql, queue))

    # --- claims --------------------------------------------------------------------------------------------

    def claim(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> int | None:
        return self._lifecycle("claim", writes.claim(self._sql, run, holder, ttl_ms, now_ms))

    def claim_async(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> asyncio.Future[int | None]:
        return self._lifecycle_async("claim", writes.claim(self._sql, run, holder, ttl_ms, now_ms))

    def claim_due(self, holder: str, ttl_ms: int, now_ms: int, limit: int, *, only: Sequence[str] | None = None,
                  workflows: Sequence[str] | None = None, skip: Collection[str] = (),
                  queues: Mapping[str, QueueLimits] | None = None) -> list[RunRecord]:
        """Picked, granted and started in one write transaction (:mod:`telo.journal.sqlite_claims`)."""
        if limit <= 0:
            return []
        op = sqlite_claims.claim_due(self._sql, holder, ttl_ms, now_ms, limit, only=only, workflows=workflows,
                                     skip=skip, queues=queues)
        return self._lifecycle("claim", op)

    def claim_due_async(self, holder: str, ttl_ms: int, now_ms: int, limit: int, *,
                        only: Sequence[str] | None = None, workflows: Sequence[str] | None = None,
                        skip: Collection[str] = (),
                        queues: Mapping[str, QueueLimits] | None = None) -> asyncio.Future[list[RunRecord]]:
        op = sqlite_claims.claim_due(self._sql, holder, ttl_ms, now_ms, max(limit, 0), only=only,
                                     workflows=workflows, skip=skip, queues=queues)
        return self._lifecycle_async("claim", op)

    def renew(self, run: str, fence: Fence, ttl_ms: int, now_ms: int) -> bool:
        return self._lifecycle("renew", writes.renew(self._sql, run, fence, ttl_ms, now_ms))

    def renew_many(self, claims: Sequence[tuple[str, Fence, int]]) -> list[bool]:
        return self._lifecycle("renew", sqlite_claims.renew_many(self._sql, claims)) if claims else []

    def release(self, run: str, holder: str, token: int | None = None) -> None:
        self._lifecycle("release", writes.release(self._sql, run, holder, token))

    # --- entries -------------------------------------------------------------------------------------------

    def append(self, run: str, entry: Entry, *, fence: Fence | None = None) -> Entry:
        return self._entry_write(self._append_op(run, entry, fence=fence))

    def deliver(self, token: str, value: str | None, v: int | None) -> str | None:
        """One writer operation (one write transaction) nothing another writer can interleave with."""
        return self._lifecycle("deliver", writes.deliver(self._sql, token, value, v, self._clock.now_ms()),
                               isolated=True)  # three statements: a failure undoes them all

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
        # Stamped as the store receives it (Entry.at), unless it carries its time (a fork's copy): one clock read
        # per append, no statement more.
        at = entry.at if entry.at is not None else self._clock.now_ms()
        return AppendOp(self._sql, run, entry, self._targets.text(entry.target), at, chain, self._seqs, fence)

    def read_entries(self, run: str) -> list[Entry]:
        return self._read(reads.entries(self._sql, run))

    def journal_mark(self, run: str) -> tuple[int, int]:
        return self._read(reads.mark(self._sql, run))

    def truncate_before(self, run: str, seq: int) -> int:
        return self._entry_write(writes.truncate(self._sql, run, seq), isolated=True)

    # --- transactions ----------------------------------------------------------------------------------

    def transaction(self) -> AbstractContextManager[SqliteTransaction]:
        """Open a transaction that appends and reads in this context join (spec §8.2; module docstring).

        Commits when the block ends normally, rolls back (discarding the entries appended inside) when it
        raises — including a suspension. Nested, it is a SAVEPOINT of the enclosing transaction.
        """
        return open_transaction(self, self._pool)

    def _transaction_open(self, tx: StoreTransaction) -> bool:
        return isinstance(tx, SqliteTransaction) and tx.store is self and tx.open
