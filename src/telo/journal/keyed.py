"""Keyed admissions: what the journal does with a second admission of a queue's key (issue 16, step 4 of
docs/proposals/admission-control.md — ``dedupKey`` / ``onDuplicate``, ``debounce``, ``singleton``).

An :class:`~telo.journal.model.Admission` with a key is decided by the store in ONE transaction (the SQLite
writer's ``BEGIN IMMEDIATE``; on PostgreSQL a transaction under an advisory lock of the queue and key; the memory
store's lock), in this order:

1. a run with the admission's id exists: nothing is admitted, that run is returned (``onConflict`` decides);
2. ``debounce_key``: an **unstarted** run (``scheduled``, never granted: ``started_at`` NULL) of the same queue,
   workflow and debounce key takes the admission's inputs (and the concurrency key and priority evaluated over
   them) and its due time (now + the period): nothing is admitted, that run is returned;
3. ``dedup_key``: a **live** run (``scheduled``, ``running`` or ``parked``) of the queue with that key is
   returned and nothing admitted — unless ``supersede`` (``singleton: {mode: cancel-running}``): then it is
   cancelled as ``telo cancel`` cancels (:meth:`~telo.journal.store.Store.complete` with
   :meth:`~telo.journal.model.Outcome.cancelled`; its body stops at its next step), and the admission goes in;
4. the run is admitted.

Two unique partial indexes back the rule across processes and writers that skip step 1-3 (a race is lost, never
doubled): ``(queue, dedup_key)`` over live runs and ``(queue, workflow, debounce_key)`` over unstarted ones.
Two columns, not one: a dedup key stays taken until its run settles, a debounce key only until its run starts
(a newer admission then begins a new debounce) — one index cannot say both. A queue has at most one of the three
(checked at load, :mod:`telo.kinds.queue_keys`), and ``singleton: {mode: queue}`` uses no column of these: it is
a per-key concurrency limit of 1 on ``queue_key``.

Dedup and singleton keys are the queue's (two workflows on one queue share them, as a DBOS queue's
deduplication ids are); a debounce replaces only a run of the same workflow, whose body reads the inputs.

A settled run keeps its ``dedup_key``; made live again — restored (:func:`telo.journal.eventlog.restore`) — it
takes the key back, which the index refuses while another live run of the queue holds it:
:func:`refuse_taken_key` says so first, naming that run, the queue and the key.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from telo.errors import Code, JournalError
from telo.journal import cancels, rules
from telo.journal.model import Admission, AdmitResult, Outcome, RunRecord

if TYPE_CHECKING:
    from telo.journal.store import Store

LIVE: Final = ("scheduled", "running", "parked")
# The record fields a debounce replaces: the inputs and what was evaluated over them at admission, and the due time.
DEBOUNCED: Final = ("inputs", "inputs_v", "queue_key", "priority", "due_at")
_ATTEMPTS: Final = 3


def superseded(new_run: str) -> Outcome:
    """How a ``cancel-running`` admission cancels the live run of its key (the operator cancel's outcome)."""
    return Outcome.cancelled(f"cancelled by run {new_run!r}: its queue's singleton key is taken by the newest "
                             "run (singleton mode cancel-running)")


def unstarted(record: RunRecord) -> bool:
    return record.status == "scheduled" and record.started_at is None


def debounce_target(record: RunRecord, admission: Admission) -> bool:
    return (record.queue == admission.queue and record.workflow == admission.workflow
            and record.debounce_key == admission.debounce_key and unstarted(record))


def dedup_holder(record: RunRecord, admission: Admission) -> bool:
    return record.queue == admission.queue and record.dedup_key == admission.dedup_key and record.status in LIVE


def debounce_values(admission: Admission) -> dict[str, object]:
    """The :data:`DEBOUNCED` fields' new values, from the admission."""
    return {name: getattr(admission, name) for name in DEBOUNCED}


def noticed(result: AdmitResult) -> AdmitResult:
    """``result``, once a cancel it wrote is noticed by this process's bodies (:mod:`telo.journal.cancels`)."""
    if result.superseded:
        cancels.notice()
    return result


def notice_when_done(future: asyncio.Future[AdmitResult]) -> asyncio.Future[AdmitResult]:
    """:func:`noticed` for a keyed admission queued for a group commit: once it committed."""
    future.add_done_callback(lambda f: None if f.cancelled() or f.exception() is not None else noticed(f.result()))
    return future


class KeyedOps(Protocol):
    """The statements of one store's keyed admission, run inside its one transaction (or lock)."""

    def by_id(self, run: str) -> RunRecord | None: ...

    def debounce(self, admission: Admission, now_ms: int) -> RunRecord | None:
        """The unstarted run of the admission's debounce key, given its :data:`DEBOUNCED` fields; None: none."""

    def live(self, admission: Admission) -> list[RunRecord]:
        """The live runs of the queue holding the admission's dedup key (one, the index permitting)."""

    def cancel(self, run: str, outcome: Outcome, now_ms: int) -> None: ...

    def insert(self, admission: Admission, now_ms: int) -> bool:
        """Insert the admission's row unless a unique index refuses it; whether it went in."""


def admit_with(ops: KeyedOps, admission: Admission, now_ms: int) -> AdmitResult:
    """The rule of the module docstring. An insert refused by an index after the rule found nothing — a writer
    that skipped it, between the statements — is decided again from the start, a few times."""
    cancelled: list[str] = []
    for _ in range(_ATTEMPTS):
        existing = ops.by_id(admission.run)
        if existing is not None:
            return AdmitResult(False, existing, tuple(cancelled))
        if admission.debounce_key is not None:
            updated = ops.debounce(admission, now_ms)
            if updated is not None:
                return AdmitResult(False, updated, tuple(cancelled))
        if admission.dedup_key is not None:
            for record in ops.live(admission):
                if not admission.supersede:
                    return AdmitResult(False, record, tuple(cancelled))
                ops.cancel(record.run, superseded(admission.run), now_ms)
                cancelled.append(record.run)
        if ops.insert(admission, now_ms):
            return AdmitResult(True, admission.record(now_ms), tuple(cancelled))
    raise JournalError(Code.DURABLE_RUN_EXISTS, f"run {admission.run!r} was not admitted: a run of its queue's "
                       f"key went in each of {_ATTEMPTS} times it was decided, unseen by the rule (a writer that "
                       "does not know it)", hint="start it again; `telo queues show` lists the queue's live runs",
                       data={"run": admission.run, "queue": admission.queue})


class _Memory:
    """:class:`KeyedOps` over the memory store's runs (called under its lock)."""

    def __init__(self, runs: dict[str, RunRecord]) -> None:
        self.runs = runs

    def by_id(self, run: str) -> RunRecord | None:
        return self.runs.get(run)

    def debounce(self, admission: Admission, now_ms: int) -> RunRecord | None:
        for record in _matching(self.runs.values(), admission, debounce_target):
            changed = replace(record, **debounce_values(admission), updated_at=now_ms)  # type: ignore[arg-type]
            self.runs[record.run] = changed
            return changed
        return None

    def live(self, admission: Admission) -> list[RunRecord]:
        return _matching(self.runs.values(), admission, dedup_holder)

    def cancel(self, run: str, outcome: Outcome, now_ms: int) -> None:
        self.runs[run] = rules.settled(self.runs[run], outcome, now_ms)

    def insert(self, admission: Admission, now_ms: int) -> bool:
        self.runs[admission.run] = admission.record(now_ms)
        return True


def admit_among(runs: dict[str, RunRecord], admission: Admission, now_ms: int) -> AdmitResult:
    """The rule over the memory store's ``runs`` (under its lock), changed in place."""
    return admit_with(_Memory(runs), admission, now_ms)


def _matching(records: Iterable[RunRecord], admission: Admission,
              test: Callable[[RunRecord, Admission], bool]) -> list[RunRecord]:
    return sorted((r for r in records if test(r, admission)), key=lambda r: (r.created_at or 0, r.run))


@runtime_checkable
class KeyReads(Protocol):
    """A store that reads the live runs of a dedup key on its index (SQLite, PostgreSQL: their queue reads)."""

    def live_runs_of_key(self, queue: str, dedup_key: str) -> list[RunRecord]:
        """The live runs of ``queue`` holding ``dedup_key`` (one, the index permitting)."""


def live_runs_of_key(store: Store, queue: str, dedup_key: str) -> list[RunRecord]:
    """The live runs of ``queue`` holding ``dedup_key``: on the store's index where it has one, else read from
    every run (the memory store)."""
    if isinstance(store, KeyReads):
        return store.live_runs_of_key(queue, dedup_key)
    return sorted((r for r in store.iter_all_runs() if r.queue == queue and r.dedup_key == dedup_key
                   and r.status in LIVE), key=lambda r: (r.created_at or 0, r.run))


def refuse_taken_key(store: Store, record: RunRecord) -> None:
    """Raise ``ERR_DURABLE_RUN_EXISTS`` if ``record``'s run, settled, cannot be restored — made live again — because
    another live run of its queue holds its dedup key, which one live run at a time may hold (the index would
    refuse the write with the database's unique violation). A run without a key, or live already (it holds its
    key itself), is never refused."""
    queue, key = record.queue, record.dedup_key
    if queue is None or key is None or record.status in LIVE:
        return
    holders = [r for r in live_runs_of_key(store, queue, key) if r.run != record.run]
    if not holders:
        return
    holder = holders[0]
    raise JournalError(
        Code.DURABLE_RUN_EXISTS,
        f"run {record.run!r} ({record.status}) cannot be restored: run {holder.run!r} ({holder.status}) holds its "
        f"dedup key {key!r} of queue {queue!r}, and one live run at a time may hold a queue's dedup key",
        hint=f"wait for run {holder.run!r} to settle (telo result {shlex.quote(holder.run)} --wait 60s), or cancel "
             f"it (telo cancel {shlex.quote(holder.run)}), then try again",
        data={"run": record.run, "status": record.status, "queue": queue, "dedupKey": key, "heldBy": holder.run,
              "heldByStatus": holder.status})
