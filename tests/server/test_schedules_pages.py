"""The dashboard's schedule pages (issue 17: "the dashboard lists schedules with last/next tick and skipped ticks
(and why)"): every schedule of the manifest the dashboard serves with its state, last and next tick and the
process deciding its ticks; a schedule's definition, policy, pause, recent tick decisions (fired → its run,
skipped → why) and operations log; pause, resume and trigger from the page through the CSRF-guarded POST path,
recorded in the schedule's ledger by ``telo ui``; 404 ``ERR_SCHEDULE_NOT_FOUND`` for an unknown schedule; and,
without a manifest, pages that say so. The ticks are decided by the schedule itself (``beat()``) under a fake
clock, over a real SQLite journal."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the dashboard needs the `ui` extra")

from starlette.testclient import TestClient

from telo.clock import Clock, FakeClock
from telo.journal.model import Outcome
from telo.journal.sqlite import SqliteStore
from telo.kinds import schedule_ledger as ledger
from telo.kinds.schedule import Schedule
from telo.operations import schedules as ops
from telo.runtime.app import Application
from telo.server.app import create_app, run_url
from telo.server.schedules import OPERATOR, Schedules, manifest_schedules, schedule_url

BASE = "http://127.0.0.1:8765"
ORIGIN = {"origin": BASE}
START = 1_767_225_600_000  # 2026-01-01T00:00:00Z, FakeClock's start
MINUTE = 60_000

# `nightly`: every 5 minutes, a tick at :30 gated off by `when`, catchUp latest, overlap skip (the defaults);
# `heartbeat`: an in-process timer (it invokes a value, not a workflow).
MANIFEST = """\
kind: Telo.Application
metadata: { name: Schedules }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Run: run, Scheduler: scheduler }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./journal.db
---
kind: Run.Value
metadata: { name: noop }
value: 1
---
kind: Local.Workflow
metadata: { name: report }
journal: !ref runs
steps:
  - name: one
    invoke: !ref noop
