"""The Python API does what the CLI does (issue 15, "Python API parity with the CLI"): list runs, schedule,
resolve an unconfirmed effect, serve as a worker, and recover due runs on load."""

from __future__ import annotations

import _thread
import asyncio
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import telo
from telo.clock import SYSTEM_CLOCK, FakeClock
from telo.journal.model import Entry

calls: Counter[str] = Counter()


@telo.kind("ApiParity.Note", idempotent=True)
def note(inputs: dict[str, Any]) -> str:
    calls[str(inputs.get("label"))] += 1
    return str(inputs.get("label"))


@telo.kind("ApiParity.Charge")  # neither idempotent nor key-consuming: an unknown outcome parks for an operator
def charge(inputs: dict[str, Any]) -> dict[str, Any]:
    calls["charge"] += 1
    return {"receipt": "from the card"}


MANIFEST = """\
kind: Telo.Application
metadata: { name: ApiParity, version: 1.0.0 }
imports: { Local: durable-local, Durable: durable, Journal: durable-journal-sqlite, P: ApiParity }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./.telo/runs.db
---
kind: P.Note
metadata: { name: note }
---
kind: P.Charge
metadata: { name: charge }
---
kind: Durable.Await
metadata: { name: approval }
token: !cel "'pay:' + inputs.id"
---
kind: Durable.Sleep
metadata: { name: nap }
for: 1h
---
kind: Local.Workflow
metadata: { name: greet }
journal: !ref runs
runId: !cel "'greet:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - { name: hello, invoke: !ref note, inputs: { label: !cel "'hello ' + inputs.id" } }
---
kind: Local.Workflow
metadata: { name: waits }
journal: !ref runs
runId: !cel "'waits:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - { name: approve, invoke: !ref approval, inputs: { id: !cel "inputs.id" } }
---
kind: Local.Workflow
metadata: { name: sleepy }
journal: !ref runs
runId: !cel "'sleepy:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - { name: nap, invoke: !ref nap }
  - { name: after, invoke: !ref note, inputs: { label: !cel "'after ' + inputs.id" } }
---
kind: Local.Workflow
metadata: { name: charging }
journal: !ref runs
runId: !cel "'charging:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - { name: approve, invoke: !ref approval, inputs: { id: !cel "inputs.id" } }
  - { name: charge, invoke: !ref charge }
"""


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    calls.clear()


@pytest.fixture
def journal(tmp_path: Path) -> str:
    return str(tmp_path / "j.db")


# --- runs() ------------------------------------------------------------------------------------------------


def test_runs_lists_filters_and_pages_like_telo_runs_list(journal: str) -> None:
    with telo.load(MANIFEST, journal=journal) as app:
        assert app.run("greet", {"id": "1"}).ok
        assert app.run("greet", {"id": "2"}).ok
        assert app.run("waits", {"id": "3"}).status == "parked"
        everything = app.runs()
        assert isinstance(everything, telo.RunList) and everything.next is None
        assert sorted(everything.ids) == ["greet:1", "greet:2", "waits:3"]
        assert all(isinstance(r, telo.RunStatus) for r in everything) and len(everything) == 3
        parked = app.runs(status="parked")
        assert parked.ids == ["waits:3"] and parked.runs[0].parked is not None
        assert parked.runs[0].parked.token == "pay:3"
        assert sorted(app.runs(workflow="greet").ids) == ["greet:1", "greet:2"]
        first = app.runs(limit=2)
        assert len(first) == 2 and first.next is not None
        rest = app.runs(limit=2, after=first.next)
        assert sorted(first.ids + rest.ids) == sorted(everything.ids) and rest.next is None
        assert len(app.runs(since="1h")) == 3  # a duration back from now, as `--since 1h`
        assert len(app.runs(since=SYSTEM_CLOCK.now_ms() + 60_000)) == 0  # epoch ms
        with pytest.raises(telo.TeloError, match="ERR_INVALID_VALUE"):
            app.runs(status="done")


