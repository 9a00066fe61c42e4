"""How the caller of a queued journal write learns its outcome (:mod:`telo.journal.group_commit`).

Each queued operation carries one of three ways back: a concurrent Future (``submit``), an asyncio future
(``submit_async``) — settled on its loop together with the rest of its batch, one thread-safe call per loop per
batch — or, for a blocked synchronous caller (``call``), a pre-acquired lock the writer releases. A write of an
execution's chain (:mod:`telo.journal.chain`) that fails breaks that chain as it is resolved, before any later
write of the chain runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PendingOp(Generic[T]):
    """One queued operation and how its caller learns the outcome: a Future, an asyncio future settled with
    the rest of its batch (``GroupCommitWriter.submit_async``), or (sync callers) a lock."""

    __slots__ = ("afuture", "fn", "future", "isolated", "ok", "resolved", "value", "waiter")

    def __init__(self, fn: Callable[[Any], T], isolated: bool, future: Future[T] | None,
                 afuture: asyncio.Future[T] | None = None) -> None:
        self.fn = fn
        self.isolated = isolated
        self.future = future
        self.afuture = afuture
        # A pre-acquired lock the writer releases: half the cost of a Future's Condition for a blocked caller.
        self.waiter: threading.Lock | None = None
        self.ok = False
        self.resolved = False
        self.value: Any = None

    def start(self) -> bool:
        """False when the caller cancelled the future before the batch ran (an abandoned await)."""
        if self.afuture is not None:
            return not self.afuture.cancelled()  # a flag read; a cancel after this is handled in _settle_on_loop
        return self.future is None or self.future.set_running_or_notify_cancel()

    def resolve(self, ok: bool, value: Any) -> None:
        self.resolved = True
        if not ok:
            break_chain(self, value)
        if self.afuture is not None:  # settled on its loop by settle(), with the rest of its batch
            self.ok, self.value = ok, value
            return
        if self.future is not None:
            if ok:
                self.future.set_result(value)
            else:
                self.future.set_exception(value)
            return
        self.ok, self.value = ok, value
        if self.waiter is not None:
            self.waiter.release()

    def result(self) -> T:
        if self.waiter is not None:
            self.waiter.acquire()
        if self.ok:
            return self.value  # type: ignore[no-any-return]
        raise self.value


def break_chain(op: PendingOp[Any], exc: BaseException) -> None:
    """A deferred write that failed breaks its execution's chain (telo.journal.chain): no later write of that
    execution may commit."""
    chain = getattr(op.fn, "chain", None)
    if chain is not None:
        chain.break_with(exc)


def settle(ops: list[PendingOp[Any]]) -> None:
    """Hand the resolved asyncio futures among ``ops`` to their loops: one thread-safe call per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[PendingOp[Any]]] | None = None
    for op in ops:
        if op.afuture is not None and op.resolved:
            by_loop = by_loop if by_loop is not None else {}
            by_loop.setdefault(op.afuture.get_loop(), []).append(op)
    if by_loop is None:
        return
    try:
        here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()  # an inline commit on a loop
    except RuntimeError:
        here = None
    for loop, settled in by_loop.items():
        if loop is here:
            # Committed by a caller on this very loop (commit_queued): settled on the loop's next iteration, not at
            # once. The caller then gives the loop that iteration, and bodies about to start run in it and queue
            # their writes for the next commit; settled at once, a hundred runs in flight each found itself alone,
            # committed alone and never shared a commit (benchmarks/postgres.py: 7,400 -> 3,000 steps/s, 0.01 ->
            # 0.10 write transactions a step; SQLite 9,200 -> 6,600 steps/s).
            loop.call_soon(_settle_on_loop, settled)
            continue
        with contextlib.suppress(RuntimeError):  # the loop was closed: nobody is waiting any more
            loop.call_soon_threadsafe(_settle_on_loop, settled)


def _settle_on_loop(ops: list[PendingOp[Any]]) -> None:
    for op in ops:
        future = op.afuture
        assert future is not None
        if future.done():  # cancelled by its caller meanwhile: the write stands, nobody reads its result
            continue
        if op.ok:
            future.set_result(op.value)
        else:
            future.set_exception(op.value)
