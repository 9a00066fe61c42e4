"""``telo schedules list|show|pause|resume|trigger|backfill``: a manifest's ``Scheduler.Cron`` and
``Scheduler.Interval`` resources — their definition and policies, what their ledgers say they did with each tick
(fired, buffered, skipped and why) and what operators did to them — and the operator's actions on a durable one
(issue 17). The rules are :mod:`telo.operations.schedules`', which the Python API and the dashboard call too.

Every command takes ``--json``; human output is a table or ``key: value`` lines. A name that is not a durable
schedule of the manifest is ``ERR_SCHEDULE_NOT_FOUND`` (exit 1), its hint naming the ones it has; a backfill range
that is reversed, holds no tick or too many, or is not a time is ``ERR_SCHEDULE_RANGE_INVALID`` (exit 3), with
nothing written; a journal that is not there is ``ERR_JOURNAL_NOT_FOUND`` (exit 1).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from telo.cli.common import (
    EXIT_ERROR,
    NONE_SHOWN,
    SOURCE_KEY,
    ManifestPath,
    echo_hint,
    journal_compat_option,
    json_option,
    key_values,
    out_json,
    print_diagnostics,
    table,
    time_text,
)
from telo.errors import Code, TeloError
from telo.kinds import schedule_ledger as ledger
from telo.kinds.cron import tick_text
from telo.kinds.schedule import POLL_S, Schedule
from telo.operations import schedules as ops
from telo.operations.queue_limits import operator
from telo.operations.schedules import ScheduleView
from telo.runtime.app import Application

manifest_argument = click.argument("manifest", type=ManifestPath())
name_argument = click.argument("name")
reason_option = click.option("--reason", metavar="TEXT", help="Why: recorded with the action in the schedule's ledger.")
by_option = click.option("--by", metavar="WHO", help="Who does it, recorded with it (default: user@host).")


@click.group("schedules")
def schedules() -> None:
    """A manifest's schedules: their ticks and what was done with each; pause, resume, trigger, backfill."""


@contextmanager
def loaded(manifest: str) -> Iterator[Application]:
    """The manifest's application, initialised, its journals open (never created); a manifest that does not
    load prints its problems (exit 3)."""
    from telo.manifest import ManifestLoadError
    from telo.operations.project import JournalSource

    ctx = click.get_current_context(silent=True)
    if ctx is not None:  # the commands a hint names reach the manifest's journal as pasted (--manifest M)
        ctx.meta[SOURCE_KEY] = JournalSource(manifest=manifest, origin="--manifest")
    try:
        with ops.manifest_app(manifest) as app:
            yield app
    except ManifestLoadError as exc:
        print_diagnostics(exc.diagnostics)
        click.echo(f"error: {exc.code}: {manifest} has {len(exc.diagnostics)} problem(s)", err=True)
        sys.exit(EXIT_ERROR)


@schedules.command("list")
@manifest_argument
@json_option
def list_command(manifest: str, as_json: bool) -> None:
    """Every schedule of MANIFEST: its ticks, what it invokes, its state, its last and next tick."""
    with loaded(manifest) as app:
        now = app.clock.now_ms()
        views = [ops.view(s, now) for s in ops.schedules(app)]
    if as_json:
        out_json({"schedules": [view_json(v) for v in views]})
        return
    if not views:
        click.echo(f"{manifest} declares no Scheduler.Cron or Scheduler.Interval", err=True)
        return
    table(["NAME", "KIND", "TICKS", "INVOKE", "STATE", "LAST", "NEXT", "HOLDER"],
          [[v.name, v.kind, v.ticks, v.invoke, state_word(v),
            f"{tick_text(v.last.tick_ms)} {v.last.action}" if v.last else NONE_SHOWN,
            tick_text(v.next_ms) if v.next_ms is not None else NONE_SHOWN, v.holder or NONE_SHOWN] for v in views])


@schedules.command("show")
@manifest_argument
@name_argument
@json_option
def show_command(manifest: str, name: str, as_json: bool) -> None:
    """One durable schedule of MANIFEST: its definition and policies, its state and next tick, its recent tick
    decisions (with why a tick was skipped) and the operations done to it (who, when, why)."""
    with loaded(manifest) as app:
        view = ops.view(ops.find_schedule(app, name), app.clock.now_ms())
    if as_json:
        out_json(view_json(view))
        return
    key_values(summary(view, manifest))
    if view.recent:
        click.echo()
        table(["TICK", "ACTION", "RUN", "REASON", "DECIDED"], [decision_row(d) for d in view.recent], title="ticks")
    if view.ops:
        click.echo()
        table(["AT", "OP", "BY", "REASON", "DETAIL"],
              [[time_text(o.at), o.op, o.by, o.reason or NONE_SHOWN, op_detail(o)] for o in view.ops],
              title="operations")


