"""Operating durable schedules (issue 17): list, show, pause, resume, trigger, backfill — the one layer
``telo schedules``, the Python API (``App.schedules``…) and the dashboard call, so they agree.

Every action is recorded in the schedule's ledger (:mod:`telo.kinds.schedule_ledger`) with who did it, when and
why, before it takes effect: the process deciding the schedule's ticks reads it at its next beat (within
:data:`telo.kinds.schedule.POLL_S`). ``trigger`` and ``backfill`` admit their runs here and now; a worker
executes them like any due run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from telo.clock import SYSTEM_CLOCK, Clock
from telo.errors import Code, TeloError
from telo.journal.store import Store
from telo.kinds import schedule_ledger as ledger
from telo.kinds.cron import between, tick_text
from telo.kinds.schedule import Schedule
from telo.runtime.app import Application

MAX_BACKFILL: Final = 1_000


@contextmanager
def manifest_app(manifest: str, store: Store | None = None, *, clock: Clock = SYSTEM_CLOCK) -> Iterator[Application]:
    """``manifest``'s application with every resource initialised (its schedules' policies checked, its
    workflows compiled) and nothing started, on ``clock``. Its journals are opened — never created: a journal
    that is not there is ``ERR_JOURNAL_NOT_FOUND``, as for every command that reads runs — except that a manifest
    with one journal uses ``store`` when given (the dashboard's, left open). Closed on exit."""
    from telo.kinds.controllers import load_application
    from telo.kinds.journals import Journal
    from telo.operations.journals import require_exists

    app = load_application(manifest, clock=clock)
    app.create_resources()
    journals = [r for r in app.resources.values() if isinstance(r, Journal)]
    if store is not None and len(journals) == 1:
        journals[0].use_store(store)
    else:
        for journal in journals:
            path = journal.local_path()
            require_exists(path or manifest, path)

    async def init() -> None:
        for resource in app.resources.values():
            await resource.init()

    try:
        asyncio.run(init())
        yield app
    finally:
        asyncio.run(app.close())


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """A schedule as an operator sees it: its definition, its state, and what it did lately. Its JSON writes
    every instant as RFC 3339 UTC, and durations in milliseconds (``catchUpWindowMs``, ``jitterMs``)."""

    name: str
    kind: str
    durable: bool
    ticks: str  # "cron '*/5 * * * *' in UTC", "every 30s"
    invoke: str
    policy: dict[str, Any]
    paused: bool
    pause: ledger.Operation | None
    created_ms: int | None
    last: ledger.TickDecision | None  # the last tick decided
    next_ms: int | None  # the next tick to come (None: paused, ended, or not durable)
    holder: str | None  # the process deciding its ticks now
    recent: tuple[ledger.TickDecision, ...]
    ops: tuple[ledger.Operation, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "kind": self.kind, "durable": self.durable, "ticks": self.ticks,
            "invoke": self.invoke, "policy": self.policy, "paused": self.paused,
            "pause": self.pause.to_json() if self.pause else None,
            "created": _text(self.created_ms),
            "last": self.last.to_json() if self.last else None,
            "next": _text(self.next_ms), "holder": self.holder,
            "recent": [d.to_json() for d in self.recent], "ops": [o.to_json() for o in self.ops],
        }


def _text(ms: int | None) -> str | None:
    """An instant as every member of a view's JSON writes it: RFC 3339 UTC (None stays None)."""
    return None if ms is None else tick_text(ms)


def find_schedule(app: Application, name: str) -> Schedule:
    """The durable schedule ``name`` of ``app`` (``ERR_SCHEDULE_NOT_FOUND``, naming the ones it has)."""
    resource = app.resources.get(name)
    if isinstance(resource, Schedule) and resource.durable:
        return resource
    names = sorted(n for n, r in app.resources.items() if isinstance(r, Schedule) and r.durable)
    extra = " (an in-process timer: it keeps no record to operate)" if isinstance(resource, Schedule) else ""
    raise TeloError(Code.SCHEDULE_NOT_FOUND, f"{name!r} is not a durable schedule of {app.manifest.source}{extra}",
                    hint=f"its durable schedules: {', '.join(names) or 'none'}", data={"schedule": name})


def schedules(app: Application) -> list[Schedule]:
    return sorted((r for r in app.resources.values() if isinstance(r, Schedule)), key=lambda s: s.name)


def view(schedule: Schedule, now_ms: int) -> ScheduleView:
    """What :class:`ScheduleView` says of ``schedule`` now (an in-process one: its definition only)."""
    policy = schedule.policy
    info = {"catchUp": policy.catch_up, "catchUpWindowMs": policy.catch_up_window_ms, "overlap": policy.overlap,
            "jitterMs": policy.jitter_ms, "startAt": _text(policy.start_at_ms), "endAt": _text(policy.end_at_ms),
            "pauseOnFailure": policy.pause_on_failure}
    if not schedule.durable:
        return ScheduleView(schedule.name, schedule.kind, False, schedule.ticks(now_ms).describe(),
                            schedule.target.name, {}, False, None, None, None, None, None, (), ())
    store = schedule.workflow.journal.store
    state = ledger.read(store, schedule.name)
    record = store.read_run(ledger.ledger_id(schedule.name))
    claim = record.claim if record is not None else None
    holder = claim.holder if claim is not None and claim.until is not None and claim.until > now_ms else None
    ticks = schedule.ticks(schedule.anchor(state, now_ms))
    start = now_ms if policy.start_at_ms is None else max(now_ms, policy.start_at_ms - 1)
    nxt: int | None = ticks.after(max(start, state.cursor_ms or start))
    if state.paused or (policy.end_at_ms is not None and nxt is not None and nxt > policy.end_at_ms):
        nxt = None
    return ScheduleView(schedule.name, schedule.kind, True, ticks.describe(), schedule.workflow.name, info,
                        state.paused, state.pause, state.created_ms, state.recent[-1] if state.recent else None,
                        nxt, holder, state.recent, state.ops)


def pause(schedule: Schedule, now_ms: int, *, by: str, reason: str | None = None) -> ledger.Operation:
    """Pause: its due ticks are skipped ("paused") until a resume. Recorded even when already paused."""
    return _record(schedule, ledger.Operation("pause", now_ms, by, reason), now_ms)


def resume(schedule: Schedule, now_ms: int, *, by: str, reason: str | None = None) -> ledger.Operation:
    """Resume: ticks from now on fire again; the paused time is not replayed."""
    return _record(schedule, ledger.Operation("resume", now_ms, by, reason), now_ms)


def trigger(schedule: Schedule, now_ms: int, *, by: str, reason: str | None = None) -> str:
    """Start one run now, outside the ticks (``<schedule>@trigger-<RFC 3339 now>``, then ``~2``, ``~3``… for
    triggers within one millisecond); its inputs are those of a tick at this instant. Recorded, then admitted.
    Returns the run id."""
    base = f"{schedule.name}@trigger-{tick_text(now_ms)}"
    run = base
    for n in range(2, 1000):
        if schedule.workflow.journal.store.read_run(run) is None:
            break
        run = f"{base}~{n}"
    _record(schedule, ledger.Operation("trigger", now_ms, by, reason, {"run": run}), now_ms)
    if not schedule.admit(run, now_ms, due_ms=now_ms):
        raise TeloError(Code.DURABLE_RUN_EXISTS, f"a trigger of {schedule.name!r} raced another for {run!r}",
                        hint="trigger again", data={"schedule": schedule.name, "run": run})
    return run


def backfill(schedule: Schedule, from_ms: int, to_ms: int, now_ms: int, *, by: str,
             reason: str | None = None) -> list[str]:
    """Start the run of every past tick in ``[from_ms, to_ms]`` that has none (a tick that fired keeps its run:
    the ids are the ticks' own; a tick buffered behind a running one waits its turn), all due now. At most
    :data:`MAX_BACKFILL` ticks; ``to_ms`` is clamped to now (a future tick is the schedule's to decide). Returns
    the runs admitted."""
    if from_ms > now_ms:
        raise TeloError(Code.SCHEDULE_RANGE_INVALID, f"backfill of {schedule.name!r}: FROM ({tick_text(from_ms)}) is "
                        "in the future", hint="a backfill starts past ticks; the schedule fires the ones to come",
                        data={"schedule": schedule.name})
    asked_to, to_ms = to_ms, min(to_ms, now_ms)
    if to_ms < from_ms:
        raise TeloError(Code.SCHEDULE_RANGE_INVALID, f"backfill of {schedule.name!r}: TO ({tick_text(to_ms)}) is "
                        f"before FROM ({tick_text(from_ms)})", hint="give FROM first", data={"schedule": schedule.name})
    state = ledger.read(schedule.workflow.journal.store, schedule.name)
    ticks = list(between(schedule.ticks(schedule.anchor(state, now_ms)), from_ms - 1, to_ms, MAX_BACKFILL + 1))
    if len(ticks) > MAX_BACKFILL:
        raise TeloError(Code.SCHEDULE_RANGE_INVALID, f"backfill of {schedule.name!r}: {tick_text(from_ms)} .. "
                        f"{tick_text(to_ms)} holds more than {MAX_BACKFILL} ticks",
                        hint="split the range into backfills of at most 1000 ticks", data={"schedule": schedule.name})
    if not ticks:
        raise TeloError(Code.SCHEDULE_RANGE_INVALID, f"backfill of {schedule.name!r}: no tick falls in "
                        f"{tick_text(from_ms)} .. {tick_text(to_ms)}",
                        hint=f"its ticks: {schedule.ticks(0).describe()}",
                        data={"schedule": schedule.name})
    _record(schedule, ledger.Operation("backfill", now_ms, by, reason, {
        "from": tick_text(from_ms), "to": tick_text(asked_to), "ticks": len(ticks)}), now_ms)
    waiting = {d.run for d in state.chain}  # (the op recorded since changes no tick decision)
    started = []
    for tick in ticks:
        run = ledger.tick_run_id(schedule.name, tick)
        if run not in waiting and schedule.admit(run, tick, due_ms=now_ms):
            started.append(run)
    return started


def _record(schedule: Schedule, op: ledger.Operation, now_ms: int) -> ledger.Operation:
    store = schedule.workflow.journal.store
    ledger.ensure(store, schedule.name, now_ms, created=False)
    return ledger.record_op(store, schedule.name, op)
