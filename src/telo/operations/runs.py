"""Reading runs: one run's status (record, unconfirmed effects, epoch), its result, a page of runs, its journal
events and checkpoints. Synchronous (stores block and are thread-safe); :func:`wait_settled` is the one
coroutine, for callers that wait for a run to settle.

The CLI (``telo status|result|runs …``), the Python API (``status``, ``result``, ``checkpoints``) and the
dashboard read through these, so they answer the same question the same way.
"""

from __future__ import annotations

import asyncio
import datetime
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from telo.clock import SYSTEM_CLOCK
from telo.durable.operator import UnconfirmedEffect, is_held, require_run, unconfirmed_effects
from telo.errors import Code, TeloError
from telo.journal import eventlog
from telo.journal.eventlog import Checkpoint, Event
from telo.journal.lineage import Origin
from telo.journal.model import STATUSES, RunFilter, RunPage, RunRecord
from telo.journal.store import Store
from telo.operations import queues
from telo.operations.queues import QueueConfig

POLL_S = 0.1  # how often a wait for a run to settle reads its record again


@dataclass(frozen=True, slots=True)
class RunView:
    """A run's record and what its log adds: the unconfirmed-effect resolutions (settled or not), its epoch
    (restores start a new one), how many entries its state holds and, for a fork, its origin (the run and
    checkpoint it was copied from, and whose idempotency keys it keeps: telo.journal.lineage). ``log_error`` is
    why the log did not read, when the view was asked for leniently (then the log-derived members are empty)."""

    record: RunRecord
    unconfirmed: tuple[UnconfirmedEffect, ...] = ()
    epoch: int | None = None
    entries: int | None = None
    log_error: TeloError | None = None
    origin: Origin | None = None
    # issue 16: a queued run's queue and, while it waits, what holds the queue's slots and why (queue_view)
    queue: dict[str, object] | None = None

    @property
    def run(self) -> str:
        return self.record.run

    @property
    def held(self) -> bool:
        """Parked because its manifest changed: only a forced resume continues it."""
        return is_held(self.record)


def status(store: Store, run: str, *, lenient: bool = False,
           queue_config: Callable[[str], QueueConfig | None] | None = None) -> RunView:
    """The run's record and log summary; ``ERR_DURABLE_RUN_NOT_FOUND`` for an unknown run. A log that does not
    read raises, unless ``lenient`` (a dashboard still shows the record of a run it cannot fully read).
    ``queue_config``: the limits of a queue by name, for a queued run waiting for a slot (:func:`queue_view`)."""
    record = require_run(store, run)
    try:
        state = eventlog.recover(store, run)
    except TeloError as exc:
        if not lenient:
            raise
        return RunView(record, log_error=exc)
    return RunView(state.record or record, unconfirmed_effects(state), state.epoch, len(state.entries),
                   origin=state.origin, queue=queue_view(store, state.record or record, queue_config))


def queue_view(store: Store, record: RunRecord,
               queue_config: Callable[[str], QueueConfig | None] | None = None) -> dict[str, object] | None:
    """A queued run's queue and key and, while it waits (``scheduled``), why: what holds the queue's slots, its
    position among the runs waiting for one and — given ``queue_config`` (a queue's limits by name, looked up
    only for a waiting run: the journal does not record them) — which limits hold it
    (:func:`telo.operations.queues.why_waiting`)."""
    if record.queue is None:
        return None
    config = None
    if record.status == "scheduled" and queue_config is not None:
        config = queue_config(record.queue)
    return queues.why_waiting(store, record, config)


def read_record(store: Store, run: str) -> RunRecord:
    """The run's record (``ERR_DURABLE_RUN_NOT_FOUND`` for an unknown run)."""
    return require_run(store, run)


async def wait_settled(store: Store, run: str, seconds: float | None, *, poll_s: float = POLL_S) -> RunRecord:
    """The run's record once it settles, or as it is when ``seconds`` have passed (None or 0: at once)."""
    deadline = SYSTEM_CLOCK.monotonic() + (seconds or 0)
    while True:
        record = await asyncio.to_thread(require_run, store, run)
        if record.terminal or SYSTEM_CLOCK.monotonic() >= deadline:
            return record
        await asyncio.sleep(poll_s)


def since_ms(since: Any, now_ms: int) -> int:
    """A listing's ``since`` as epoch ms: epoch ms (an int or digits), a ``datetime``, a
    :class:`~telo.values.Timestamp`, RFC 3339 text, or a duration back from ``now_ms`` (``90m``, ``2h``, ``1d``,
    as ``telo runs list --since`` reads it). ``ERR_INVALID_VALUE`` for anything else."""
    from telo.kinds.addressing import duration_ms, instant_ms

    if isinstance(since, datetime.datetime):
        return int(since.timestamp() * 1000)
    if isinstance(since, str) and since.isdigit():
        return int(since)
    try:
        return instant_ms(since, Code.INVALID_VALUE, "since")
    except TeloError:
        if not isinstance(since, str):
            raise
    return now_ms - duration_ms(since, "since")


def check_filter(flt: RunFilter) -> None:
    """Refuse a listing the CLI's options would not let through (an unknown status, a limit below 1), rather
    than answer "no runs" (``ERR_INVALID_VALUE``)."""
    if flt.status is not None and flt.status not in STATUSES:
        raise TeloError(Code.INVALID_VALUE, f"status: {flt.status!r} is not a run status",
                        hint=f"one of {', '.join(STATUSES)}")
    if flt.limit < 1:
        raise TeloError(Code.INVALID_VALUE, f"limit: {flt.limit} is below 1")


def list_runs(store: Store, flt: RunFilter) -> RunPage:
    """One page of runs, newest first (``flt.after`` is the previous page's ``next``)."""
    return store.list_runs(flt)


def events(store: Store, run: str) -> tuple[RunRecord, list[Event]]:
    """The run's record and its journal in log order (``ERR_DURABLE_RUN_NOT_FOUND`` for an unknown run)."""
    record = require_run(store, run)
    return record, list(eventlog.events(store, run))


def checkpoints(store: Store, run: str) -> list[Checkpoint]:
    """The states the run can be restored to or forked from (its start, each step, each snapshot)."""
    return eventlog.checkpoints(store, run)


def resolve_checkpoint(store: Store, run: str, checkpoint: int | str | Checkpoint) -> int:
    """A checkpoint's seq: given as a seq (int or digits), a :class:`Checkpoint`, or a step path (its newest
    checkpoint there, in any epoch; ``ERR_CHECKPOINT_NOT_FOUND`` if the run has none there)."""
    if isinstance(checkpoint, Checkpoint):
        return checkpoint.seq
    if isinstance(checkpoint, int):
        return checkpoint
    if checkpoint.isdigit():
        return int(checkpoint)
    found = [c.seq for c in eventlog.checkpoints(store, run) if c.path == checkpoint]
    if not found:
        raise TeloError(Code.CHECKPOINT_NOT_FOUND, f"run {run!r} has no checkpoint at {checkpoint!r}",
                        hint=f"list the run's checkpoints with `telo runs checkpoints {shlex.quote(run)}` and pass one "
                        "of their seq numbers or paths", data={"run": run, "checkpoint": checkpoint})
    return max(found)