@schedules.command("pause")
@manifest_argument
@name_argument
@reason_option
@by_option
@json_option
def pause_command(manifest: str, name: str, reason: str | None, by: str | None, as_json: bool) -> None:
    """Pause schedule NAME: its due ticks are skipped (recorded "paused") until a resume. The process deciding its
    ticks reads the pause within a few seconds; a run already started goes on."""
    _pause_or_resume(manifest, name, "pause", reason, by, as_json)


@schedules.command("resume")
@manifest_argument
@name_argument
@reason_option
@by_option
@json_option
def resume_command(manifest: str, name: str, reason: str | None, by: str | None, as_json: bool) -> None:
    """Resume schedule NAME: ticks from now on fire again; the ticks of the paused time are not replayed
    (`telo schedules backfill` starts them)."""
    _pause_or_resume(manifest, name, "resume", reason, by, as_json)


def _pause_or_resume(manifest: str, name: str, action: str, reason: str | None, by: str | None,
                     as_json: bool) -> None:
    with loaded(manifest) as app:
        schedule = ops.find_schedule(app, name)
        now = app.clock.now_ms()
        was = ops.view(schedule, now).paused
        act = ops.pause if action == "pause" else ops.resume
        op = act(schedule, now, by=by or operator(), reason=reason)
        view = ops.view(schedule, now)
    if as_json:
        out_json({"schedule": name, **op.to_json(), "paused": view.paused, "wasPaused": was})
        return
    if view.paused:
        state = "paused (it was already)" if was else "paused: its due ticks are skipped until `telo schedules resume`"
    else:
        state = "active (it was not paused)" if not was else "active: ticks from now on fire again"
    lines: dict[str, Any] = {"schedule": name, "state": state, "by": op.by, "at": time_text(op.at),
                             "reason": op.reason, "next": tick_text(view.next_ms) if view.next_ms is not None else None}
    key_values(lines)
    _deciding(view, manifest)


@schedules.command("trigger")
@manifest_argument
@name_argument
@reason_option
@by_option
@journal_compat_option
@json_option
def trigger_command(manifest: str, name: str, reason: str | None, by: str | None, as_json: bool) -> None:
    """Start one run of schedule NAME now, outside its ticks: <NAME>@trigger-<RFC 3339 now> (~2, ~3… for triggers
    within one millisecond), with the inputs a tick at this instant would have. A worker (`telo worker MANIFEST`)
    executes it."""
    who = by or operator()
    with loaded(manifest) as app:
        schedule = ops.find_schedule(app, name)
        now = app.clock.now_ms()
        run = ops.trigger(schedule, now, by=who, reason=reason)
        workflow = schedule.workflow.name
    data = {"schedule": name, "run": run, "workflow": workflow, "at": tick_text(now), "by": who, "reason": reason}
    if as_json:
        out_json({k: v for k, v in data.items() if v is not None})
        return
    key_values({**data, "at": time_text(now)})
    echo_hint(f"it is due now: a worker (`telo worker {shlex.quote(manifest)}`) executes it; "
              f"`telo status {shlex.quote(run)}` follows it")


@schedules.command("backfill")
@manifest_argument
@name_argument
@click.argument("start", metavar="FROM")
@click.argument("end", metavar="TO")
@reason_option
@by_option
@journal_compat_option
@json_option
def backfill_command(manifest: str, name: str, start: str, end: str, reason: str | None, by: str | None,
                     as_json: bool) -> None:
    """Start the run of every tick of schedule NAME from FROM to TO (both included; RFC 3339 or epoch ms) that has
    none: <NAME>@<RFC 3339 tick>, the id the tick itself would have had, so a tick that fired is never run twice.
    At most 1000 ticks; the runs are due now, and a worker (`telo worker MANIFEST`) executes them."""
    from_ms, to_ms = instant(start, "FROM"), instant(end, "TO")
    who = by or operator()
    with loaded(manifest) as app:
        schedule = ops.find_schedule(app, name)
        now = app.clock.now_ms()
        admitted = ops.backfill(schedule, from_ms, to_ms, now, by=who, reason=reason)
        ticks = _backfilled_ticks(schedule, now, who, len(admitted))
    data: dict[str, Any] = {"schedule": name, "from": tick_text(from_ms), "to": tick_text(to_ms), "ticks": ticks,
                            "admitted": admitted, "existing": ticks - len(admitted), "by": who, "reason": reason}
    if as_json:
        out_json({k: v for k, v in data.items() if v is not None})
        return
    key_values({**data, "admitted": f"{len(admitted)} run(s)",
                "existing": f"{ticks - len(admitted)} tick(s) had their run already"})
    if admitted:
        click.echo()
        table(["RUN"], [[r] for r in admitted])
        echo_hint(f"they are due now: a worker (`telo worker {shlex.quote(manifest)}`) executes them")


