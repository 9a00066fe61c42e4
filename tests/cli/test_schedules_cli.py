"""``telo schedules list|show|pause|resume|trigger|backfill`` (issue 17): a manifest's durable schedules as an
operator sees and operates them, on a real SQLite journal.

Each action is recorded in the schedule's ledger (``<schedule>@ledger``) with who, when and why — read back here
both through ``show --json`` and with :func:`telo.kinds.schedule_ledger.read`; ``trigger`` and ``backfill`` admit
runs with the ids a tick has (``<schedule>@trigger-<now>``, ``<schedule>@<tick>``), so a backfill over ticks that
have runs admits none twice, and ``telo worker --until-idle`` executes them. A bad range, an unknown schedule and a
missing journal are catalogue errors with their exit codes, never a traceback. The schedule ticks daily at 03:00
UTC and the backfills reach back to 2020, so the real clock never fires a tick under the test's feet.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from telo.cli.main import cli
from telo.journal.sqlite import SqliteStore
from telo.kinds import schedule_ledger as ledger
from telo.kinds.cron import tick_text
from tests.process import telo

STEPS = """\
def work(inputs):
    return {"tick": inputs["tick"]}
"""

MANIFEST = """\
kind: Telo.Application
metadata: { name: Nightly, version: 1.0.0 }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Py: python, Schedule: scheduler }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Py.Function
metadata: { name: work }
function: sched_cli_steps:work
---
kind: Local.Workflow
metadata: { name: report }
journal: !ref runs
inputs: { tick: !cel "inputs.tick" }
steps:
  - { name: work, invoke: !ref work, inputs: { tick: !cel "inputs.tick" } }
