"""Starting and continuing runs of a workflow that names a ``DurableLocal.Queue`` (issue 16).

A start admits the run ``scheduled``, due at once, with its queue and concurrency key — and does not claim it:
the journal grants it only while the queue has room (:meth:`telo.journal.store.Store.claim_due`). A start asks
for its slot in its admission's own journal operation (:func:`admit_queued`, ``Store.admit_granted``) and,
granted, executes at once; otherwise the starting process waits for a slot the way it waits out a timed park in
process (``PARKED_RECHECK_MS``): it asks ``claim_due(only=[run])`` until the run is granted to it, and executes
it; a worker may be granted it first, and then the starter stops waiting (``telo run`` reports it running
``elsewhere``). Every other claim of a queued run in this process — a resubmission, the continuation after a
timed park — goes through the same grant, so no path of this process starts a queued run past its limits.

``workerConcurrency`` is per process: a queue counts its runs granted to this process until their execution
rests (:attr:`telo.kinds.queue.Queue.executing`), counted at the grant, before anything else can ask.

The runs of one queue waiting in this process ask **together** (:mod:`telo.kinds.slot_waits`; the proposal's step 3,
priority): each ask names every one of them, so the journal grants them in the queue's order — priority, then
admission (:func:`telo.journal.queues.queue_order`). Asked one by one, whichever waiter happened to ask first
after a slot freed would take it. Waits in other processes ask for their own runs; a worker's sweep grants the
queue's due runs in order.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from telo.durable import shutdown
from telo.durable.aio import AsyncStore
from telo.durable.halting import halts
from telo.errors import TeloError
from telo.journal.claims import Fence
from telo.journal.model import Admission, AdmitResult, RunRecord
from telo.journal.rules import claim_is_live
from telo.kinds.slot_waits import reserve
from telo.runtime.resource import RunOutcome

if TYPE_CHECKING:
    from telo.kinds.queue import Queue
    from telo.runtime.resource import Host

# How often a start waiting for a slot asks again: as often as a process waiting out a timed park re-reads its
# run (telo.kinds.workflow.PARKED_RECHECK_MS). A grant is one claim statement; a freed slot is found within it.
SLOT_RECHECK_MS = 500


class Workflow(Protocol):
    """What of ``telo.kinds.workflow.Workflow`` starting a queued run uses (that module imports this one)."""

    app: Host
    holder: str
    waiting: set[str]
    active: set[str]

    @property
    def store(self) -> AsyncStore: ...

    async def run_to_rest(self, run: str, inputs: Any, fence: Fence, *, fresh: bool = False,
                          chain: tuple[str, ...] | None = None, queued: Queue | None = None,
                          record: RunRecord | None = None) -> Any: ...


def queued_admission(queue: Queue, admission: Admission, inputs: Any, now_ms: int) -> Admission:
    """The admission of a queued run: ``scheduled``, due now, its queue, key and priority recorded (evaluated
    here, once: replay never re-evaluates them) — and a start's dedup, debounce or singleton key, a debounced
    run due once its period passed (telo.kinds.queue_keys)."""
    fields = {"due_at": now_ms, **queue_fields(queue, inputs), **queue.keys.fields(queue.app, inputs, now_ms)}
    return replace(admission, status="scheduled", **fields)


async def claim_queued(wf: Workflow, queue: Queue, run: str, holder: str) -> Fence | None:
    """Claim ``run`` if it is due and its queue has room now (counted at once toward ``workerConcurrency``:
    the caller gives the slot back with :func:`slot_done` when the execution rests)."""
    limits, reserved = reserve(queue, 1)
    try:
        granted = await wf.store.claim_due(holder, wf.app.clock.now_ms(), 1, only=[run], queues={queue.name: limits})
    finally:
        queue.executing -= reserved
    if not granted:
        return None
    queue.executing += 1
    return granted[0][1]


async def admit_queued(wf: Workflow, queue: Queue, admission: Admission, inputs: Any,
                       chain: tuple[str, ...]) -> tuple[AdmitResult, bool]:
    """Admit a start's run and ask its queue for a slot in the same journal operation (``Store.admit_granted``):
    granted (True), it executes at once — from the record the grant returned, not read again, and without reading
    its journal when the grant was its first claim; on SQLite as soon as the writer decided the grant, before its
    commit, as an unqueued start runs its body while its admission commits (its writes queue behind the grant,
    and an effect that must not be repeated blindly waits for them); else the caller
    waits for a slot (:func:`wait_for_slot`). The start answers ``scheduled`` either way (docs/kinds.md).

    Why (benchmarks/queue_overhead.py, BENCHMARKS.md "Queues"): the admission's commit awaited alone and then a
    wait for the waiters' next ask cost a start ~130 ms at 100 in flight, with room in the queue. The same
    grant, under the same limits counted in the granting transaction; only while no run of the queue waits in
    this process — else the new run asks with them, in the queue's order (priority, :mod:`telo.kinds.slot_waits`)."""
    store = wf.store
    if queue.waits.runs or shutdown.draining():  # (draining: admitted only, as a wait would leave it)
        return await store.admit(admission), False
    started: list[bool] = []

    def execute(record: RunRecord, fence: Fence) -> None:
        queue.executing += 1  # (given back by run_to_rest once the execution rests: slot_done)
        started.append(True)
        # fresh (no journal to read) when this is the run's first claim ever — token 1: no execution held it
        # before (on PostgreSQL a worker could be granted it between the admission's commit and this grant)
        wf.app.hold(wf.run_to_rest(admission.run, inputs, fence, fresh=record.fence == 1, chain=chain,
                                   queued=queue, record=record))

    limits, reserved = reserve(queue, 1)
    try:
        admitted = await store.admit_granted(admission, wf.holder, wf.app.clock.now_ms(), {queue.name: limits},
                                             execute)
    finally:
        queue.executing -= reserved
    return admitted, bool(started)


