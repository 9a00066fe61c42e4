"""Group commit for the SQLite journal: one writer thread, many operations per durable COMMIT.

A durable SQLite commit costs one fsync of the WAL, whatever it holds; a runtime executing many runs at once
would pay it per step if every append committed alone. So one writer thread per store owns the write
connection: a mutating call enqueues an operation (a function of the connection) and waits on its future;
the writer takes everything queued, runs it all in one ``BEGIN IMMEDIATE … COMMIT`` and only then resolves
each future with that operation's own result (ARCHITECTURE §3 "SQLite"; how a caller learns it:
:mod:`telo.journal.sqlite_pending`). Batches form by themselves: while one commit is being fsynced, the next
operations queue up, so the batch grows with the load and a lone writer pays no added latency — nothing waits
for a batch to fill.

Guarantees:

- **durable on return** (store.py): a future resolves only after ``COMMIT`` returned;
- **isolation per operation**: an operation that raises is undone on its own (a SAVEPOINT, unless it
  declares that each of its statements leaves a consistent state) and its error goes to its own caller;
  the others commit;
- **all or nothing per batch** otherwise: if the transaction cannot begin or commit (disk full, I/O error,
  a lock held past the busy timeout), every operation of the batch fails with that error and none took effect.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from telo.errors import Code, JournalError
from telo.journal.sqlite_group import savepoint
from telo.journal.sqlite_pending import PendingOp, break_chain, settle
from telo.journal.sqlite_process import check_process, closed_error, fork_generation

T = TypeVar("T")
# Runs a group of operations together: (ok, result or error) per operation, in order. Should it raise, it
# must have left nothing of the group written (the writer then runs the operations one at a time).
GroupRunner = Callable[[sqlite3.Connection, list[Any]], list[tuple[bool, Any]]]

# A batch bigger than this gains nothing more from sharing an fsync and only delays its first callers.
MAX_BATCH: Final = 512


@dataclass(slots=True)
class WriterStats:
    """Counters for tests and benchmarks (written only while holding the connection lock)."""

    commits: int = 0  # durable COMMITs (one per batch that committed)
    inline_commits: int = 0  # of which committed by an idle-path caller on its own thread
    ops: int = 0  # operations that completed successfully
    failed_ops: int = 0  # operations that raised (their own error, or their batch's)
    failed_batches: int = 0  # batches that could not begin or commit
    max_batch: int = 0


_STOP: Final = object()


class GroupCommitWriter:
    """The writer of one store instance: a thread committing queued operations in batches.

    The connection is used only under ``_conn_lock``. The writer thread takes it for each batch; a
    synchronous caller may take it too, but only when the writer is idle — nothing queued, no batch
    running — and then commits its own operation on its own thread (``inline_when_idle``). A lone writer
    so pays a commit and no thread hand-off: waking the writer and being woken back costs two scheduler
    wake-ups (60-90 us on a small VM, a third of a durable commit). Under load nothing changes: callers
    find a batch running or operations queued, queue theirs, and the writer thread batches them. An inline
    caller never takes queued operations; :meth:`commit_queued` takes them all, under the connection lock
    like the writer thread, so whoever commits them does so in FIFO order.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        name: str,
        *,
        inline_when_idle: bool = True,
        groups: Sequence[tuple[type, GroupRunner]] = (),
        after_begin: Callable[[sqlite3.Connection], None] | None = None,
        before_other: Callable[[], None] | None = None,
        after_failure: Callable[[], None] | None = None,
    ) -> None:
        self._conn = conn
        # Operations whose function is of one of these types (each with a ``run`` attribute) run together
        # through its runner; see _plan.
        self._groups: dict[type, GroupRunner] = dict(groups)
        self._after_begin = after_begin  # called in each batch's transaction before its first operation
        self._before_other = before_other  # called before an operation of none of those types runs
        # called when a batch took no effect (it could not begin or commit, or was rolled back): what the groups
        # remembered of it must be forgotten, since this connection's own rollbacks move no data_version
        self._after_failure = after_failure
        self._conn_lock = threading.Lock()
        # Queued operations, taken only while holding _conn_lock: whoever commits them — the writer thread, or
        # a caller committing what is queued on its own thread (commit_queued) — takes them in FIFO order.
        self._items: deque[PendingOp[Any] | object] = deque()
        # Wakes the writer: a put after every item queued (at once, or by the kick of the loop it came from).
        self._signal: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._kicks: set[asyncio.AbstractEventLoop] = set()  # loops with a _kick scheduled
        self._lock = threading.Lock()  # makes close() idempotent
        self._closed = False  # no new operations
        self._stopped = False  # the writer thread has left its loop
        self._busy = False  # the writer thread holds a batch (see _loop)
        self._inline = inline_when_idle
        self._generation = fork_generation()
        self.stats = WriterStats()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[sqlite3.Connection], T], *, isolated: bool = True) -> Future[T]:
        """Queue ``fn(connection)`` for the next batch; the future resolves after that batch committed.

        ``isolated=False`` skips the per-operation SAVEPOINT: only for an operation each of whose statements
        leaves the database consistent should the next one fail (the append fast path).
        """
        future: Future[T] = Future()
        self._enqueue(PendingOp(fn, isolated, future))
        return future

    def submit_async(self, fn: Callable[[sqlite3.Connection], T], *, isolated: bool = True) -> asyncio.Future[T]:
        """:meth:`submit` for a caller on an event loop (call it on the loop's thread): the future is an
        asyncio one, and the writer settles all of a batch's futures of one loop in ONE thread-safe call.

        Why (benchmarks/durable.py): a concurrent Future wrapped for asyncio costs, per operation, a
        Condition, two callback chains and a self-pipe write to wake the loop; with a hundred runs appending
        at once those per-operation hand-offs took a large share of the CPU a durable step costs.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._enqueue(PendingOp(fn, isolated, None, future), wake=False)
        if loop not in self._kicks:
            self._kicks.add(loop)
            loop.call_soon(self._kick, loop)
        return future

    def _kick(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wake the writer for what a loop queued, once per loop iteration, and only if it is still queued.

        Why not at once: an execution on the loop usually queues several writes in one go and, when it runs
        alone, commits them itself at its next wait (:meth:`commit_queued`). Woken at the first of them, the
        writer thread would commit a batch of its own meanwhile — its fsync then delays that execution's — and
        wait for the GIL held by the loop after every statement. Deferred by one loop iteration, writes made
        while an execution goes on still become durable within a commit or two."""
        self._kicks.discard(loop)
        if self._items:
            self._signal.put(None)

    def call(self, fn: Callable[[sqlite3.Connection], T], *, isolated: bool = True) -> T:
        """Run ``fn(connection)`` in a batch and return its result once the batch committed (blocking)."""
        op: PendingOp[T] = PendingOp(fn, isolated, None)
        if self._inline and not self._busy and not self._items and self._conn_lock.acquire(blocking=False):
            try:
                if self._closed:
                    raise closed_error()
                check_process(self._generation)
                self._run_batch([op])
                self.stats.inline_commits += op.ok
            finally:
                self._conn_lock.release()
            return op.result()
        op.waiter = threading.Lock()
        op.waiter.acquire()
        self._enqueue(op)
        return op.result()

    def _enqueue(self, op: PendingOp[Any], *, wake: bool = True) -> None:
        # No lock here: a hundred threads taking one lock per append convoy on it (measured: 27k -> 47k
        # calls/s without it). Shutdown stays safe: the writer sets _stopped before its last drain of the
        # queue, so an operation put after that drain is seen by its own caller, who fails it.
        if self._closed:
            raise closed_error()
        check_process(self._generation)
        self._items.append(op)
        if wake:
            self._signal.put(None)
        if self._stopped:
            self._fail_pending(closed_error())

    def commit_queued(self) -> bool:
        """Commit what is queued now, on the calling thread, if the writer thread is not at it: for a caller
        about to wait for those commits with nothing else to do meanwhile (a lone durable run at its
        completion). It spares the thread hand-offs — and, under the GIL, the writer thread's wait for a
        CPU-bound caller to let it run. False if the writer is busy (the caller then just waits)."""
        if self._busy or self._closed or not self._items or not self._conn_lock.acquire(blocking=False):
            return False
        try:
            check_process(self._generation)
            while self._items:
                batch, stop = self._take()
                if stop:  # closed meanwhile: the writer thread stops on it, after this batch
                    self._items.appendleft(_STOP)
                    self._signal.put(None)  # it may have looked at the queue while the marker was out of it
                if batch:
                    self._run_batch(batch)
                    self.stats.inline_commits += 1
                if stop:
                    break
        finally:
            self._conn_lock.release()
        return True

    def _take(self) -> tuple[list[PendingOp[Any]], bool]:
        """Up to MAX_BATCH queued operations, and whether the stop marker came next (hold _conn_lock)."""
        batch: list[PendingOp[Any]] = []
        items = self._items
        while items and len(batch) < MAX_BATCH:
            item = items.popleft()
            if item is _STOP:
                return batch, True
            assert isinstance(item, PendingOp)
            batch.append(item)
        return batch, False

    def close(self) -> None:
        """Stop taking operations, finish every queued one, then close the connection. Idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._items.append(_STOP)
                self._signal.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join()

    # --- the writer thread ------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            stopping = False
            while not stopping:
                self._signal.get()
                while self._items and not stopping:
                    # Busy while it takes and commits: an inline caller must not take the connection from
                    # under it (the lock is not fair; a caller appending in a loop could win it again and
                    # again). Futures resolve under the lock: callers that come back meanwhile see the writer
                    # busy and queue, so the next batch gathers them.
                    self._busy = True
                    try:
                        with self._conn_lock:
                            batch, stopping = self._take()  # what was queued after a stop is failed below
                            if batch:
                                self._run_batch(batch)
                    finally:
                        self._busy = False
        finally:
            # A crash of this loop must not leave callers waiting forever (see _enqueue for the order).
            self._closed = True
            self._stopped = True
            self._fail_pending(closed_error())
            with self._conn_lock:
                self._conn.close()

    def _fail_pending(self, exc: BaseException) -> None:
        while True:
            try:
                item = self._items.popleft()
            except IndexError:
                return
            if isinstance(item, PendingOp) and item.start():
                item.resolve(False, exc)
                settle([item])

    def _run_batch(self, batch: list[PendingOp[Any]]) -> None:
        live = [op for op in batch if op.start()]
        if not live:
            return
        try:
            self._execute(live)
        except BaseException as exc:
            # An interrupt mid-batch (KeyboardInterrupt on an inline caller): leave no transaction open on the
            # connection, and no caller waiting.
            if self._conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
            if self._after_failure is not None:
                self._after_failure()
            for op in live:
                if not op.resolved:
                    op.resolve(False, exc)
            raise
        finally:
            settle(live)

    def _execute(self, live: list[PendingOp[Any]]) -> None:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            if self._after_begin is not None:
                self._after_begin(conn)
        except sqlite3.Error as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            self._fail_batch(live, exc)
            return
        outcomes: list[tuple[bool, Any]] = [(False, None)] * len(live)
        for positions, runner in self._plan(live):
            ops = [live[k] for k in positions]
            if runner is None and self._before_other is not None:
                self._before_other()
            results = self._run_group(ops, runner) if runner is not None and len(ops) > 1 \
                else [self._run_one(op) for op in ops]
            for k, result in zip(positions, results, strict=True):
                outcomes[k] = result
                if not result[0]:
                    break_chain(live[k], result[1])  # before a later write of its chain runs
            if not conn.in_transaction:
                # SQLite rolled the whole transaction back (SQLITE_FULL, SQLITE_IOERR, ...): nothing of
                # this batch took effect, so no operation of it may report success.
                self._fail_batch(live, _lost([r for r in outcomes if r[1] is not None]))
                return
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                # the batch fails either way; the next BEGIN will tell if the connection is broken
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            self._fail_batch(live, exc)
            return
        stats = self.stats
        stats.commits += 1
        stats.max_batch = max(stats.max_batch, len(live))
        for op, (ok, value) in zip(live, outcomes, strict=True):
            if ok:
                stats.ops += 1
            else:
                stats.failed_ops += 1
            op.resolve(ok, value)

    def _plan(self, live: list[PendingOp[Any]]) -> list[tuple[list[int], GroupRunner | None]]:
        """The order a batch's operations run in: (positions in ``live``, the runner of their group or None).

        Why: a statement costs the writer a GIL hand-off (it drops the GIL inside SQLite and must win it back
        from a loop running run bodies), so a hundred runs' admissions, entries and completions should be a
        handful of statements, not a few hundred. A groupable operation concerns one run only, so operations
        of DIFFERENT runs commute; only each run's own order matters (admission before its entries before
        its completion, and a broken write chain refusing what follows). So between two operations that are
        not groupable (kept in place, as barriers), each run's operations queue up in batch order, and rounds
        take, kind after kind, the operations at the head of every run's queue.
        """
        groups = self._groups
        plan: list[tuple[list[int], GroupRunner | None]] = []
        queues: dict[Any, deque[int]] = {}

        def drain() -> None:
            while queues:
                for kind, runner in groups.items():
                    picked: list[int] = []
                    for run in list(queues):
                        q = queues[run]
                        while q and type(live[q[0]].fn) is kind:
                            picked.append(q.popleft())
                        if not q:
                            del queues[run]
                    if picked:
                        plan.append((picked, runner))

        for position, op in enumerate(live):
            if type(op.fn) in groups:
                run = op.fn.run  # type: ignore[attr-defined]  # every groupable operation names its run
                queue_ = queues.get(run)
                if queue_ is None:
                    queue_ = queues[run] = deque()
                queue_.append(position)
            else:
                drain()
                plan.append(([position], None))
        drain()
        return plan

    def _run_one(self, op: PendingOp[Any]) -> tuple[bool, Any]:
        conn = self._conn
        try:
            if not op.isolated:
                return True, op.fn(conn)
            with savepoint(conn, "op"):
                return True, op.fn(conn)
        except Exception as exc:
            return False, exc

    def _run_group(self, ops: list[PendingOp[Any]], runner: GroupRunner) -> list[tuple[bool, Any]]:
        """The group runner leaves nothing of the group written when it raises (its contract: a SAVEPOINT
        per group cost two more statements — two GIL hand-offs — in every batch, for a failure that is rare)."""
        conn = self._conn
        try:
            results = runner(conn, [op.fn for op in ops])
        except Exception as exc:
            if not conn.in_transaction:
                return [(False, exc)] * len(ops)  # the batch is lost; _execute fails it
            # Undone: run them one at a time, which isolates whatever failed.
            results = []
            for op in ops:
                results.append(self._run_one(op))
                if not conn.in_transaction:
                    return results + [(False, exc)] * (len(ops) - len(results))
            return results
        return results

    def _fail_batch(self, ops: list[PendingOp[Any]], exc: BaseException) -> None:
        if self._after_failure is not None:
            self._after_failure()
        self.stats.failed_batches += 1
        self.stats.failed_ops += len(ops)
        for op in ops:
            # one error object per caller: each thread raising it gets its own traceback
            err = JournalError(
                Code.JOURNAL_WRITE_FAILED,
                f"the SQLite journal could not commit a batch of {len(ops)} write(s): {exc}",
                hint="check the disk (space, permissions) and whether another process holds the journal "
                "locked for longer than the busy timeout",
            )
            err.__cause__ = exc
            op.resolve(False, err)


def _lost(outcomes: list[tuple[bool, Any]]) -> BaseException:
    for ok, value in reversed(outcomes):
        if not ok:
            return value  # type: ignore[no-any-return]
    return sqlite3.OperationalError("the transaction was rolled back")
