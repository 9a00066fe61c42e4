"""What an operator does to runs, as :class:`~telo.api.aio.AsyncApp` methods: list them, deliver, send messages
and read events, cancel,
resume, resolve, fork, restore, and read checkpoints and journals (``telo runs list``, ``telo deliver`` …); and to
queues and durable schedules (``telo queues``, ``telo schedules``).

Each is a call into :mod:`telo.operations` (the rules the CLI and the dashboard use) plus what only an
in-process application can add: continuing the run it made ready, when its workflow is one of this
application's. Kept apart from :mod:`telo.api.aio`, which runs the application, so neither grows past what one
reader holds in mind; :class:`OperatorActions` is a mixin ``AsyncApp`` inherits.
"""

from __future__ import annotations

import asyncio
import datetime
from abc import abstractmethod
from collections.abc import AsyncIterator
from typing import Any

from telo.api.results import (
    Delivery,
    JournalEntry,
    Resolution,
    RunLike,
    RunList,
    RunRef,
    RunStatus,
    Wait,
    journal_entries,
    record_status,
    run_id,
    seconds,
)
from telo.clock import Clock
from telo.durable import messages, streams
from telo.durable.messages import Event, Sent
from telo.durable.streams import StreamPage, StreamSummary
from telo.errors import Code, TeloError
from telo.journal.eventlog import Checkpoint
from telo.journal.model import NO_VALUE, RunFilter, RunRecord
from telo.journal.store import Store
from telo.kinds.queue import Queue
from telo.kinds.schedule import Schedule
from telo.operations import actions, queue_limits, runs
from telo.operations import queues as queue_ops
from telo.operations import schedules as schedule_ops
from telo.operations.queue_limits import UNSET, Limit, Rate
from telo.operations.schedules import ScheduleView
from telo.runtime.app import Application

__all__ = ["OperatorActions"]