def test_runs_answer_like_the_cli(journal: str) -> None:
    """One operations layer: the API's page is the page `telo runs list --json` prints."""
    import json

    from click.testing import CliRunner

    from telo.cli.main import cli

    with telo.load(MANIFEST, journal=journal) as app:
        app.run("greet", {"id": "c1"})
        app.run("waits", {"id": "c2"})
        api = [(r.run_id, r.status, r.workflow) for r in app.runs()]
    out = CliRunner().invoke(cli, ["runs", "list", "--json", "--journal", journal])
    assert out.exit_code == 0, out.output
    assert api == [(r["run"], r["status"], r["workflow"]) for r in json.loads(out.stdout)["runs"]]


# --- schedule() --------------------------------------------------------------------------------------------


def test_schedule_admits_a_run_that_starts_when_it_is_due(journal: str) -> None:
    clock = FakeClock(start_ms=SYSTEM_CLOCK.now_ms())
    with telo.load(MANIFEST, journal=journal, clock=clock) as app:
        scheduled = app.schedule("greet", {"id": "s1"}, after="1h")
        assert scheduled == telo.Scheduled("greet:s1", "greet", True, "scheduled", clock.now_ms() + 3_600_000)
        assert app.status(scheduled.run_id).status == "scheduled" and calls["hello s1"] == 0
        again = app.schedule("greet", {"id": "s1"}, at=clock.now_ms())
        assert again.scheduled is False and again.status == "scheduled"  # nothing written
        assert app.run_due() == 0
        clock.advance(seconds=3600)
        assert app.run_due() == 1
        assert app.result("greet:s1").ok and calls["hello s1"] == 1
        named = app.schedule("greet", {"id": "s2"}, after=timedelta(minutes=5), run_id="custom")
        assert named.run_id == "custom" and named.due_at == clock.now_ms() + 300_000
        with pytest.raises(telo.TeloError, match="ERR_DURABLE_SCHEDULE_INVALID"):
            app.schedule("greet", {"id": "s3"})
        with pytest.raises(telo.TeloError, match="ERR_DURABLE_SCHEDULE_INVALID"):
            app.schedule("greet", {"id": "s3"}, after=1, at=1)
        with pytest.raises(telo.TeloError, match="ERR_WORKFLOW_NOT_FOUND"):
            app.schedule("note", {}, after=1)


# --- resolve() ---------------------------------------------------------------------------------------------


def unconfirmed_charge(app: telo.App, run: str) -> None:
    """Leave ``run`` parked on an unconfirmed charge: the charge's intent is journaled without its receipt, as a
    process that died inside it leaves it."""
    assert app.run("charging", {"id": run.split(":")[1]}).status == "parked"
    assert app.deliver(f"pay:{run.split(':')[1]}", {"ok": True}, continue_run=False).delivered
    app.aio._store().append(run, Entry.decided("steps/charge/inputs", "inputs", {}))
    assert app.run_due() == 1
    status = app.status(run)
    assert status.status == "parked" and status.parked is not None
    assert status.parked.path == "steps/charge/@unconfirmed[0]"


def test_resolve_answers_an_unconfirmed_effect_and_the_status_keeps_it_once_settled(journal: str) -> None:
    with telo.load(MANIFEST, journal=journal) as app:
        unconfirmed_charge(app, "charging:u1")
        answer = app.resolve("charging:u1", "steps/charge", skip_with={"receipt": "by hand"})
        assert (answer.run_id, answer.path, answer.action, answer.continued) == \
            ("charging:u1", "steps/charge", "skip", True)
        assert answer.resolution["value"] == {"receipt": "by hand"} and answer.resolution["by"] == "operator"
        done = app.result("charging:u1", wait=10)
        assert done.ok and done.step("charge") == {"receipt": "by hand"} and calls["charge"] == 0
        status = app.status("charging:u1")
        assert status.settled and [(u["step"], u["resolution"]["action"]) for u in status.unconfirmed_effects] == \
            [("steps/charge", "skip")]

        unconfirmed_charge(app, "charging:u2")
        assert app.resolve("charging:u2", "steps/charge", redrive=True).continued
        assert app.result("charging:u2", wait=10).step("charge") == {"receipt": "from the card"}
        assert calls["charge"] == 1

        unconfirmed_charge(app, "charging:u3")
        assert app.resolve("charging:u3", "steps/charge", fail=True, continue_run=False).continued is False
        assert app.run_due() == 1
        assert app.result("charging:u3").status == "failed"
        with pytest.raises(telo.TeloError, match="ERR_DURABLE_RUN_SETTLED"):
            app.resolve("charging:u3", "steps/charge", redrive=True)
        with pytest.raises(ValueError, match="exactly one"):
            app.resolve("charging:u3", "steps/charge")
        with pytest.raises(ValueError, match="exactly one"):
            app.resolve("charging:u3", "steps/charge", redrive=True, fail=True)


