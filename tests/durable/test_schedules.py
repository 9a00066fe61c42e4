"""Durable schedules (issue 17) on real journals with a fake clock: every tick fires exactly once across
applications sharing a journal, a stale holder is fenced out, each catch-up and overlap policy does what
docs/schedules.md says, pauseOnFailure, DST in a non-UTC zone, jitter, compaction of the ledger, and the
in-process form. The schedule's runs do their effect through ``SchedShop.Work``, which counts each tick it saw."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import telo
from telo.clock import SYSTEM_CLOCK, Clock, FakeClock
from telo.errors import TeloError
from telo.journal.model import RunFilter
from telo.kinds import schedule_ledger as ledger
from telo.kinds.schedule import LEAD_TTL_MS, Schedule
from telo.operations import schedules as ops
from tests.pg_support import fresh_prefix, pg_url

effects: Counter[str] = Counter()


@telo.kind("SchedShop.Work")
def work(inputs: dict[str, Any]) -> dict[str, Any]:
    effects[str(inputs["tick"])] += 1
    return {"tick": inputs["tick"]}


@telo.kind("SchedShop.Fail")
def fail(inputs: dict[str, Any]) -> None:
    raise telo.TeloError("ERR_REPORT_FAILED", "the report could not be built")


MIN = 60_000
T0 = 1_767_225_600_000  # FakeClock's start: 2026-01-01T00:00:00Z


def manifest(location: str, schedule: str) -> str:
    return f"""\
kind: Telo.Application
metadata: {{ name: Sched, version: 1.0.0 }}
imports: {{ Local: durable-local, Durable: durable, Journal: {location.split('|')[0]}, Schedule: scheduler,
           Shop: SchedShop }}
---
kind: Journal.Journal
metadata: {{ name: runs }}
{location.split('|')[1]}
---
kind: Shop.Work
metadata: {{ name: work }}
---
kind: Shop.Fail
metadata: {{ name: fail }}
---
kind: Durable.Sleep
metadata: {{ name: nap }}
for: 150s
---
kind: Local.Workflow
metadata: {{ name: job }}
journal: !ref runs
inputs: {{ tick: !cel "inputs.tick" }}
steps:
  - {{ name: work, invoke: !ref work, inputs: {{ tick: !cel "inputs.tick" }} }}
---
kind: Local.Workflow
metadata: {{ name: slow }}
journal: !ref runs
inputs: {{ tick: !cel "inputs.tick" }}
steps:
  - {{ name: work, invoke: !ref work, inputs: {{ tick: !cel "inputs.tick" }} }}
  - {{ name: nap, invoke: !ref nap }}
---
kind: Local.Workflow
metadata: {{ name: failing }}
journal: !ref runs
steps:
  - {{ name: build, invoke: !ref fail }}