class OperatorActions:
    """The operator's methods of :class:`~telo.api.aio.AsyncApp` (module docstring); what they need of it is
    declared here abstract."""

    clock: Clock
    application: Application

    @abstractmethod
    async def _ready(self) -> None: ...

    @abstractmethod
    def _store(self) -> Store: ...

    @abstractmethod
    async def _read(self, run: str) -> RunRecord: ...

    @abstractmethod
    async def _continue(self, run: str, *, background: bool) -> bool: ...

    @abstractmethod
    async def status(self, run: RunLike) -> RunStatus: ...

    async def runs(self, status: str | None = None, workflow: str | None = None, since: Any = None,
                   limit: int = 100, *, after: str | None = None) -> RunList:
        """A page of runs, newest first (``telo runs list``): filtered by ``status``, ``workflow`` and
        ``since`` (epoch ms, a ``datetime``/``Timestamp``, RFC 3339 text, or a duration back from now such as
        ``"2h"``); ``after`` is the previous page's ``next``. Rows come from the run records alone — their
        ``unconfirmed_effects`` are not read: :meth:`status` one run for those."""
        await self._ready()
        flt = RunFilter(status=status, workflow=workflow,
                        since=None if since is None else runs.since_ms(since, self.clock.now_ms()),
                        limit=limit, after=after)
        runs.check_filter(flt)
        page = await asyncio.to_thread(runs.list_runs, self._store(), flt)
        return RunList(tuple(record_status(r) for r in page.runs), page.next)

    async def deliver(self, token: str, payload: Any = None, *, continue_run: bool = True) -> Delivery:
        """Deliver ``payload`` to the run parked on ``token`` (validated against the schema its Await recorded
        first, ``ERR_DURABLE_PAYLOAD_INVALID``); the run then continues in this process (``continue_run``)."""
        await self._ready()
        out = await asyncio.to_thread(actions.deliver, self._store(), token, payload)
        if not out.delivered or out.run is None:
            return Delivery(False)
        continued = continue_run and await self._continue(out.run, background=True)
        return Delivery(True, out.run, continued)

    async def send(self, run: RunLike, topic: str, payload: Any = None, *, key: str | None = None,
                   continue_run: bool = True) -> Sent:
        """Send a message to the run's receives of ``topic`` (``Durable.Receive``; ``telo send``): durable on return,
        idempotent by ``key`` (a second send with one key writes nothing and answers ``duplicate=True``). A run
        parked on the topic continues in this process (``continue_run``). ``ERR_DURABLE_RUN_NOT_FOUND`` /
        ``ERR_DURABLE_RUN_SETTLED`` for a run nothing would receive it in."""
        await self._ready()
        target = run_id(run)
        out = await asyncio.to_thread(lambda: actions.send(self._store(), target, topic, payload, key=key))
        if out.woke and continue_run:
            await self._continue(target, background=True)
        return out

    async def event(self, run: RunLike, name: str, *, wait: Wait = None) -> Event | None:
        """The latest value the run published under ``name`` (``Durable.Publish``; ``telo events get``), or None;
        with ``wait`` (seconds or ``"30s"``), waits up to that long for one (a run that settles without publishing
        ends the wait)."""
        await self._ready()
        # (a reader's wait is real time, as app.wait's: on the app's clock, a FakeClock, it never ended)
        return await messages.wait_for_event(self._store(), run_id(run), name, int((seconds(wait) or 0) * 1000))

    async def events(self, run: RunLike, name: str | None = None) -> list[Event]:
        """Every event the run published (of ``name``), oldest first (``telo events list``)."""
        await self._ready()
        target = run_id(run)
        return await asyncio.to_thread(lambda: actions.events(self._store(), target, name))

    async def read_stream(self, run: RunLike, stream: str, offset: int = 0) -> StreamPage:
        """One read of a run's stream (``Durable.StreamWrite``): the values from ``offset`` on, ``next`` to read
        from after them, and whether it ``ended`` (closed, or the run settled)."""
        await self._ready()
        target = run_id(run)
        return await asyncio.to_thread(streams.read, self._store(), target, stream, offset)

    async def list_streams(self, run: RunLike) -> list[StreamSummary]:
        """The run's streams (``telo stream list``): name, values written, whether closed."""
        await self._ready()
        target = run_id(run)
        return (await asyncio.to_thread(actions.list_streams, self._store(), target))[0]

    def stream(self, run: RunLike, stream: str, offset: int = 0, *, wait: Wait = None
               ) -> AsyncIterator[tuple[int, Any]]:
        """Every ``(offset, value)`` of a run's stream from ``offset`` on, waiting for more until the stream is
        closed or the run settles (``telo stream read --follow``); with ``wait`` (seconds or ``"30s"``), it also
        ends once that long passes with nothing new."""
        return streams.follow(self._store(), run_id(run), stream, offset, wait_s=seconds(wait))  # (real time)

    async def cancel(self, run: RunLike, reason: str = "cancelled") -> bool:
        """Cancel the run (a body executing now stops at its next step); false if it had already settled."""
        await self._ready()
        return (await asyncio.to_thread(actions.cancel, self._store(), run_id(run), reason)).cancelled

    async def resume(self, run: RunLike, *, force: bool = False, reason: str = "resumed by operator",
                     continue_run: bool = True) -> bool:
        """Continue a parked run now, an operator override recorded in the journal (``telo resume``); a run
        held because its manifest changed continues only with ``force``. False, with nothing written, for a run a
        resume would not move: settled, not parked, or waiting for ``resolve``, ``deliver`` or ``send``
        (``telo resume``'s rule, :func:`telo.operations.actions.resume`; :meth:`status` shows where it waits)."""
        await self._ready()
        target = run_id(run)
        out = await asyncio.to_thread(lambda: actions.resume(self._store(), target, reason, self.clock.now_ms(),
                                                             force=force))
        if not out.resumed:
            return False
        if continue_run:
            await self._continue(target, background=True)
        return True

    async def resolve(self, run: RunLike, path: str, *, redrive: bool = False, skip_with: Any = NO_VALUE,
                      fail: bool = False, continue_run: bool = True) -> Resolution:
        """Answer an unconfirmed effect — a step whose outcome a crash left unknown, where the run parked
        (``telo resolve``): ``redrive=True`` executes it again with the same idempotency key, ``skip_with=VALUE``
        records VALUE as its result, ``fail=True`` fails the run there; exactly one. The answer is journaled
        (``status().unconfirmed_effects`` lists it, before and after the run settles) and the run continues in
        this process (``continue_run``)."""
        chosen = [a for a, on in (("redrive", redrive), ("skip", skip_with is not NO_VALUE), ("fail", fail)) if on]
        if len(chosen) != 1:
            raise ValueError("give exactly one of redrive=True, skip_with=VALUE, fail=True")
        await self._ready()
        target = run_id(run)
        out = await asyncio.to_thread(actions.resolve, self._store(), target, path, chosen[0], skip_with,
                                      self.clock.now_ms())
        continued = continue_run and await self._continue(target, background=True)
        return Resolution(target, path, chosen[0], out.get("resolution"), continued)

    async def fork(self, run: RunLike, checkpoint: int | Checkpoint, new_run: str | None = None, *,
                   keep_keys: bool = False, continue_run: bool = True) -> RunRef:
        """Copy the run's state at ``checkpoint`` into a new run (``new_run``, default ``<run>:fork:<8 hex>``),
        leaving the original untouched; the copy continues from there (``telo fork``). Its steps after the
        checkpoint execute under its own idempotency keys, or — ``keep_keys=True``, recorded in its journal — under
        ``run``'s (``<run>/<step path>``; a fork of such a fork keeps the first run's), so a system that
        deduplicates by key answers them from its record of the original's effects (``telo fork --keep-keys``)."""
        await self._ready()
        out = await asyncio.to_thread(lambda: actions.fork(self._store(), run_id(run), checkpoint, new_run,
                                                           keep_keys=keep_keys))
        if continue_run:
            await self._continue(out.run, background=True)
        return RunRef(out.run, out.workflow, True, out.status)

    async def restore(self, run: RunLike, checkpoint: int | Checkpoint, *, reason: str = "restored by operator",
                      continue_run: bool = True) -> RunStatus:
        """Roll the run back to ``checkpoint`` as a new journal epoch: the steps after it execute again."""
        await self._ready()
        target = run_id(run)
        await asyncio.to_thread(lambda: actions.restore(self._store(), target, checkpoint, reason=reason,
                                                        clock=self.clock))
        if continue_run:
            await self._continue(target, background=True)
        return await self.status(target)

    async def checkpoints(self, run: RunLike) -> list[Checkpoint]:
        """The states the run can be restored to or forked from (its start, each step, each snapshot)."""
        await self._ready()
        return await asyncio.to_thread(runs.checkpoints, self._store(), run_id(run))

    async def journal(self, run: RunLike) -> list[JournalEntry]:
        """The run's journal entries in log order, values decoded."""
        await self._ready()
        target = run_id(run)
        await self._read(target)
        return journal_entries(target, await asyncio.to_thread(self._store().read_entries, target))

    async def queue(self, name: str, *, oldest: int = 10) -> dict[str, Any]:
        """The ``Local.Queue`` ``name`` as ``telo queues show --json`` prints it, times in epoch ms: its limits in
        effect (``limits``), the manifest's (``manifestLimits``), the ``override`` ``telo queues set`` or
        :meth:`set_queue_limits` wrote (None: none), what holds its slots and what waits, with the ``oldest``
        waiting runs (issue 16). An unknown name is ``ERR_QUEUE_NOT_FOUND``."""
        await self._ready()
        resource = self._queue(name)
        await resource.refresh_limits()
        config = queue_ops.config_of(resource)
        state = await asyncio.to_thread(queue_ops.read, resource.journal.store, name, config, oldest=oldest)
        return state.to_json()

    async def set_queue_limits(self, name: str, *, concurrency: Limit = UNSET, worker_concurrency: Limit = UNSET,
                               key_limit: Limit = UNSET, rate_limit: Rate = UNSET, reset: bool = False,
                               by: str | None = None) -> dict[str, Any]:
        """Override limits of the ``Local.Queue`` ``name`` in its journal, for every process on it, without a
        restart (``telo queues set``): an integer ≥ 1, or None for no limit; ``rate_limit`` as ``"100/1m"`` or
        ``{"limit": 100, "period": "1m"}``; a limit not given keeps its value; ``reset=True`` drops the override
        (the manifest's limits hold again). ``by`` is recorded (default ``user@host``). This app applies it at
        once, other processes within about a second; bad values are ``ERR_INVALID_VALUE``, nothing written.
        Returns :meth:`queue`'s view of it afterwards."""
        await self._ready()
        resource = self._queue(name)
        config = queue_ops.config_of(resource)
        await asyncio.to_thread(lambda: queue_limits.set_limits(
            resource.journal.store, config, concurrency=concurrency, worker_concurrency=worker_concurrency,
            key_limit=key_limit, rate_limit=rate_limit, reset=reset, by=by, now_ms=self.clock.now_ms(),
            spelling=queue_limits.API))
        return await self.queue(name, oldest=0)

    def _queue(self, name: str) -> Queue:
        resource = self.application.resources.get(name)
        if isinstance(resource, Queue):
            return resource
        names = sorted(n for n, r in self.application.resources.items() if isinstance(r, Queue))
        raise TeloError(Code.QUEUE_NOT_FOUND, f"{name!r} is not a Local.Queue of this app",
                        hint=f"its queues: {', '.join(names) or 'none'}", data={"queue": name})

    # --- durable schedules (issue 17; telo schedules) ------------------------------------------------------

    async def schedules(self) -> list[ScheduleView]:
        """Every ``Scheduler.Cron`` and ``Scheduler.Interval`` of the app, in name order (``telo schedules list``):
        a durable one with its state, last and next tick and ledger; an in-process timer with its definition only
        (``durable`` false)."""
        await self._ready()
        now = self.clock.now_ms()
        found = schedule_ops.schedules(self.application)
        return await asyncio.to_thread(lambda: [schedule_ops.view(s, now) for s in found])

    async def schedule_view(self, name: str) -> ScheduleView:
        """The durable schedule ``name`` (``telo schedules show``): its definition and policies, whether it is
        paused (and by whom), its next tick, the process deciding its ticks, its recent tick decisions (with why a
        tick was skipped) and the operations done to it. Not a durable schedule: ``ERR_SCHEDULE_NOT_FOUND``."""
        await self._ready()
        schedule = schedule_ops.find_schedule(self.application, name)
        return await asyncio.to_thread(schedule_ops.view, schedule, self.clock.now_ms())

    async def pause_schedule(self, name: str, reason: str | None = None, *, by: str | None = None) -> ScheduleView:
        """Pause the durable schedule ``name`` (``telo schedules pause``): its due ticks are skipped, recorded
        "paused", until :meth:`resume_schedule`. Recorded in its ledger with ``by`` (default ``user@host``) and
        ``reason``; the process deciding its ticks reads it within seconds. Returns :meth:`schedule_view` after."""
        return await self._schedule_op(name, schedule_ops.pause, reason, by)

    async def resume_schedule(self, name: str, reason: str | None = None, *, by: str | None = None) -> ScheduleView:
        """Resume the durable schedule ``name`` (``telo schedules resume``): ticks from now on fire; the paused
        time is not replayed (:meth:`backfill_schedule` does that). Recorded like a pause."""
        return await self._schedule_op(name, schedule_ops.resume, reason, by)

    async def trigger_schedule(self, name: str, reason: str | None = None, *, by: str | None = None) -> str:
        """Admit one run of the durable schedule ``name`` now, outside its ticks (``telo schedules trigger``):
        ``<name>@trigger-<RFC 3339 now>``, with the inputs a tick at this instant has, due now. Recorded in the
        ledger. Nothing executes here: :meth:`serve`, a worker or :meth:`run_due` starts it. Returns its run id."""
        await self._ready()
        schedule = schedule_ops.find_schedule(self.application, name)
        now, who = self.clock.now_ms(), by or queue_limits.operator()
        return await asyncio.to_thread(lambda: schedule_ops.trigger(schedule, now, by=who, reason=reason))

    async def backfill_schedule(self, name: str, start: Any, end: Any, reason: str | None = None, *,
                                by: str | None = None) -> list[str]:
        """Admit the run of every tick of the durable schedule ``name`` from ``start`` to ``end`` (both included;
        a ``datetime``, a :class:`~telo.values.Timestamp`, RFC 3339 text or epoch ms) that has none — its id the
        tick's own, ``<name>@<RFC 3339 tick>``, so no tick ever runs twice (``telo schedules backfill``). At most
        1000 ticks, all due now; recorded in the ledger. A reversed range, one with no tick or too many, or a
        value that is not a time is ``ERR_SCHEDULE_RANGE_INVALID``, nothing written. Nothing executes here (as
        :meth:`trigger_schedule`). Returns the run ids admitted, in tick order."""
        await self._ready()
        schedule = schedule_ops.find_schedule(self.application, name)
        from_ms, to_ms = schedule_instant(start, "start"), schedule_instant(end, "end")
        now, who = self.clock.now_ms(), by or queue_limits.operator()
        return await asyncio.to_thread(lambda: schedule_ops.backfill(schedule, from_ms, to_ms, now, by=who,
                                                                     reason=reason))

    async def _schedule_op(self, name: str, act: Any, reason: str | None, by: str | None) -> ScheduleView:
        await self._ready()
        schedule: Schedule = schedule_ops.find_schedule(self.application, name)
        now, who = self.clock.now_ms(), by or queue_limits.operator()

        def record() -> ScheduleView:
            act(schedule, now, by=who, reason=reason)
            return schedule_ops.view(schedule, now)

        return await asyncio.to_thread(record)


def schedule_instant(value: Any, which: str) -> int:
    """A backfill bound in epoch ms: a ``datetime`` (a naive one is local time), a ``Timestamp``, RFC 3339 text
    or epoch ms (an int, or its digits); ``ERR_SCHEDULE_RANGE_INVALID`` otherwise."""
    from telo.kinds.addressing import instant_ms

    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    try:
        return instant_ms(int(value) if isinstance(value, str) and value.isdigit() else value,
                          Code.SCHEDULE_RANGE_INVALID, which)
    except TeloError as exc:
        raise TeloError(Code.SCHEDULE_RANGE_INVALID, exc.message, hint="give a datetime, RFC 3339 text "
                        "(2026-12-01T00:00:00Z) or epoch milliseconds", data={"value": repr(value)}) from None