def _backfilled_ticks(schedule: Schedule, now: int, by: str, admitted: int) -> int:
    """How many ticks the backfill just recorded covered (its ledger entry says)."""
    state = ledger.read(schedule.workflow.journal.store, schedule.name)
    for op in reversed(state.ops):
        if op.op == "backfill" and op.at == now and op.by == by and isinstance(op.data.get("ticks"), int):
            return int(op.data["ticks"])
    return admitted


def instant(text: str, which: str) -> int:
    """FROM or TO: RFC 3339 text or epoch ms (``ERR_SCHEDULE_RANGE_INVALID`` otherwise)."""
    from telo.kinds.addressing import instant_ms

    try:
        return instant_ms(int(text) if text.isdigit() else text, Code.SCHEDULE_RANGE_INVALID, which)
    except TeloError as exc:
        raise TeloError(Code.SCHEDULE_RANGE_INVALID, exc.message, hint="give FROM and TO as RFC 3339 "
                        "(2026-12-01T00:00:00Z) or epoch milliseconds", data={"value": text}) from None


# --- what the commands print --------------------------------------------------------------------------------


def view_json(view: ScheduleView) -> dict[str, Any]:
    """:meth:`ScheduleView.to_json`: instants as RFC 3339 UTC (ticks to the second, as their run ids carry them;
    milliseconds only when an instant has some), durations in milliseconds."""
    return view.to_json()


def state_word(view: ScheduleView) -> str:
    if not view.durable:
        return "in-process"
    return "paused" if view.paused else "active"


def span(ms: int) -> str:
    """A duration as a manifest writes it: ``1d``, ``90m``, ``30s``, ``250ms``."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def summary(view: ScheduleView, manifest: str) -> dict[str, Any]:
    """``telo schedules show``'s lines: the definition, the state, the policies."""
    out: dict[str, Any] = {"schedule": view.name, "kind": view.kind, "ticks": view.ticks, "invoke": view.invoke}
    pause = view.pause
    if view.paused:
        why = f": {pause.reason}" if pause and pause.reason else ""
        out["state"] = f"paused by {pause.by} at {time_text(pause.at)}{why}" if pause else "paused"
    else:
        out["state"] = "active"
    out["created"] = time_text(view.created_ms) if view.created_ms is not None else "not yet (no worker has run it)"
    out["next"] = tick_text(view.next_ms) if view.next_ms is not None else \
        "none while paused" if view.paused else "none (its endAt has passed)"
    out["holder"] = view.holder or \
        f"none: no process decides its ticks now (`telo worker {shlex.quote(manifest)}` would)"
    policy = view.policy
    out["catchUp"] = f"{policy['catchUp']}, within {span(int(policy['catchUpWindowMs']))}"
    out["overlap"] = policy["overlap"]
    out["jitter"] = span(int(policy["jitterMs"])) if policy.get("jitterMs") else "none"
    for key in ("startAt", "endAt"):
        if policy.get(key) is not None:
            out[key] = time_text(policy[key])
    out["pauseOnFailure"] = "true" if policy.get("pauseOnFailure") else "false"
    return out


def decision_row(d: ledger.TickDecision) -> list[str]:
    tick = tick_text(d.tick_ms)
    if d.from_ms is not None and d.from_ms != d.tick_ms:
        tick = f"{tick_text(d.from_ms)} .. {tick}"
    reason = d.reason or NONE_SHOWN
    if d.count != 1:
        reason = f"{reason} ({d.count} ticks)"
    action = f"{d.action} (late)" if d.late and d.action != "skip" else d.action
    return [tick, action, d.run or NONE_SHOWN, reason, time_text(d.decided_at)]


def op_detail(op: ledger.Operation) -> str:
    data = op.data
    if op.op == "trigger" and "run" in data:
        return f"run {data['run']}"
    if op.op == "backfill":
        return f"{data.get('from')} .. {data.get('to')}, {data.get('ticks')} tick(s)"
    return ", ".join(f"{k} {v}" for k, v in data.items()) or NONE_SHOWN


def _deciding(view: ScheduleView, manifest: str) -> None:
    if view.holder:
        click.echo(f"the process deciding its ticks ({view.holder}) reads it within {POLL_S:.0f} s", err=True)
    else:
        echo_hint(f"no process decides its ticks now; a worker (`telo worker {shlex.quote(manifest)}`) reads it "
                  "when it starts")


COMMANDS = [schedules]