---
{schedule}
"""


def cron(expression: str, invoke: str = "job", extra: str = "", name: str = "every") -> str:
    return f'kind: Schedule.Cron\nmetadata: {{ name: {name} }}\ncron: "{expression}"\ninvoke: !ref {invoke}\n{extra}'


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}"
    return f"durable-journal-postgres|url: {pg_url()}\ntable: {fresh_prefix()}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    effects.clear()


def scenario(text: str, clock: Clock, body: Callable[[list[telo.AsyncApp]], Awaitable[None]],
             apps: int = 1) -> None:
    async def go() -> None:
        loaded = [telo.AsyncApp.load(text, clock=clock) for _ in range(apps)]
        try:
            for app in loaded:
                await app._ready()
            await body(loaded)
        finally:
            for app in loaded:
                await app.close()

    asyncio.run(go())


def schedule_of(app: telo.AsyncApp, name: str = "every") -> Schedule:
    found = app.application.resources[name]
    assert isinstance(found, Schedule)
    return found


def runs_of(app: telo.AsyncApp, workflow: str) -> dict[str, str]:
    store = schedule_of(app).workflow.journal.store
    page = store.list_runs(RunFilter(workflow=workflow, limit=1000))
    return {r.run: r.status for r in page.runs}


def minutes(runs: dict[str, str] | list[str]) -> list[int]:
    """The minute of each tick run (``every@2026-01-01T00:07:00Z`` → 7), sorted."""
    return sorted(int(r.split("T")[1][3:5]) for r in runs if "@trigger" not in r)


def state_of(app: telo.AsyncApp, name: str = "every") -> ledger.LedgerState:
    return ledger.read(schedule_of(app, name).workflow.journal.store, name)


def test_three_applications_fire_each_tick_exactly_once(location: str) -> None:
    """Three applications on one journal serve concurrently at every minute for ten minutes: each tick is
    decided once, starts one run, and its effect happens once."""
    clock = FakeClock()

    async def body(apps: list[telo.AsyncApp]) -> None:
        await asyncio.gather(*(schedule_of(a).beat() for a in apps))  # (the ledger is created: ticks count from now)
        for _ in range(10):
            clock.advance(seconds=60)
            await asyncio.gather(*(a.serve(until_idle=True) for a in apps))
        assert minutes(runs_of(apps[0], "job")) == list(range(1, 11))
        assert set(runs_of(apps[0], "job").values()) == {"completed"}
        assert sorted(effects.values()) == [1] * 10
        fired = [d for d in state_of(apps[0]).recent if d.action == "fire"]
        assert len(fired) == 10 and len({d.tick_ms for d in fired}) == 10
        assert sum(schedule_of(a).decided for a in apps) == 10  # (no application recorded a tick twice)

    scenario(manifest(location, cron("* * * * *")), clock, body, apps=3)


def test_a_holder_that_stalled_past_its_lease_is_fenced_out(location: str) -> None:
    clock = FakeClock()

    async def body(apps: list[telo.AsyncApp]) -> None:
        first, second = schedule_of(apps[0]), schedule_of(apps[1])
        await first.beat()
        stale = first._fence
        assert stale is not None
        clock.advance(ms=LEAD_TTL_MS + 61_000)  # the first stalls (a GC pause, SIGSTOP) past its lease
        await second.beat()  # the second takes the ledger over and decides the minute-1 tick
        assert second.decided == 1 and second._fence is not None
        store = first.workflow.journal.store
        with pytest.raises(TeloError) as caught:
            ledger.decide(store, "every", ledger.TickDecision(T0 + 2 * MIN, "fire", run="every@x"), stale)
        assert "claim" in caught.value.message.lower() or "fence" in caught.value.message.lower()
        await first.beat()  # woken, it finds the ledger held and decides nothing
        assert first.decided == 0
        assert [d.tick_ms for d in state_of(apps[0]).recent] == [T0 + MIN]

    scenario(manifest(location, cron("* * * * *")), clock, body, apps=2)


@pytest.mark.parametrize(("policy", "fired", "skipped"), [
    ("catchUp: none", [], [(2, "missed (catchUp: none)")]),
    ("catchUp: latest", [10], [(1, "missed (catchUp: latest)")]),
    ("catchUp: all\noverlap: allow", [5, 10], []),
    ("catchUp: all\ncatchUpWindow: 4m", [10], [(1, "missed, older than catchUpWindow")]),
])
def test_after_a_ten_minute_outage_each_catch_up_policy(location: str, policy: str, fired: list[int],
                                                         skipped: list[tuple[int, str]]) -> None:
    """No worker runs from 00:00:30 to 00:12:00: the ticks at 00:05 and 00:10 are missed (decided more than a
    minute late)."""
    clock = FakeClock()
    text = manifest(location, cron("*/5 * * * *", extra=policy))

    async def body(apps: list[telo.AsyncApp]) -> None:
        await schedule_of(apps[0]).beat()
        clock.advance(seconds=12 * 60)
        await apps[0].serve(until_idle=True)
        assert minutes(runs_of(apps[0], "job")) == fired
        skips = [(d.count, d.reason) for d in state_of(apps[0]).recent if d.action == "skip"]
        assert skips == skipped
        assert all(d.late for d in state_of(apps[0]).recent)

    scenario(text, clock, body)


def overlap_run(location: str, policy: str, steps: int = 13) -> tuple[dict[str, str], ledger.LedgerState]:
    """Ticks every minute for six minutes, each run taking 2.5 minutes (a 150 s durable sleep); the clock moves
    in 30 s steps and the worker serves at each."""
    clock = FakeClock()
    text = manifest(location, cron("* * * * *", invoke="slow", extra=f"overlap: {policy}"))
    out: list[Any] = []

    async def body(apps: list[telo.AsyncApp]) -> None:
        await schedule_of(apps[0]).beat()
        for _ in range(steps):  # (13: to 00:06:30)
            clock.advance(seconds=30)
            await apps[0].serve(until_idle=True)
        out.extend([runs_of(apps[0], "slow"), state_of(apps[0])])

    scenario(text, clock, body)
    return out[0], out[1]


def test_overlap_skip_fires_only_when_the_previous_run_settled(location: str) -> None:
    runs, state = overlap_run(location, "skip")
    assert minutes(runs) == [1, 4]  # (the 00:01 run ends at 00:03:30; the 00:04 one at 00:06:30)
    assert {d.reason for d in state.recent if d.action == "skip"} == {
        "overlap: every@2026-01-01T00:01:00Z has not settled (overlap: skip)",
        "overlap: every@2026-01-01T00:04:00Z has not settled (overlap: skip)"}


def test_overlap_buffer_one_keeps_one_tick_waiting(location: str) -> None:
    runs, state = overlap_run(location, "bufferOne")
    assert minutes(runs) == [1, 2, 4]  # 2 waited for 1; 3 was skipped (2 waiting); 4 waited for 2
    assert [d.action for d in state.recent] == ["fire", "buffer", "skip", "buffer", "skip", "skip"]


def test_overlap_buffer_all_runs_every_tick_one_after_another(location: str) -> None:
    runs, state = overlap_run(location, "bufferAll")
    assert [d.action for d in state.recent] == ["fire"] + ["buffer"] * 5
    assert minutes(runs) == [1, 2, 3]  # (each takes 2.5 minutes: by 00:06:30 the third has started)
    assert [runs[r] for r in sorted(runs)] == ["completed", "completed", "parked"]


def test_overlap_cancel_running_cancels_the_previous_run(location: str) -> None:
    runs, _ = overlap_run(location, "cancelRunning")
    assert minutes(runs) == [1, 2, 3, 4, 5, 6]
    assert [runs[r] for r in sorted(runs)] == ["cancelled"] * 5 + ["parked"]


def test_overlap_allow_runs_them_side_by_side(location: str) -> None:
    runs, _ = overlap_run(location, "allow")
    assert minutes(runs) == [1, 2, 3, 4, 5, 6]
    assert [runs[r] for r in sorted(runs)] == ["completed"] * 4 + ["parked"] * 2


def test_pause_on_failure_pauses_until_resumed(tmp_path: Path) -> None:
    clock = FakeClock()
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}",
                    cron("* * * * *", invoke="failing", extra="pauseOnFailure: true"))

    async def body(apps: list[telo.AsyncApp]) -> None:
        schedule = schedule_of(apps[0])
        await schedule.beat()
        for _ in range(3):
            clock.advance(seconds=60)
            await apps[0].serve(until_idle=True)
        state = state_of(apps[0])
        assert state.paused and state.pause is not None and state.pause.by == "pauseOnFailure"
        assert state.pause.reason == "every@2026-01-01T00:01:00Z failed"
        assert [d.action for d in state.recent] == ["fire", "skip", "skip"]
        assert state.recent[1].reason == "paused by pauseOnFailure: every@2026-01-01T00:01:00Z failed"
        ops.resume(schedule, clock.now_ms(), by="ops@host", reason="fixed the report")
        clock.advance(seconds=60)
        await apps[0].serve(until_idle=True)
        state = state_of(apps[0])  # the 00:04 tick fired, its run failed, and the schedule paused again
        assert state.recent[-1].action == "fire" and state.paused and state.pause is not None
        assert state.pause.reason == "every@2026-01-01T00:04:00Z failed"
        assert [o.op for o in state.ops] == ["pause", "resume", "pause"]

    scenario(text, clock, body)


def test_operator_actions_are_recorded_and_take_effect(location: str) -> None:
    clock = FakeClock()

    async def body(apps: list[telo.AsyncApp]) -> None:
        schedule = schedule_of(apps[0])
        await schedule.beat()
        ops.pause(schedule, clock.now_ms(), by="ana@ops", reason="deploy")
        clock.advance(seconds=60)
        await apps[0].serve(until_idle=True)
        assert runs_of(apps[0], "job") == {}
        assert state_of(apps[0]).recent[-1].reason == "paused by ana@ops: deploy"
        triggered = ops.trigger(schedule, clock.now_ms(), by="ana@ops")
        assert triggered == "every@trigger-2026-01-01T00:01:00Z"
        ops.resume(schedule, clock.now_ms(), by="ana@ops")
        started = ops.backfill(schedule, T0, T0 + 3 * MIN, clock.now_ms(), by="ana@ops", reason="replay")
        # (clamped to now, 00:01; and 00:01, skipped while paused, is started too)
        assert started == ["every@2026-01-01T00:00:00Z", "every@2026-01-01T00:01:00Z"]
        again = ops.backfill(schedule, T0, T0 + 3 * MIN, clock.now_ms(), by="ana@ops")
        assert again == []  # (each tick's run id is its own: a backfill never starts a tick twice)
        await apps[0].serve(until_idle=True)
        assert set(runs_of(apps[0], "job").values()) == {"completed"} and len(runs_of(apps[0], "job")) == 3
        log = state_of(apps[0]).ops
        assert [(o.op, o.by) for o in log] == [("pause", "ana@ops"), ("trigger", "ana@ops"), ("resume", "ana@ops"),
                                               ("backfill", "ana@ops"), ("backfill", "ana@ops")]
        assert log[3].reason == "replay" and log[3].data["ticks"] == 2
        view = ops.view(schedule, clock.now_ms()).to_json()
        assert view["paused"] is False and view["next"] == "2026-01-01T00:02:00Z"

    scenario(manifest(location, cron("* * * * *")), clock, body)


@pytest.mark.parametrize(("start", "expected"), [
    (1_774_699_200_000, ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]),  # from 2026-03-28T12:00Z: spring
    (1_792_843_200_000, ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]),  # from 2026-10-24T12:00Z: fall
])
def test_dst_transitions_in_berlin(tmp_path: Path, start: int, expected: list[str]) -> None:
    """02:30 Europe/Berlin daily: on the spring-forward day it fires once at 03:00 local (01:00Z); on the
    fall-back day once, at the first 02:30 (00:30Z)."""
    clock = FakeClock(start)
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}",
                    cron("30 2 * * *", extra="timezone: Europe/Berlin\ncatchUp: all"))

    async def body(apps: list[telo.AsyncApp]) -> None:
        await schedule_of(apps[0]).beat()
        for _ in range(48 * 2):
            clock.advance(seconds=1800)
            await apps[0].serve(until_idle=True)
        assert sorted(r.split("@")[1] for r in runs_of(apps[0], "job")) == expected

    scenario(text, clock, body)


def test_jitter_delays_each_run_by_the_same_amount_everywhere(tmp_path: Path) -> None:
    clock = FakeClock()
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}", cron("* * * * *", extra="jitter: 30s"))

    async def body(apps: list[telo.AsyncApp]) -> None:
        one, two = schedule_of(apps[0]), schedule_of(apps[1])
        delays = [one.jitter_of(T0 + m * MIN) for m in range(1, 30)]
        assert delays == [two.jitter_of(T0 + m * MIN) for m in range(1, 30)]
        assert all(0 <= d <= 30_000 for d in delays) and len(set(delays)) > 5
        await one.beat()
        clock.advance(seconds=60)
        await one.beat()
        record = one.workflow.journal.store.read_run("every@2026-01-01T00:01:00Z")
        assert record is not None and record.due_at == T0 + MIN + delays[0]

    scenario(text, clock, body, apps=2)


def test_a_long_lived_ledger_is_compacted_and_keeps_its_state(tmp_path: Path) -> None:
    clock = FakeClock()
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}",
                    "kind: Schedule.Interval\nmetadata: { name: every }\nevery: 1s\ninvoke: !ref job\n"
                    "when: !cel \"tick.ms % 2000 == 0\"\n")

    async def body(apps: list[telo.AsyncApp]) -> None:
        schedule = schedule_of(apps[0])
        await schedule.beat()
        ops.pause(schedule, clock.now_ms(), by="ana@ops")
        ops.resume(schedule, clock.now_ms(), by="ana@ops")
        ops.pause(schedule, clock.now_ms(), by="ana@ops", reason="still paused after compaction")
        for _ in range(2 * ledger.KEEP_ENTRIES + 50):
            clock.advance(seconds=1)
            await schedule.beat()
        store = schedule.workflow.journal.store
        assert len(store.read_entries(ledger.ledger_id("every"))) <= 2 * ledger.KEEP_ENTRIES + 1
        state = state_of(apps[0])
        assert state.paused and state.pause is not None and state.pause.reason == "still paused after compaction"
        assert state.created_ms == T0 and state.cursor_ms == clock.now_ms()

    scenario(text, clock, body)


def test_an_in_process_timer_invokes_its_target_on_each_tick(tmp_path: Path) -> None:
    clock = FakeClock()
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}",
                    "kind: Schedule.Interval\nmetadata: { name: every }\nevery: 10s\ninvoke: !ref work\n"
                    "inputs: { tick: !cel \"tick.at\" }\n")

    async def body(apps: list[telo.AsyncApp]) -> None:
        schedule = schedule_of(apps[0])
        assert not schedule.durable
        await schedule._fire_in_process()
        for _ in range(3):
            clock.advance(seconds=10)
            await schedule._fire_in_process()
        assert sorted(effects) == ["2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z", "2026-01-01T00:00:30Z"]

    scenario(text, clock, body)


def test_a_durable_policy_on_an_in_process_timer_is_refused(tmp_path: Path) -> None:
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}",
                    "kind: Schedule.Interval\nmetadata: { name: every }\nevery: 10s\ninvoke: !ref work\n"
                    "overlap: skip\n")
    with pytest.raises(TeloError) as caught:
        scenario(text, FakeClock(), lambda apps: asyncio.sleep(0))
    assert "only a durable schedule" in caught.value.message and caught.value.hint


def test_the_ledger_is_not_a_run_to_cancel_or_resume(tmp_path: Path) -> None:
    from telo.durable.operator import cancel_run, resume_run
    from telo.errors import Code

    clock = FakeClock()
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}", cron("* * * * *"))

    async def body(apps: list[telo.AsyncApp]) -> None:
        schedule = schedule_of(apps[0])
        await schedule.beat()
        store = schedule.workflow.journal.store
        for act in (lambda: cancel_run(store, "every@ledger", "oops"),
                    lambda: resume_run(store, "every@ledger", "oops", clock.now_ms())):
            with pytest.raises(TeloError) as caught:
                act()
            assert caught.value.code == Code.SCHEDULE_LEDGER_PROTECTED and "telo schedules" in (caught.value.hint or "")
        record = store.read_run("every@ledger")
        assert record is not None and record.status == "parked"

    scenario(text, clock, body)


def test_triggers_within_one_millisecond_start_one_run_each(tmp_path: Path) -> None:
    clock = FakeClock()
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}", cron("* * * * *"))

    async def body(apps: list[telo.AsyncApp]) -> None:
        schedule = schedule_of(apps[0])
        runs = [ops.trigger(schedule, clock.now_ms(), by="ana@ops") for _ in range(3)]
        assert runs == ["every@trigger-2026-01-01T00:00:00Z", "every@trigger-2026-01-01T00:00:00Z~2",
                        "every@trigger-2026-01-01T00:00:00Z~3"]
        assert [o.data["run"] for o in state_of(apps[0]).ops] == runs
        await apps[0].serve(until_idle=True)
        assert set(runs_of(apps[0], "job").values()) == {"completed"} and len(runs_of(apps[0], "job")) == 3

    scenario(text, clock, body)


def test_an_action_before_any_worker_ran_does_not_start_the_schedule(tmp_path: Path) -> None:
    """An interval counts from the schedule's first beat, not from an operator's earlier pause."""
    clock = FakeClock()
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}",
                    "kind: Schedule.Interval\nmetadata: { name: every }\nevery: 10m\ninvoke: !ref job\n"
                    "startAt: 2026-01-01T02:00:00Z\n")

    async def body(apps: list[telo.AsyncApp]) -> None:
        schedule = schedule_of(apps[0])
        ops.pause(schedule, clock.now_ms(), by="ana@ops")
        assert state_of(apps[0]).created_ms is None
        ops.resume(schedule, clock.now_ms(), by="ana@ops")
        assert ops.view(schedule, clock.now_ms()).to_json()["next"] == "2026-01-01T02:10:00Z"  # (startAt + 10m)
        clock.advance(seconds=600)
        await schedule.beat()
        assert state_of(apps[0]).created_ms == T0 + 10 * MIN and runs_of(apps[0], "job") == {}

    scenario(text, clock, body)


def test_an_interval_backfill_starts_the_schedules_own_ticks(tmp_path: Path) -> None:
    """Its ticks count from the schedule's first beat, not from FROM: a backfill names the ticks' own runs."""
    clock = FakeClock()
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}",
                    "kind: Schedule.Interval\nmetadata: { name: every }\nevery: 1h\ninvoke: !ref job\n")

    async def body(apps: list[telo.AsyncApp]) -> None:
        schedule = schedule_of(apps[0])
        await apps[0].serve(until_idle=True)
        clock.advance(seconds=3 * 3600 + 5)
        await apps[0].serve(until_idle=True)
        assert sorted(runs_of(apps[0], "job")) == ["every@2026-01-01T03:00:00Z"]  # (01:00 and 02:00: missed)
        started = ops.backfill(schedule, T0 + 30 * MIN, T0 + 3 * 60 * MIN, clock.now_ms(), by="ana@ops")
        assert started == ["every@2026-01-01T01:00:00Z", "every@2026-01-01T02:00:00Z"]

    scenario(text, clock, body)


def test_a_worker_claims_a_tick_run_when_it_is_admitted_not_at_its_next_sweep(tmp_path: Path) -> None:
    """The worker sweeps for due runs once a minute here; a schedule ticking every second still has its runs
    executed, because admitting a tick's run wakes the worker's resumer for it (as a PostgreSQL NOTIFY would)."""
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}",
                    cron("* * * * * *", extra="overlap: allow"))

    async def body(apps: list[telo.AsyncApp]) -> None:
        serving = asyncio.ensure_future(apps[0].serve(interval="60s"))
        try:
            for _ in range(100):  # (up to 10 s: the first sweep finds nothing; the next is a minute away)
                await asyncio.sleep(0.1)
                if "completed" in runs_of(apps[0], "job").values():
                    break
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
        assert "completed" in runs_of(apps[0], "job").values()

    scenario(text, SYSTEM_CLOCK, body)


def test_a_pause_recorded_while_the_ledger_is_compacted_is_kept(tmp_path: Path) -> None:
    """The holder snapshots the state it read; an operator's pause appended in between comes after that read,
    so the fold applies it on top of the snapshot (a review found it overridden by the older snapshot)."""
    clock = FakeClock()
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}",
                    "kind: Schedule.Interval\nmetadata: { name: every }\nevery: 1s\ninvoke: !ref job\n"
                    "when: !cel \"false\"\n")

    async def body(apps: list[telo.AsyncApp]) -> None:
        schedule = schedule_of(apps[0])
        await schedule.beat()  # (the ledger, and its lease)
        store = schedule.workflow.journal.store
        for n in range(1, 2 * ledger.KEEP_ENTRIES + 10):  # (decisions written here: no beat compacts them first)
            ledger.decide(store, "every", ledger.TickDecision(T0 + n * 1000, "skip", reason="when is false"),
                          schedule._fence)
        stale = ledger.read(store, "every")  # what the holder read before it compacts…
        ops.pause(schedule, clock.now_ms(), by="ana@ops", reason="incident")  # …an operator pauses meanwhile…
        assert schedule._fence is not None
        assert ledger.compact(store, "every", stale, schedule._fence)  # …and the snapshot of the stale read lands
        state = state_of(apps[0])
        assert state.paused and state.pause is not None and state.pause.reason == "incident"
        clock.advance(seconds=2 * ledger.KEEP_ENTRIES + 20)  # (past the decisions written above)
        await schedule.beat()
        assert state_of(apps[0]).recent[-1].reason == "paused by ana@ops: incident"

    scenario(text, clock, body)


def test_a_tick_whose_inputs_fail_is_skipped_and_the_schedule_goes_on(tmp_path: Path) -> None:
    """(A review found such a tick recorded as fired with no run, and every later beat failing.)"""
    clock = FakeClock()
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}", cron("* * * * *", extra=(
        "inputs: { tick: !cel \"tick.ms % 120000 == 0 ? string(int('x')) : tick.at\" }")))

    async def body(apps: list[telo.AsyncApp]) -> None:
        await schedule_of(apps[0]).beat()
        for _ in range(4):
            clock.advance(seconds=60)
            await apps[0].serve(until_idle=True)
        decisions = state_of(apps[0]).recent
        assert [d.action for d in decisions] == ["fire", "skip", "fire", "skip"]
        assert (decisions[1].reason or "").startswith("inputs failed: ERR_")
        assert minutes(runs_of(apps[0], "job")) == [1, 3]

    scenario(text, clock, body)


def test_pause_on_failure_sees_a_run_that_failed_many_ticks_later(tmp_path: Path) -> None:
    """A run outlasting ten ticks, then failing, still pauses the schedule (its tick is no longer among the last
    ten decisions: a review found it missed)."""
    clock = FakeClock()
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}",
                    cron("* * * * *", invoke="sleepthenfail", extra="pauseOnFailure: true")).replace(
        "kind: Local.Workflow\nmetadata: { name: failing }",
        "kind: Durable.Sleep\nmetadata: { name: long }\nfor: 15m\n---\nkind: Local.Workflow\n"
        "metadata: { name: sleepthenfail }\njournal: !ref runs\nsteps:\n  - { name: wait, invoke: !ref long }\n"
        "  - { name: build, invoke: !ref fail }\n---\nkind: Local.Workflow\nmetadata: { name: failing }")

    async def body(apps: list[telo.AsyncApp]) -> None:
        await schedule_of(apps[0]).beat()
        for _ in range(17):
            clock.advance(seconds=60)
            await apps[0].serve(until_idle=True)
        state = state_of(apps[0])
        assert state.paused and state.pause is not None
        assert state.pause.reason == "every@2026-01-01T00:01:00Z failed"

    scenario(text, clock, body)


def test_a_buffer_chain_keeps_only_what_still_waits(tmp_path: Path) -> None:
    """bufferOne with runs that always overlap: the ledger's chain grows by one run per buffered tick until the
    next snapshot, but a beat decides from its unsettled tail only — the last settled run and what waits behind
    it (a review found every settled run read back at every beat, for ever)."""
    from telo.journal.sqlite import SqliteStore
    from telo.kinds.schedule import _unsettled_tail

    _, state = overlap_run(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}", "bufferOne", steps=40)
    assert len(state.chain) > 5
    with SqliteStore(str(tmp_path / "runs.db")) as store:
        def status(run: str) -> str | None:
            record = store.read_run(run)
            return None if record is None else record.status

        tail = _unsettled_tail(state.chain, status)
        assert len(tail) <= 3 and status(tail[0].run or "") in ledger.SETTLED, tail


def test_a_backfill_starts_past_ticks_only(tmp_path: Path) -> None:
    from telo.errors import Code

    clock = FakeClock()
    text = manifest(f"durable-journal-sqlite|path: {tmp_path / 'runs.db'}", cron("* * * * *"))

    async def body(apps: list[telo.AsyncApp]) -> None:
        schedule = schedule_of(apps[0])
        started = ops.backfill(schedule, T0 - 2 * MIN, T0 + 60 * MIN, clock.now_ms(), by="ana@ops")
        assert started == ["every@2025-12-31T23:58:00Z", "every@2025-12-31T23:59:00Z", "every@2026-01-01T00:00:00Z"]
        with pytest.raises(TeloError) as caught:
            ops.backfill(schedule, T0 + MIN, T0 + 60 * MIN, clock.now_ms(), by="ana@ops")
        assert caught.value.code == Code.SCHEDULE_RANGE_INVALID and "in the future" in caught.value.message

    scenario(text, clock, body)
