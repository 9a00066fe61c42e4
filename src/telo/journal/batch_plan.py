"""The order a group-commit batch's operations run in, and what grouped operations share on every database
(:mod:`telo.journal.group_commit`; the SQLite and PostgreSQL executors).

An operation is a function of the writer's connection. Operations of some types — appends, admissions,
completions — are *groupable*: the executor runs consecutive ones of a type together through that type's
runner, which writes them all with a few multi-row statements (or raises :class:`OneAtATime` having written
nothing, and the executor runs them one by one). :func:`plan` decides which run together.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

# Runs a group of operations together: (ok, result or error) per operation, in order. Should it raise, it must
# have left nothing of the group written (the executor then runs the operations one at a time).
GroupRunner = Callable[[Any, list[Any]], list[tuple[bool, Any]]]


class OneAtATime(Exception):
    """Raised by a group runner, with nothing of the group left written, to have the executor run its
    operations one by one (which isolates whatever it could not handle together)."""


def plan(fns: Sequence[Any], groups: Mapping[type, GroupRunner]) -> list[tuple[list[int], GroupRunner | None]]:
    """The order a batch's operations ``fns`` run in: (positions in ``fns``, the runner of their group or None).

    Why: a statement costs the writer a GIL hand-off (it drops the GIL inside the driver and must win it back
    from a loop running run bodies) and, on PostgreSQL, a message to the server, so a hundred runs' admissions,
    entries and completions should be a handful of statements, not a few hundred. A groupable operation
    concerns one run only (its ``run`` attribute), so operations of DIFFERENT runs commute; only each run's
    own order matters (admission before its entries before its completion, and a broken write chain refusing
    what follows). So between two operations that are not groupable (kept in place, as barriers), each run's
    operations queue up in batch order, and rounds take, kind after kind, the operations at the head of every
    run's queue.
    """
    out: list[tuple[list[int], GroupRunner | None]] = []
    queues: dict[Any, deque[int]] = {}

    def drain() -> None:
        while queues:
            for kind, runner in groups.items():
                picked: list[int] = []
                for run in list(queues):
                    q = queues[run]
                    while q and type(fns[q[0]]) is kind:
                        picked.append(q.popleft())
                    if not q:
                        del queues[run]
                if picked:
                    out.append((picked, runner))

    for position, fn in enumerate(fns):
        if type(fn) in groups:
            run = fn.run  # every groupable operation names its run
            queue_ = queues.get(run)
            if queue_ is None:
                queue_ = queues[run] = deque()
            queue_.append(position)
        else:
            drain()
            out.append(([position], None))
    drain()
    return out


def complete_in_group(ops: Sequence[Any], settle: Callable[[list[Any]], Mapping[str, Any]],
                      refusal: Callable[[Any], Exception]) -> list[tuple[bool, Any]]:
    """A group of completions of distinct runs, the same way on every database: one whose write chain broke is
    refused without being written (as alone); ``settle`` writes the others with few statements and returns the
    settled record of each run it settled; one it did not settle gets ``refusal(op)`` (a fence that no longer
    holds the run, or an unknown run). (ok, record or error) per op, in order."""
    distinct_runs(ops)
    results: list[tuple[bool, Any] | None] = [None] * len(ops)
    todo: list[Any] = []
    for i, op in enumerate(ops):
        try:
            if op.chain is not None:
                op.chain.check()
            todo.append(op)
        except Exception as exc:
            results[i] = (False, exc)
    found = settle(todo) if todo else {}
    out: list[tuple[bool, Any]] = []
    for op, result in zip(ops, results, strict=True):
        if result is None:
            stored = found.get(op.run)
            result = (True, stored) if stored is not None else (False, refusal(op))
        out.append(result)
    return out


def distinct_runs(ops: Sequence[Any]) -> None:
    """One row per run per statement: a run twice in one group (rare) runs one at a time, in order."""
    if len({op.run for op in ops}) != len(ops):
        raise OneAtATime


def parts(ops: list[T]) -> list[list[T]]:
    """``ops`` split as :func:`chunks` splits their count."""
    out, done = [], 0
    for size in chunks(len(ops)):
        out.append(ops[done:done + size])
        done += size
    return out


def chunks(rows: int) -> list[int]:
    """``rows`` in statements of at most 256 rows (well inside SQLite's limit on bound parameters): up to 32
    rows one statement of exactly that many, else powers of two, largest first, so that few distinct
    statement texts are prepared and cached."""
    if rows <= 32:
        return [rows] if rows else []
    sizes = []
    size = 256
    while rows:
        while rows >= size:
            sizes.append(size)
            rows -= size
        size //= 2
    return sizes