# --- serve() -----------------------------------------------------------------------------------------------


def test_serve_until_idle_continues_the_due_runs_of_the_apps_workflows(journal: str) -> None:
    with telo.load(MANIFEST, journal=journal) as producer:
        for i in range(5):
            producer.schedule("greet", {"id": f"w{i}"}, after=0)
        producer.run("waits", {"id": "w-waits"})
        assert producer.deliver("pay:w-waits", {"ok": True}, continue_run=False).delivered
    with telo.load(MANIFEST, journal=journal) as worker:
        worker.serve(until_idle=True, concurrency=2, interval=0.05)
        assert all(worker.status(f"greet:w{i}").status == "completed" for i in range(5))
        assert worker.result("waits:w-waits").step("approve") == {"ok": True}
    assert sum(calls[f"hello w{i}"] for i in range(5)) == 5


def test_serve_under_a_fake_clock_takes_what_is_due_now(journal: str) -> None:
    clock = FakeClock(start_ms=SYSTEM_CLOCK.now_ms())
    with telo.load(MANIFEST, journal=journal, clock=clock) as app:
        assert app.run("sleepy", {"id": "f1"}).status == "parked"
        app.serve(until_idle=True, interval=0.05)  # not due: returns at once, nothing continued
        assert app.status("sleepy:f1").status == "parked"
        clock.advance(seconds=3600)
        app.serve(until_idle=True, interval=0.05)
        assert app.result("sleepy:f1").ok and calls["after f1"] == 1


def test_an_async_serve_runs_until_its_task_is_cancelled_and_close_stops_it(journal: str) -> None:
    async def main() -> None:
        async with telo.AsyncApp.load(MANIFEST, journal=journal) as app:
            worker = asyncio.ensure_future(app.serve(interval=0.05))
            await app.schedule("greet", {"id": "a1"}, after=0)
            assert (await app.result("greet:a1", wait=10)).ok
            await app.schedule("greet", {"id": "a2"}, after=0.2)  # due later: the worker is still sweeping
            assert (await app.result("greet:a2", wait=10)).ok
            worker.cancel()
            with pytest.raises(asyncio.CancelledError):
                await worker
            await app.schedule("greet", {"id": "a3"}, after=0)
            await asyncio.sleep(0.2)
            assert (await app.status("greet:a3")).status == "scheduled"  # nobody serves it any more
            again = asyncio.ensure_future(app.serve(interval=0.05))
            assert (await app.result("greet:a3", wait=10)).ok
        assert again.done()  # close() stopped the serve still going

    asyncio.run(main())


def test_the_blocking_serve_returns_on_ctrl_c(journal: str) -> None:
    with telo.load(MANIFEST, journal=journal) as app:
        app.schedule("greet", {"id": "k1"}, after=0)

        def interrupt_once_served() -> None:
            deadline = SYSTEM_CLOCK.monotonic() + 10
            while calls["hello k1"] == 0 and SYSTEM_CLOCK.monotonic() < deadline:
                threading.Event().wait(0.02)
            _thread.interrupt_main()

        threading.Thread(target=interrupt_once_served, daemon=True).start()
        app.serve(interval=0.05)  # returns (no KeyboardInterrupt) once the interrupt arrives
        assert app.result("greet:k1").ok


# --- load(recover=True) ------------------------------------------------------------------------------------


def test_load_with_recover_continues_the_runs_that_came_due_meanwhile(journal: str) -> None:
    clock = FakeClock(start_ms=SYSTEM_CLOCK.now_ms())
    with telo.load(MANIFEST, journal=journal, clock=clock) as app:
        assert app.run("sleepy", {"id": "r1"}).status == "parked"
        assert app.run("sleepy", {"id": "r2"}).status == "parked"
        app.schedule("greet", {"id": "r3"}, after="2h")
    clock.advance(seconds=3600)  # both naps are over; the scheduled greeting is not due yet
    with telo.load(MANIFEST, journal=journal, clock=clock) as plain:
        assert plain.status("sleepy:r1").status == "parked"  # not opted in: nothing continued
    with telo.load(MANIFEST, journal=journal, clock=clock, recover=True) as app:
        assert app.wait("sleepy:r1", timeout=10).ok and app.wait("sleepy:r2", timeout=10).ok
        assert app.status("greet:r3").status == "scheduled"
        clock.advance(seconds=3600)
        assert app.recover() == 1
        assert app.wait("greet:r3", timeout=10).ok
    assert calls["after r1"] == calls["after r2"] == calls["hello r3"] == 1