---
kind: Scheduler.Cron
metadata: { name: nightly }
cron: "*/5 * * * *"
invoke: !ref report
when: !cel "tick.ms % 3600000 != 1800000"
---
kind: Scheduler.Interval
metadata: { name: heartbeat }
every: 1m
invoke: !ref noop
"""


def tick(minute: int) -> str:
    return f"2026-01-01T00:{minute:02d}:00Z"


@pytest.fixture
def clock() -> Clock:
    return FakeClock(START)


@pytest.fixture
def application(tmp_path: Path, store: SqliteStore, clock: FakeClock) -> Iterator[Application]:
    (tmp_path / "m.yaml").write_text(MANIFEST)
    with manifest_schedules(str(tmp_path / "m.yaml"), store, clock=clock) as app:
        yield app


@pytest.fixture
def sclient(store: SqliteStore, application: Application) -> Iterator[TestClient]:
    with TestClient(create_app(store, journal_label="journal.db", application=application), base_url=BASE) as c:
        yield c


def nightly(application: Application) -> Schedule:
    schedule = application.resources["nightly"]
    assert isinstance(schedule, Schedule)
    return schedule


def beat_at(schedule: Schedule, clock: FakeClock, minute: int) -> None:
    clock.advance(ms=START + minute * MINUTE - clock.now_ms())
    asyncio.run(schedule.beat())


def decided(store: SqliteStore, clock: FakeClock, application: Application) -> None:
    """Ticks decided by the schedule under the fake clock: 00:05 fires; 00:10 is skipped (its run has not
    settled); an operator pauses, 00:15 is skipped (paused), she resumes; no process runs until 00:30, so
    00:20 and 00:25 are skipped as missed (catchUp: latest; one range) and 00:30 by `when`; 00:35 fires."""
    schedule = nightly(application)
    beat_at(schedule, clock, 0)
    beat_at(schedule, clock, 5)
    beat_at(schedule, clock, 10)
    store.complete(f"nightly@{tick(5)}", Outcome.completed(None))
    ops.pause(schedule, clock.now_ms(), by="ada", reason="db maintenance")
    beat_at(schedule, clock, 15)
    ops.resume(schedule, clock.now_ms(), by="ada", reason="maintenance over")
    beat_at(schedule, clock, 30)
    beat_at(schedule, clock, 35)


def csrf_of(client: TestClient, url: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', client.get(url).text)
    assert found is not None
    return found.group(1)


def row_of(html: str, attr: str, value: str) -> str:
    found = re.search(rf'<tr {attr}="{re.escape(value)}"[^>]*>(.*?)</tr>', html, re.S)
    assert found is not None, f"no row {attr}={value!r}"
    return found.group(1)


def test_the_schedules_page_lists_each_schedule_with_its_last_and_next_tick(
        store: SqliteStore, clock: FakeClock, application: Application, sclient: TestClient) -> None:
    decided(store, clock, application)
    listing = sclient.get("/api/schedules").json()
    assert listing["manifest"].endswith("m.yaml")
    rows = {s["name"]: s for s in listing["schedules"]}
    assert list(rows) == ["heartbeat", "nightly"]
    night = rows["nightly"]
    assert (night["kind"], night["ticks"], night["invoke"], night["state"]) == (
        "Scheduler.Cron", "cron '*/5 * * * *' in UTC", "report", "active")
    assert night["last"] == {"tick": tick(35), "action": "fire", "run": f"nightly@{tick(35)}",
                             "decidedAt": "2026-01-01T00:35:00Z"}
    assert night["next"] == tick(40)
    assert night["holder"] == nightly(application).holder  # the process deciding its ticks (this one)
    assert night["created"] == "2026-01-01T00:00:00Z" and "recent" not in night
    heart = rows["heartbeat"]
    assert (heart["state"], heart["ticks"], heart["invoke"], heart["last"]) == ("in-process", "every 1m", "noop", None)

    page = sclient.get("/schedules")
    assert page.status_code == 200
    row = row_of(page.text, "data-schedule", "nightly")
    assert f'href="{schedule_url("nightly")}"' in row and 'class="badge sched-active">active<' in row
    assert f'href="{run_url(f"nightly@{tick(35)}")}"' in row and ">fired<" in row
    assert f'<td class="time next">{tick(40)}</td>' in row
    assert nightly(application).holder in row
    assert 'class="badge sched-in-process">in-process<' in row_of(page.text, "data-schedule", "heartbeat")
    assert 'href="/schedules" id="nav-schedules"' in sclient.get("/runs").text  # in the header's nav


def test_a_schedule_page_shows_each_tick_decision_and_why_a_tick_was_skipped(
        store: SqliteStore, clock: FakeClock, application: Application, sclient: TestClient) -> None:
    decided(store, clock, application)
    detail = sclient.get(schedule_url("nightly", api=True)).json()
    assert [(d["tick"], d["action"], d.get("reason")) for d in detail["recent"]] == [
        (tick(5), "fire", None),
        (tick(10), "skip", f"overlap: nightly@{tick(5)} has not settled (overlap: skip)"),
        (tick(15), "skip", "paused by ada: db maintenance"),
        (tick(25), "skip", "missed (catchUp: latest)"),
        (tick(30), "skip", "when is false"),
        (tick(35), "fire", None)]
    missed = detail["recent"][3]
    assert (missed["count"], missed["from"], missed["late"]) == (2, tick(20), True)
    assert [d.get("status") for d in detail["recent"]] == ["completed", None, None, None, None, "scheduled"]
    assert [(o["op"], o["by"], o["reason"], o["at"]) for o in detail["ops"]] == [
        ("pause", "ada", "db maintenance", "2026-01-01T00:10:00Z"),
        ("resume", "ada", "maintenance over", "2026-01-01T00:15:00Z")]
    assert detail["policy"] == {"catchUp": "latest", "catchUpWindowMs": 86_400_000, "overlap": "skip",
                                "jitterMs": 0, "startAt": None, "endAt": None, "pauseOnFailure": False}

    page = sclient.get(schedule_url("nightly"))
    assert page.status_code == 200
    html = page.text
    assert 'data-live="/api/schedules/nightly/events"' in html
    assert re.findall(r'<tr data-tick="([^"]+)" data-action="(\w+)">', html) == [  # newest first
        (tick(35), "fire"), (tick(30), "skip"), (tick(25), "skip"), (tick(15), "skip"), (tick(10), "skip"),
        (tick(5), "fire")]
    fired = row_of(html, "data-tick", tick(5))
    assert f'href="{run_url(f"nightly@{tick(5)}")}"' in fired and "status-completed" in fired
    assert "has not settled (overlap: skip)" in row_of(html, "data-tick", tick(10))
    assert "paused by ada: db maintenance" in row_of(html, "data-tick", tick(15))
    missed_row = row_of(html, "data-tick", tick(25))
    assert "missed (catchUp: latest)" in missed_row and f"2 ticks from <code>{tick(20)}</code>" in missed_row
    assert "when is false" in row_of(html, "data-tick", tick(30))
    assert "db maintenance" in row_of(html, "data-op", "pause") and ">ada<" in row_of(html, "data-op", "resume")
    assert "latest within 24 h (catchUpWindow)" in html
    assert 'id="schedule-pause"' in html and 'id="schedule-trigger"' in html and 'id="schedule-resume"' not in html


def test_pause_resume_and_trigger_from_the_page_are_recorded_in_the_ledger(
        store: SqliteStore, clock: FakeClock, application: Application, sclient: TestClient) -> None:
    schedule = nightly(application)
    beat_at(schedule, clock, 0)
    url = schedule_url("nightly")
    # The page's form: urlencoded, its CSRF field, answered with a redirect back and a notice.
    r = sclient.post(schedule_url("nightly", "/pause", api=True), data={"csrf": csrf_of(sclient, url),
                                                                         "reason": "deploy"},
                     follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith(url + "?notice=paused+nightly")
    state = ledger.read(store, "nightly")
    assert state.paused and state.pause is not None
    assert (state.pause.by, state.pause.reason, state.pause.at) == (OPERATOR, "deploy", clock.now_ms())
    page = sclient.get(r.headers["location"]).text
    assert 'id="notice"' in page and "its due ticks are skipped until a resume" in page
    assert 'id="schedule-state">paused<' in page and "paused by <strong>telo ui</strong>" in page
    assert 'id="schedule-resume"' in page and 'id="schedule-pause"' not in page
    beat_at(schedule, clock, 5)
    assert ledger.read(store, "nightly").recent[-1].reason == "paused by telo ui: deploy"

    # JSON, with the dashboard's Origin (a script's way): the report, no redirect.
    r = sclient.post(schedule_url("nightly", "/resume", api=True), json={"reason": "deployed"}, headers=ORIGIN)
    assert r.status_code == 200
    assert r.json() == {"schedule": "nightly", "paused": False, "wasPaused": True,
                        "op": {"op": "resume", "at": "2026-01-01T00:05:00Z", "by": OPERATOR,
                               "reason": "deployed"}}
    assert not ledger.read(store, "nightly").paused

    r = sclient.post(schedule_url("nightly", "/trigger", api=True), json={}, headers=ORIGIN)
    assert r.status_code == 200
    run = r.json()["run"]
    assert run == "nightly@trigger-2026-01-01T00:05:00Z"
    record = store.read_run(run)
    assert record is not None and (record.status, record.workflow) == ("scheduled", "report")
    assert [(o.op, o.by, o.reason) for o in ledger.read(store, "nightly").ops] == [
        ("pause", OPERATOR, "deploy"), ("resume", OPERATOR, "deployed"), ("trigger", OPERATOR, None)]
    trig = row_of(sclient.get(url).text, "data-op", "trigger")
    assert f'href="{run_url(run)}"' in trig and f">{OPERATOR}<" in trig


def test_a_schedule_action_goes_through_the_csrf_guard(store: SqliteStore, clock: FakeClock,
                                                       application: Application, sclient: TestClient) -> None:
    url = schedule_url("nightly", "/pause", api=True)
    assert sclient.post(url, json={}, headers={"origin": "https://evil.example"}).status_code == 403
    r = sclient.post(url, data={"reason": "x"}, follow_redirects=False)  # a form without its CSRF field
    assert r.status_code == 403 and r.json()["error"]["code"] == "ERR_UI_CSRF"
    assert not ledger.read(store, "nightly").exists  # nothing recorded, not even the ledger


def test_an_unknown_schedule_is_a_404(store: SqliteStore, clock: FakeClock, application: Application,
                                      sclient: TestClient) -> None:
    page = sclient.get("/schedules/nigthly")
    assert page.status_code == 404 and "ERR_SCHEDULE_NOT_FOUND" in page.text and "nightly" in page.text
    api = sclient.get("/api/schedules/nigthly")
    assert api.status_code == 404 and api.json()["error"]["code"] == "ERR_SCHEDULE_NOT_FOUND"
    assert sclient.get("/api/schedules/nigthly/events").status_code == 404
    r = sclient.post("/api/schedules/nigthly/pause", json={}, headers=ORIGIN)
    assert r.status_code == 404 and r.json()["error"]["code"] == "ERR_SCHEDULE_NOT_FOUND"
    # An in-process timer has a page (its definition) but nothing to operate: its actions are refused.
    heart = sclient.get(schedule_url("heartbeat"))
    assert heart.status_code == 200 and "an in-process timer" in heart.text and "schedule-pause" not in heart.text
    r = sclient.post(schedule_url("heartbeat", "/trigger", api=True), json={}, headers=ORIGIN)
    assert r.status_code == 404 and "in-process timer" in r.json()["error"]["message"]
    # A form's refusal comes back to the schedule's page with the error as its notice.
    r = sclient.post(schedule_url("heartbeat", "/pause", api=True),
                     data={"csrf": csrf_of(sclient, schedule_url("nightly"))}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith(schedule_url("heartbeat") + "?notice=ERR_")


def test_without_a_manifest_the_schedule_pages_say_so(client: TestClient) -> None:
    page = client.get("/schedules")
    assert page.status_code == 200 and 'id="no-manifest"' in page.text
    assert "telo ui --journal J --manifest M" in page.text
    listing = client.get("/api/schedules").json()
    assert listing["manifest"] is None and listing["schedules"] == []
    one = client.get("/schedules/nightly")
    assert one.status_code == 404 and "ERR_SCHEDULE_NOT_FOUND" in one.text and "--manifest" in one.text
    r = client.post("/api/schedules/nightly/pause", json={}, headers=ORIGIN)
    assert r.status_code == 404


def test_a_ledger_runs_page_links_to_its_schedule_and_offers_no_cancel(
        store: SqliteStore, clock: FakeClock, application: Application, sclient: TestClient) -> None:
    beat_at(nightly(application), clock, 0)
    run = ledger.ledger_id("nightly")
    detail = sclient.get(run_url(run, api=True)).json()
    assert detail["schedule"] == "nightly"
    assert detail["actions"]["cancel"] is False and detail["actions"]["resume"] is False
    page = sclient.get(run_url(run)).text
    assert f'<a href="{schedule_url("nightly")}">nightly</a>' in page and 'id="cancel"' not in page


def test_the_live_refresh_fingerprint_changes_with_the_ledger(clock: FakeClock, application: Application) -> None:
    schedules = Schedules(application)
    before, one = schedules.version(), schedules.version("nightly")
    beat_at(nightly(application), clock, 0)  # the ledger is created: its first entry
    assert schedules.version() != before and schedules.version("nightly") != one
    quiet = schedules.version()
    clock.advance(ms=MINUTE)
    asyncio.run(nightly(application).beat())  # no tick due: nothing recorded
    assert schedules.version() == quiet
    ops.pause(nightly(application), clock.now_ms(), by="ada")
    assert schedules.version() != quiet