---
kind: Schedule.Cron
metadata: { name: nightly }
cron: "0 3 * * *"
invoke: !ref report
catchUp: none
overlap: bufferOne
jitter: 30s
startAt: "2020-01-01T00:00:00Z"
endAt: 4102444800000
---
kind: Schedule.Interval
metadata: { name: heartbeat }
every: 1h
invoke: !ref work
"""


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    (tmp_path / "sched_cli_steps.py").write_text(STEPS)
    path = tmp_path / "nightly.yaml"
    path.write_text(MANIFEST)
    with SqliteStore(str(tmp_path / "runs.db")):
        pass  # the journal exists (the commands open it, never create it)
    return path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["schedules", *args])


def ok(*args: str) -> Result:
    out = run(*args)
    assert out.exit_code == 0, out.output
    return out


def refused(out: Result, code: str, exit_code: int) -> None:
    assert out.exit_code == exit_code, out.output
    assert out.stderr.startswith(f"error: {code}: "), out.stderr
    assert "hint: " in out.stderr and "Traceback" not in out.output
    assert isinstance(out.exception, SystemExit)  # the CLI's error path, not an exception escaping it


def ops_of(tmp_path: Path) -> list[ledger.Operation]:
    with SqliteStore(str(tmp_path / "runs.db")) as store:
        return list(ledger.read(store, "nightly").ops)


def test_list_shows_every_schedule_as_a_table_and_as_json(manifest: Path) -> None:
    lines = ok("list", str(manifest)).stdout.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "TICKS", "INVOKE", "STATE", "LAST", "NEXT", "HOLDER"]
    assert lines[1].split()[:2] == ["heartbeat", "Scheduler.Interval"] and "in-process" in lines[1]
    assert lines[2].startswith("nightly") and "cron '0 3 * * *' in UTC" in lines[2] and " active " in lines[2]
    assert len(lines) == 3
    shown = json.loads(ok("list", str(manifest), "--json").stdout)["schedules"]
    assert [(s["name"], s["kind"], s["durable"]) for s in shown] == [
        ("heartbeat", "Scheduler.Interval", False), ("nightly", "Scheduler.Cron", True)]
    nightly = shown[1]
    assert (nightly["invoke"], nightly["paused"], nightly["last"], nightly["holder"]) == ("report", False, None, None)
    assert nightly["next"].endswith("T03:00:00Z")
    assert nightly["policy"] == {"catchUp": "none", "catchUpWindowMs": 86_400_000, "overlap": "bufferOne",
                                 "jitterMs": 30_000, "startAt": "2020-01-01T00:00:00Z",
                                 "endAt": "2100-01-01T00:00:00Z", "pauseOnFailure": False}


def test_pause_resume_and_trigger_are_recorded_in_the_ledger_with_who_and_why(manifest: Path, tmp_path: Path) -> None:
    m = str(manifest)
    paused = json.loads(ok("pause", m, "nightly", "--reason", "db maintenance", "--by", "ada", "--json").stdout)
    assert {k: paused[k] for k in ("schedule", "op", "by", "reason", "paused", "wasPaused")} == \
        {"schedule": "nightly", "op": "pause", "by": "ada", "reason": "db maintenance", "paused": True,
         "wasPaused": False}
    human = ok("show", m, "nightly").stdout
    assert "state: paused by ada at " in human and ": db maintenance" in human
    assert "next: none while paused" in human and "overlap: bufferOne" in human and "jitter: 30s" in human
    assert "startAt: 2020-01-01T00:00:00.000Z" in human and "endAt: 2100-01-01T00:00:00.000Z" in human
    again = ok("pause", m, "nightly", "--by", "ada")
    assert "paused (it was already)" in again.stdout
    assert "hint: no process decides its ticks now" in again.stderr
    resumed = ok("resume", m, "nightly", "--by", "bob", "--reason", "done")
    assert "state: active: ticks from now on fire again" in resumed.stdout
    triggered = json.loads(ok("trigger", m, "nightly", "--reason", "rerun the report", "--json").stdout)
    run_id = triggered["run"]
    assert run_id == f"nightly@trigger-{tick_text(ledger.parse_instant(triggered['at']))}"
    assert triggered["workflow"] == "report" and "@" in triggered["by"]  # user@host by default

    recorded = ops_of(tmp_path)
    assert [(o.op, o.by, o.reason) for o in recorded] == [
        ("pause", "ada", "db maintenance"), ("pause", "ada", None), ("resume", "bob", "done"),
        ("trigger", triggered["by"], "rerun the report")]
    assert recorded[-1].data == {"run": run_id}
    shown = json.loads(ok("show", m, "nightly", "--json").stdout)
    assert [(o["op"], o["by"]) for o in shown["ops"]] == [(o.op, o.by) for o in recorded]
    assert all(isinstance(o["at"], str) and o["at"].endswith("Z") for o in shown["ops"])  # RFC 3339, as --json
    assert shown["paused"] is False and shown["pause"] is None
    assert shown["created"] is None  # operator actions do not start a schedule: a worker's first beat does
    table = ok("show", m, "nightly").stdout
    assert "AT" in table and "OP" in table and f"run {run_id}" in table and "rerun the report" in table
    with SqliteStore(str(tmp_path / "runs.db")) as store:
        record = store.read_run(run_id)
    assert record is not None and record.status == "scheduled" and record.workflow == "report"


def test_backfill_admits_the_ticks_own_runs_once_and_a_worker_executes_them(manifest: Path, tmp_path: Path) -> None:
    m = str(manifest)
    first = json.loads(ok("backfill", m, "nightly", "2020-03-01T00:00:00Z", "2020-03-03T12:00:00Z", "--reason",
                          "outage", "--json").stdout)
    days = [f"nightly@2020-03-0{d}T03:00:00Z" for d in (1, 2, 3, 4)]
    assert (first["ticks"], first["admitted"], first["existing"]) == (3, days[:3], 0)
    # overlapping the first: only the tick without a run is admitted; epoch ms work as well as RFC 3339
    second = ok("backfill", m, "nightly", str(ledger.parse_instant("2020-03-02T00:00:00Z")), "2020-03-04T03:00:00Z")
    assert "admitted: 1 run(s)" in second.stdout and "existing: 2 tick(s) had their run already" in second.stdout
    assert days[3] in second.stdout and days[1] not in second.stdout
    third = json.loads(ok("backfill", m, "nightly", "2020-03-01T00:00:00Z", "2020-03-04T23:59:59Z", "--json").stdout)
    assert (third["ticks"], third["admitted"], third["existing"]) == (4, [], 4)
    backfills = [o for o in ops_of(tmp_path) if o.op == "backfill"]
    assert [(o.data["from"], o.data["to"], o.data["ticks"], o.reason) for o in backfills] == [
        ("2020-03-01T00:00:00Z", "2020-03-03T12:00:00Z", 3, "outage"),
        ("2020-03-02T00:00:00Z", "2020-03-04T03:00:00Z", 3, None),
        ("2020-03-01T00:00:00Z", "2020-03-04T23:59:59Z", 4, None)]
    trigger = json.loads(ok("trigger", m, "nightly", "--json").stdout)["run"]

    worker = telo("worker", m, "--until-idle", "--interval", "100ms", cwd=tmp_path, timeout=120)
    assert worker.returncode == 0, worker.stdout + worker.stderr
    with SqliteStore(str(tmp_path / "runs.db")) as store:
        for run_id in [*days, trigger]:
            record = store.read_run(run_id)
            assert record is not None and record.status == "completed", (run_id, record)
            tick = run_id.split("@", 1)[1].removeprefix("trigger-")
            assert record.decoded_result()["steps"]["work"]["result"] == {"tick": tick}
        report_runs = sorted(r.run for r in store.iter_all_runs() if r.workflow == "report")
    assert report_runs == sorted([*days, trigger])  # nothing else started, nothing twice


@pytest.mark.parametrize(("start", "end", "says"), [
    ("2020-03-03T00:00:00Z", "2020-03-01T00:00:00Z", "TO (2020-03-01T00:00:00Z) is before FROM"),
    ("2020-03-01T04:00:00Z", "2020-03-01T05:00:00Z", "no tick falls in"),
    ("2020-01-01T00:00:00Z", "2023-01-01T00:00:00Z", "holds more than 1000 ticks"),
    ("yesterday", "2020-03-01T00:00:00Z", "FROM: 'yesterday' is neither epoch milliseconds nor a timestamp"),
])
def test_a_bad_backfill_range_is_refused_with_exit_3_and_nothing_recorded(manifest: Path, tmp_path: Path,
                                                                          start: str, end: str, says: str) -> None:
    out = run("backfill", str(manifest), "nightly", start, end)
    refused(out, "ERR_SCHEDULE_RANGE_INVALID", 3)
    assert says in out.stderr
    assert ops_of(tmp_path) == []
    with SqliteStore(str(tmp_path / "runs.db")) as store:
        assert store.read_run("nightly@2020-03-01T03:00:00Z") is None


def test_an_unknown_or_in_process_schedule_and_a_missing_journal_are_not_there(manifest: Path,
                                                                               tmp_path: Path) -> None:
    m = str(manifest)
    for command in (["show", m, "nightlly"], ["pause", m, "nightlly"], ["trigger", m, "nightlly"],
                    ["backfill", m, "nightlly", "2020-03-01T00:00:00Z", "2020-03-02T00:00:00Z"]):
        out = run(*command)
        refused(out, "ERR_SCHEDULE_NOT_FOUND", 1)
        assert "'nightlly' is not a durable schedule of" in out.stderr
        assert "hint: its durable schedules: nightly" in out.stderr
    timer = run("resume", m, "heartbeat")
    refused(timer, "ERR_SCHEDULE_NOT_FOUND", 1)
    assert "an in-process timer" in timer.stderr
    for name in ("runs.db", "runs.db-wal", "runs.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    for command in (["list", m], ["show", m, "nightly"], ["pause", m, "nightly"]):
        refused(run(*command), "ERR_JOURNAL_NOT_FOUND", 1)
    assert not (tmp_path / "runs.db").exists()  # refused, never created
    real = telo("schedules", "show", m, "nightlly", cwd=tmp_path)  # the real command: one line and a hint
    assert real.returncode == 1 and real.stderr.startswith("error: ERR_JOURNAL_NOT_FOUND: ")
    assert "Traceback" not in real.stderr
