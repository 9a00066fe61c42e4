"""Operating durable schedules from Python (issue 17): ``App.schedules``, ``schedule_view``, ``pause_schedule``,
``resume_schedule``, ``trigger_schedule`` and ``backfill_schedule`` — ``telo schedules`` in process, through the
same operations layer, under a fake clock so every tick is where the test puts it.

The schedule ticks hourly; the clock starts at noon, when the app's first beat creates its ledger (a schedule has
no ticks before it was first run), so the first tick it fires itself is 13:00.
"""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

import pytest

import telo
from telo.clock import FakeClock
from telo.journal.sqlite import SqliteStore
from telo.kinds import schedule_ledger as ledger
from telo.kinds.addressing import instant_ms
from telo.kinds.cron import tick_text
from telo.operations.queue_limits import operator

worked: list[str] = []


@telo.kind("SchedApi.Work", idempotent=True)
def work(inputs: dict[str, Any]) -> dict[str, Any]:
    worked.append(inputs["tick"])
    return {"tick": inputs["tick"]}


MANIFEST = """\
kind: Telo.Application
metadata: { name: SchedApi, version: 1.0.0 }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Schedule: scheduler, S: SchedApi }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./.telo/runs.db
---
kind: S.Work
metadata: { name: work }
---
kind: Local.Workflow
metadata: { name: report }
journal: !ref runs
inputs: { tick: !cel "inputs.tick" }
steps:
  - { name: work, invoke: !ref work, inputs: { tick: !cel "inputs.tick" } }
---
kind: Schedule.Cron
metadata: { name: hourly }
cron: "0 * * * *"
invoke: !ref report
---
kind: Schedule.Interval
metadata: { name: heartbeat }
every: 1h
invoke: !ref work
"""


def at(hhmm: str) -> int:
    return instant_ms(f"2026-12-02T{hhmm}:00Z", "ERR_TEST", "at")


def run_of(hhmm: str) -> str:
    return f"hourly@2026-12-02T{hhmm}:00Z"


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    worked.clear()


@pytest.fixture
def journal(tmp_path: Path) -> str:
    return str(tmp_path / "j.db")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start_ms=at("12:00"))


def serve(app: telo.App) -> None:
    app.serve(until_idle=True, interval=0.05)  # decides the due ticks, then executes the due runs


def recorded(journal: str) -> list[ledger.Operation]:
    with SqliteStore(journal) as store:
        return list(ledger.read(store, "hourly").ops)


def test_schedules_lists_every_schedule_and_the_view_follows_its_ticks(journal: str, clock: FakeClock) -> None:
    with telo.load(MANIFEST, journal=journal, clock=clock) as app:
        views = app.schedules()
        assert [(v.name, v.kind, v.durable) for v in views] == [("heartbeat", "Scheduler.Interval", False),
                                                                ("hourly", "Scheduler.Cron", True)]
        fresh = views[1]
        assert isinstance(fresh, telo.ScheduleView)
        assert (fresh.ticks, fresh.invoke, fresh.paused, fresh.last, fresh.ops) == \
            ("cron '0 * * * *' in UTC", "report", False, None, ())
        assert fresh.next_ms == at("13:00") and fresh.policy["catchUp"] == "latest"
        assert views[0].ticks == "every 1h" and views[0].next_ms is None  # an in-process timer: its definition
        serve(app)
        clock.advance(seconds=3605)
        serve(app)
        view = app.schedule_view("hourly")
        assert view.created_ms == at("12:00") and view.next_ms == at("14:00") and view.holder is None
        assert view.last is not None and (view.last.tick_ms, view.last.action, view.last.run) == \
            (at("13:00"), "fire", run_of("13:00"))
        assert app.result(run_of("13:00")).step("work") == {"tick": "2026-12-02T13:00:00Z"}
        assert view.to_json()["next"] == "2026-12-02T14:00:00Z"
        with pytest.raises(telo.TeloError) as unknown:
            app.schedule_view("hourlly")
        assert unknown.value.code == "ERR_SCHEDULE_NOT_FOUND" and unknown.value.hint == "its durable schedules: hourly"
        with pytest.raises(telo.TeloError, match="an in-process timer") as timer:
            app.pause_schedule("heartbeat")
        assert timer.value.code == "ERR_SCHEDULE_NOT_FOUND"
    assert worked == ["2026-12-02T13:00:00Z"]


def test_a_paused_schedule_skips_its_ticks_saying_why_and_resumes(journal: str, clock: FakeClock) -> None:
    with telo.load(MANIFEST, journal=journal, clock=clock) as app:
        serve(app)
        paused = app.pause_schedule("hourly", "db maintenance", by="ada")
        assert paused.paused and paused.next_ms is None
        assert paused.pause is not None and (paused.pause.by, paused.pause.reason) == ("ada", "db maintenance")
        clock.advance(seconds=3605)
        serve(app)
        skipped = app.schedule_view("hourly").last
        assert skipped is not None and (skipped.tick_ms, skipped.action, skipped.run, skipped.reason) == \
            (at("13:00"), "skip", None, "paused by ada: db maintenance")
        with pytest.raises(telo.TeloError, match="ERR_DURABLE_RUN_NOT_FOUND"):
            app.status(run_of("13:00"))
        resumed = app.resume_schedule("hourly")
        assert not resumed.paused and resumed.pause is None and resumed.next_ms == at("14:00")
        clock.advance(seconds=3600)
        serve(app)
        assert [(d.tick_ms, d.action) for d in app.schedule_view("hourly").recent] == \
            [(at("13:00"), "skip"), (at("14:00"), "fire")]
    assert worked == ["2026-12-02T14:00:00Z"]  # the paused hour is not replayed
    assert [(o.op, o.at, o.by, o.reason) for o in recorded(journal)] == [
        ("pause", at("12:00"), "ada", "db maintenance"), ("resume", at("13:00") + 5000, operator(), None)]