def test_an_async_app_recovers_on_its_first_use(journal: str) -> None:
    clock = FakeClock(start_ms=SYSTEM_CLOCK.now_ms())
    with telo.load(MANIFEST, journal=journal, clock=clock) as app:
        app.schedule("greet", {"id": "q1"}, after=0)

    async def main() -> telo.RunResult:
        async with telo.AsyncApp.load(MANIFEST, journal=journal, clock=clock, recover=True) as aapp:
            return await aapp.wait("greet:q1", timeout=10)

    assert asyncio.run(main()).ok


# --- an application without YAML ---------------------------------------------------------------------------


def test_an_application_needs_no_yaml_header(tmp_path: Path, journal: str) -> None:
    from telo.builder import cel, invoke, value

    with telo.load(None, journal=journal) as app:
        app.workflow("hello", [value("greeting", cel("'hi ' + inputs.name")),
                               invoke("noted", note, {"label": cel("steps.greeting.result")})],
                     inputs={"name": cel("inputs.name")}, run_id=cel("'hello:' + inputs.name"))
        done = app.run("hello", {"name": "ada"})
        assert done.ok and done.step("noted") == "hi ada"
        assert app.runs().ids == ["hello:ada"]
    assert calls["hi ada"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.db"]  # the journal named, nothing else
    with pytest.raises(telo.TeloError, match="ERR_JOURNAL_REQUIRED"):
        telo.load(None)


# --- schedules (issue 17) ----------------------------------------------------------------------------------

SCHEDULED = MANIFEST.replace("imports: {", "imports: { Schedule: scheduler,", 1) + """\
---
kind: Schedule.Cron
metadata: { name: hourly }
cron: "0 * * * *"
invoke: !ref greet
inputs: { id: !cel "'tick-' + tick.at" }
"""


def test_schedules_answer_like_telo_schedules(tmp_path: Path) -> None:
    """One operations layer: the API's schedule view is what `telo schedules show --json` prints, and its actions
    are the ones the CLI records."""
    import json

    from click.testing import CliRunner

    from telo.cli.main import cli

    manifest = tmp_path / "scheduled.yaml"
    manifest.write_text(SCHEDULED)
    with telo.load(manifest) as app:
        assert app.pause_schedule("hourly", "parity", by="ada").paused
        run = app.trigger_schedule("hourly", by="ada")
        assert run.startswith("hourly@trigger-")
        assert app.backfill_schedule("hourly", "2020-01-01T00:00:00Z", "2020-01-01T01:00:00Z", by="ada") == \
            ["hourly@2020-01-01T00:00:00Z", "hourly@2020-01-01T01:00:00Z"]
        api = app.schedule_view("hourly")
        listed = [v.name for v in app.schedules()]
    runner = CliRunner()
    shown = runner.invoke(cli, ["schedules", "show", str(manifest), "hourly", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == api.to_json()
    listing = runner.invoke(cli, ["schedules", "list", str(manifest), "--json"])
    assert [s["name"] for s in json.loads(listing.stdout)["schedules"]] == listed == ["hourly"]
    resumed = runner.invoke(cli, ["schedules", "resume", str(manifest), "hourly", "--by", "bob", "--json"])
    assert json.loads(resumed.stdout)["paused"] is False
    with telo.load(manifest) as app:
        view = app.schedule_view("hourly")
        assert not view.paused and [(o.op, o.by) for o in view.ops][-1] == ("resume", "bob")
        app.serve(until_idle=True, interval=0.05)
        assert app.result(run).step("hello") == f"hello tick-{run.split('trigger-', 1)[1]}"
        assert app.result("hourly@2020-01-01T00:00:00Z").step("hello") == "hello tick-2020-01-01T00:00:00Z"
