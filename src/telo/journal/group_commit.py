"""Group commit: one writer thread per journal store, many operations per durable COMMIT (ARCHITECTURE §3).

A durable commit costs one fsync of the database's log (SQLite's WAL, PostgreSQL's WAL on the server),
whatever it holds; a runtime executing many runs at once would pay it per step if every append committed
alone. So one writer thread per store owns a write connection: a mutating call enqueues an operation (a
function of that connection) and waits on its future; the writer takes everything queued, runs it all in
one transaction and only then resolves each future with that operation's own result. Batches form by
themselves: while one commit is being made durable, the next operations queue up, so the batch grows with
the load and a lone writer pays no added latency — nothing waits for a batch to fill.

This module is the database-neutral half: the queue, the thread, who commits when, and how callers learn
their outcome (:mod:`telo.journal.pending`). How one batch runs on a database — its transaction, its grouped
multi-row statements, how one operation's failure is kept from the others — is the store's
:class:`BatchExecutor` (:mod:`telo.journal.sqlite_writer`, :mod:`telo.journal.postgres_writer`).

Guarantees (each executor keeps them):

- **durable on return** (store.py): a future resolves only after the batch's COMMIT returned;
- **isolation per operation**: an operation that raises is undone on its own and its error goes to its own
  caller; the others commit;
- **all or nothing per batch** otherwise: if the transaction cannot begin or commit (disk full, I/O error, a
  lost connection), every operation of the batch fails with that error and none took effect;
- **FIFO**: operations commit in the order they were queued; within a batch an executor may reorder only
  operations of different runs (:func:`telo.journal.batch_plan.plan`).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from telo.journal.pending import PendingOp, settle
from telo.journal.process import check_process, closed_error, fork_generation

T = TypeVar("T")

# A batch bigger than this gains nothing more from sharing a commit and only delays its first callers.
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


def committed(live: list[PendingOp[Any]], outcomes: list[tuple[bool, Any]], stats: WriterStats) -> None:
    """A batch's transaction committed: count it, and give each operation its own outcome (an executor's last
    step; what it could not begin or commit it fails instead, every operation with the batch's error)."""
    stats.commits += 1
    stats.max_batch = max(stats.max_batch, len(live))
    for op, (ok, value) in zip(live, outcomes, strict=True):
        if ok:
            stats.ops += 1
        else:
            stats.failed_ops += 1
        op.resolve(ok, value)


class BatchExecutor(Protocol):
    """How a batch runs on one database, over the connection the writer owns (used under its lock only)."""

    #: the database's name in messages ("SQLite", "PostgreSQL")
    database: str

    def execute(self, ops: list[PendingOp[Any]], stats: WriterStats) -> None:
        """Run ``ops`` in one transaction and resolve every one of them (``op.resolve``): its own result or
        error once the transaction committed, or the batch's error if it could not begin or commit. Counts
        what happened in ``stats``. Raises only for an interrupt (then :meth:`abort` is called)."""
        ...

    def abort(self) -> None:
        """An interrupt (KeyboardInterrupt on an inline caller) left :meth:`execute` half way: leave no
        transaction open on the connection, and forget whatever the batch noted."""
        ...

    def close(self) -> None:
        """Close the connection (the writer thread has stopped)."""
        ...


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

    def __init__(self, executor: BatchExecutor, name: str, *, inline_when_idle: bool = True) -> None:
        self._executor = executor
        self._database = executor.database
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

    def submit(self, fn: Callable[[Any], T], *, isolated: bool = True) -> Future[T]:
        """Queue ``fn(connection)`` for the next batch; the future resolves after that batch committed.

        ``isolated=False`` lets the executor skip the per-operation SAVEPOINT: only for an operation each of
        whose statements leaves the database consistent should the next one fail (the append fast path).
        """
        future: Future[T] = Future()
        self._enqueue(PendingOp(fn, isolated, future))
        return future

    def submit_async(self, fn: Callable[[Any], T], *, isolated: bool = True) -> asyncio.Future[T]:
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
        writer thread would commit a batch of its own meanwhile — its commit then delays that execution's —
        and wait for the GIL held by the loop after every statement. Deferred by one loop iteration, writes
        made while an execution goes on still become durable within a commit or two."""
        self._kicks.discard(loop)
        if self._items:
            self._signal.put(None)

    def call(self, fn: Callable[[Any], T], *, isolated: bool = True) -> T:
        """Run ``fn(connection)`` in a batch and return its result once the batch committed (blocking)."""
        op: PendingOp[T] = PendingOp(fn, isolated, None)
        if self._inline and not self._busy and not self._items and self._conn_lock.acquire(blocking=False):
            try:
                if self._closed:
                    raise closed_error(self._database)
                check_process(self._generation, self._database)
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
            raise closed_error(self._database)
        check_process(self._generation, self._database)
        self._items.append(op)
        if wake:
            self._signal.put(None)
        if self._stopped:
            self._fail_pending(closed_error(self._database))

    def commit_queued(self) -> bool:
        """Commit what is queued now, on the calling thread, if the writer thread is not at it: for a caller
        about to wait for those commits with nothing else to do meanwhile (a lone durable run at its
        completion). It spares the thread hand-offs — and, under the GIL, the writer thread's wait for a
        CPU-bound caller to let it run. False if the writer is busy (the caller then just waits)."""
        if self._busy or self._closed or not self._items or not self._conn_lock.acquire(blocking=False):
            return False
        try:
            check_process(self._generation, self._database)
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
            self._fail_pending(closed_error(self._database))
            with self._conn_lock:
                self._executor.close()

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
            self._executor.execute(live, self.stats)
        except BaseException as exc:
            # An interrupt mid-batch (KeyboardInterrupt on an inline caller): leave no transaction open on the
            # connection, and no caller waiting.
            self._executor.abort()
            for op in live:
                if not op.resolved:
                    op.resolve(False, exc)
            raise
        finally:
            settle(live)