def test_trigger_admits_one_run_now_that_the_app_executes(journal: str, clock: FakeClock) -> None:
    with telo.load(MANIFEST, journal=journal, clock=clock) as app:
        clock.advance(ms=1234)
        now = clock.now_ms()
        run = app.trigger_schedule("hourly", "rerun the report")
        assert run == "hourly@trigger-2026-12-02T12:00:01.234Z" == f"hourly@trigger-{tick_text(now)}"
        status = app.status(run)
        assert (status.status, status.workflow, status.due_at) == ("scheduled", "report", now)  # nothing ran yet
        assert app.run_due() == 1
        assert app.result(run).step("work") == {"tick": "2026-12-02T12:00:01.234Z"}  # a tick's inputs, at now
        assert app.schedule_view("hourly").ops[-1].data == {"run": run}
    assert [(o.op, o.by, o.reason, o.data) for o in recorded(journal)] == [
        ("trigger", operator(), "rerun the report", {"run": run})]


def test_backfill_admits_each_tick_without_a_run_once(journal: str, clock: FakeClock) -> None:
    with telo.load(MANIFEST, journal=journal, clock=clock) as app:
        serve(app)
        clock.advance(seconds=3605)
        serve(app)  # 13:00 fires on its own
        first = app.backfill_schedule("hourly", "2026-12-02T09:00:00Z",
                                      datetime.datetime(2026, 12, 2, 10, tzinfo=datetime.UTC), "outage", by="ada")
        assert first == [run_of("09:00"), run_of("10:00")]
        assert app.status(run_of("09:00")).due_at == clock.now_ms()  # due now, not at its tick
        second = app.backfill_schedule("hourly", at("09:00"), "2026-12-02T13:00:00Z")  # epoch ms, or RFC 3339
        assert second == [run_of("11:00"), run_of("12:00")]  # 09, 10 have runs; 13 fired
        assert app.backfill_schedule("hourly", str(at("08:30")), "2026-12-02T13:30:00Z") == []
        serve(app)
    assert sorted(worked) == [f"2026-12-02T{h}:00:00Z" for h in ("09", "10", "11", "12", "13")]  # each once
    backfills = [o for o in recorded(journal) if o.op == "backfill"]
    assert [(o.by, o.reason, o.data) for o in backfills] == [
        ("ada", "outage", {"from": "2026-12-02T09:00:00Z", "to": "2026-12-02T10:00:00Z", "ticks": 2}),
        (operator(), None, {"from": "2026-12-02T09:00:00Z", "to": "2026-12-02T13:00:00Z", "ticks": 5}),
        (operator(), None, {"from": "2026-12-02T08:30:00Z", "to": "2026-12-02T13:30:00Z", "ticks": 5})]


@pytest.mark.parametrize(("start", "end", "says"), [
    ("2026-12-02T10:00:00Z", "2026-12-02T09:00:00Z", "is before FROM"),
    ("2026-12-02T10:15:00Z", "2026-12-02T10:45:00Z", "no tick falls in"),
    ("2026-01-01T00:00:00Z", "2026-12-01T00:00:00Z", "holds more than 1000 ticks"),
    ("yesterday", "2026-12-02T09:00:00Z", "'yesterday' is neither epoch milliseconds nor a timestamp"),
    (None, "2026-12-02T09:00:00Z", "is neither epoch milliseconds nor a timestamp"),
])
def test_a_bad_backfill_range_is_refused_and_nothing_is_written(journal: str, clock: FakeClock, start: Any,
                                                                end: str, says: str) -> None:
    with telo.load(MANIFEST, journal=journal, clock=clock) as app:
        with pytest.raises(telo.TeloError) as refused:
            app.backfill_schedule("hourly", start, end)
        assert refused.value.code == "ERR_SCHEDULE_RANGE_INVALID" and says in refused.value.message
        assert refused.value.hint
        assert app.schedule_view("hourly").ops == ()
        assert app.runs(workflow="report").ids == []


def test_the_async_app_has_the_same_methods(journal: str, clock: FakeClock) -> None:
    async def main() -> tuple[list[str], str, bool]:
        async with telo.AsyncApp.load(MANIFEST, journal=journal, clock=clock) as app:
            names = [v.name for v in await app.schedules()]
            paused = (await app.pause_schedule("hourly", "async", by="ada")).paused
            run = await app.trigger_schedule("hourly")
            assert await app.backfill_schedule("hourly", "2026-12-02T11:00:00Z", "2026-12-02T11:00:00Z") == \
                [run_of("11:00")]
            assert not (await app.resume_schedule("hourly")).paused
            assert [o.op for o in (await app.schedule_view("hourly")).ops] == ["pause", "trigger", "backfill",
                                                                               "resume"]
            return names, run, paused

    names, run, paused = asyncio.run(main())
    assert names == ["heartbeat", "hourly"] and run == "hourly@trigger-2026-12-02T12:00:00Z" and paused