def slot_done(queue: Queue | None) -> None:
    if queue is not None:
        queue.executing = max(queue.executing - 1, 0)


def wait_for_slot(wf: Workflow, queue: Queue, run: str, inputs: Any, chain: tuple[str, ...]) -> None:
    """Wait in this process (under a hold) for the queue to grant ``run``, then execute it — once per run per
    process: a second start of a run waited for here attaches to that wait."""
    if run not in wf.waiting and run not in wf.active:
        wf.app.hold(await_slot(wf, queue, run, inputs, chain))


def queue_fields(queue: Queue | None, inputs: Any) -> dict[str, Any]:
    """``Admission.of`` arguments recording a run's queue, key and priority (a start; ``Local.Schedule``, ``telo
    schedule``: once due, it is granted like a started one, under the queue's limits and in its order)."""
    if queue is None:
        return {}
    return {"queue": queue.name, "queue_key": queue.key_of(inputs), "priority": queue.priority_of(inputs)}


async def await_slot(wf: Workflow, queue: Queue, run: str, inputs: Any, chain: tuple[str, ...]) -> None:
    """Wait for the queue to grant ``run`` to this process, then execute it to rest (``run_to_rest``); stop
    waiting when a worker got it, it settled or was cancelled, or the process drains (the run stays
    ``scheduled`` in the journal, and any worker starts it when the queue has room)."""
    wf.waiting.add(run)
    try:
        await _await_slot(wf, queue, run, inputs, chain)
    finally:
        wf.waiting.discard(run)


async def _await_slot(wf: Workflow, queue: Queue, run: str, inputs: Any, chain: tuple[str, ...]) -> None:
    waits = queue.waits
    waits.runs[run] = wf.holder
    try:
        await _wait_in_line(wf, queue, run, inputs, chain)
    finally:
        left = waits.leave(run)
        if left is not None:  # granted by another waiter's ask as this one stopped waiting: give it back
            slot_done(queue)
            with contextlib.suppress(TeloError):
                await wf.store.release(run, left)


async def _wait_in_line(wf: Workflow, queue: Queue, run: str, inputs: Any, chain: tuple[str, ...]) -> None:
    store = wf.store
    looked = -1
    while True:
        if shutdown.draining():
            wf.app.run_rested(RunOutcome(run, "scheduled"))
            return
        try:
            fence, looked = await queue.waits.take(wf.store, wf.app.clock, queue, run, looked)
            # (granted a debounced run: a later start may have given it newer inputs, which the journal holds)
            record = None if fence is not None and queue.keys.debounce is None else await store.read_run(run)
        except TeloError as exc:
            if not halts(exc):
                raise
            wf.app.run_rested(RunOutcome(run, "scheduled"))
            return  # the admission is journaled: a worker starts the run once the journal answers
        if fence is not None:
            if record is not None and record.inputs is not None:
                inputs = record.decoded_inputs()
            await wf.run_to_rest(run, inputs, fence, chain=chain, queued=queue)
            return
        if record is None or record.terminal:
            if record is not None:
                wf.app.run_rested(_settled(record))
            return
        # claimed by this process's holder: an ask of another waiter here granted it and has yet to hand it over
        mine = record.claim is not None and record.claim.holder == wf.holder
        if record.status != "scheduled" and claim_is_live(record.claim, wf.app.clock.now_ms()) and not mine:
            holder = record.claim.holder if record.claim is not None else None
            wf.app.run_rested(RunOutcome(run, "elsewhere", holder=holder))
            return  # a worker was granted it first
        if record.status == "parked":
            wf.app.run_rested(RunOutcome(run, "parked", parked=record.parked.to_json() if record.parked else None))
            return  # executed elsewhere and parked meanwhile: whoever is due to continue it does
        await queue.waits.pause(run, SLOT_RECHECK_MS / 1000)


def _settled(record: Any) -> RunOutcome:
    if record.status == "completed":
        result = record.decoded_result()
        from telo.journal.model import NO_VALUE

        return RunOutcome(record.run, "completed", result=None if result is NO_VALUE else result,
                          has_result=result is not NO_VALUE)
    return RunOutcome(record.run, record.status, error=dict(record.error) if record.error else None)
