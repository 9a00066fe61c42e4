"""``telo restore``, ``telo fork`` and ``telo schedule`` (+ ``telo worker --until-idle``) on every journal."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.cli.support import Env

pytestmark = pytest.mark.timeout(240)


def checkpoint_seq(env: Env, run: str, path: str) -> int:
    found = [c["seq"] for c in env.json("runs", "checkpoints", run)["checkpoints"] if c["path"] == path]
    assert found, f"no checkpoint at {path}"
    return int(max(found))


def test_restore_re_executes_exactly_the_steps_after_the_checkpoint(env: Env) -> None:
    env.run("r")
    assert Counter(env.ledger()) == {"flow:r/steps/first": 1, "flow:r/steps/second": 1, "flow:r/steps/third": 1}
    seq = checkpoint_seq(env, "flow:r", "steps/first")

    restored = env.json("restore", "flow:r", str(seq), "--reason", "redo the tail")
    assert restored == {"run": "flow:r", "restored": True, "checkpoint": seq, "epoch": 1, "status": "running"}
    assert env.json("runs", "show", "flow:r")["epoch"] == 1
    env.run("r")  # resubmitting the same id continues the restored run
    assert Counter(env.ledger()) == {"flow:r/steps/first": 1, "flow:r/steps/second": 2, "flow:r/steps/third": 2}
    shown = env.json("runs", "show", "flow:r")
    assert shown["status"] == "completed" and shown["epoch"] == 1

    journal = env.json("runs", "journal", "flow:r")["entries"]
    restore = next(e for e in journal if e["path"] == "@restore[1]")
    assert restore["value"]["checkpoint"] == seq and restore["value"]["reason"] == "redo the tail"
    assert {e.get("storedPath") for e in journal if e["path"] == "steps/third"} == {None, "@epoch[1]/steps/third"}
    assert [c["epoch"] for c in env.json("runs", "checkpoints", "flow:r")["checkpoints"]
            if c["path"] == "steps/third"] == [0, 1]  # the abandoned timeline stays reachable

    # A checkpoint named by its step path is its newest one (here epoch 1's steps/second), and human output.
    human = env.j("restore", "flow:r", "steps/second")
    assert human.returncode == 0 and re.search(r"restored: true", human.stdout)
    assert re.search(r"epoch: 2", human.stdout) and "telo worker" in human.stderr
    env.run("r")
    assert Counter(env.ledger())["flow:r/steps/third"] == 3 and Counter(env.ledger())["flow:r/steps/second"] == 2


def test_unknown_checkpoints_and_runs_fail_with_the_hint(env: Env) -> None:
    env.run("u")
    for command in (["restore", "flow:u", "999"], ["fork", "flow:u", "999"], ["restore", "flow:u", "steps/nope"],
                    ["fork", "flow:u", "steps/nope", "--run-id", "x"]):
        proc = env.j(*command)
        assert proc.returncode == 1, proc.stderr
        assert "error: ERR_CHECKPOINT_NOT_FOUND" in proc.stderr
        flag = " ".join(env.journal_args)  # the hinted command reaches the journal as pasted
        assert f"hint: list the run's checkpoints with `telo runs checkpoints {flag} flow:u`" in proc.stderr
    missing = env.j("restore", "flow:nope", "0")
    assert missing.returncode == 1 and "error: ERR_DURABLE_RUN_NOT_FOUND" in missing.stderr
    assert env.json("runs", "show", "flow:u")["status"] == "completed"  # nothing was touched
    assert env.j("fork", "flow:u", "0", "--run-id", "flow:u").returncode == 3  # the id exists: telo refuses


def run_file(env: Env, run: str) -> Path:
    return env.root / "journal" / f"{quote(run, safe='')}.ndjson"


def test_fork_continues_from_the_checkpoint_and_leaves_the_original_untouched(env: Env) -> None:
    env.run("f")
    before = (env.j("runs", "journal", "flow:f", "--json").stdout, env.j("runs", "show", "flow:f", "--json").stdout)
    file_bytes = run_file(env, "flow:f").read_bytes() if env.kind == "file" else None
    seq = checkpoint_seq(env, "flow:f", "steps/first")

    forked = env.json("fork", "flow:f", str(seq), "--run-id", "flow:f2")
    assert forked == {"run": "flow:f2", "forkedFrom": "flow:f", "checkpoint": seq, "status": "running"}
    env.telo("worker", "m.yaml", "--until-idle", "--interval", "200ms", check=True)

    ledger = Counter(env.ledger())
    assert ledger == {"flow:f/steps/first": 1, "flow:f/steps/second": 1, "flow:f/steps/third": 1,
                      "flow:f2/steps/second": 1, "flow:f2/steps/third": 1}  # first was copied, not re-run
    fork = env.json("runs", "show", "flow:f2")
    assert fork["status"] == "completed" and fork["workflow"] == "flow"
    assert fork["result"]["steps"]["first"]["result"] == {"n": 1, "raw": "AAEC-g"}
    assert fork["inputs"]["id"] == "f"
    entries = env.json("runs", "journal", "flow:f2")["entries"]
    assert next(e for e in entries if e["path"] == "@forked")["value"] == {"from": "flow:f", "checkpoint": seq}

    after = (env.j("runs", "journal", "flow:f", "--json").stdout, env.j("runs", "show", "flow:f", "--json").stdout)
    assert after == before  # the original's entries and record are exactly as they were
    if file_bytes is not None:
        assert run_file(env, "flow:f").read_bytes() == file_bytes  # ... down to the bytes of its file

    default = env.json("fork", "flow:f", "0")  # from the start; the default id names its origin
    assert re.fullmatch(r"flow:f:fork:[0-9a-f]{8}", default["run"])
    human = env.j("fork", "flow:f", str(seq), "--run-id", "flow:f3")
    assert human.returncode == 0 and re.search(r"forkedFrom: flow:f$", human.stdout, re.M)


def test_schedule_admits_a_run_a_worker_starts_when_due(env: Env) -> None:
    env.run("warm")  # the journal exists (a file journal's directory, a PostgreSQL table)
    scheduled = env.telo("schedule", "m.yaml", "flow", "--after", "1s", "--input", "id=s", "--input", "gate=false",
                         "--json", check=True)
    view = json.loads(scheduled.stdout)
    assert view["run"] == "flow:s" and view["scheduled"] is True and view["workflow"] == "flow"
    shown = env.json("runs", "show", "flow:s")
    assert shown["status"] == "scheduled" and shown["dueAt"] == view["dueAt"]
    # typed by the workflow's inputType (the boolean false, not the text "false"), its defaults filled
    assert shown["inputs"] == {"id": "s", "gate": False, "fail": False, "sleep": 0}
    assert [r["run"] for r in env.json("runs", "list", "--status", "scheduled")["runs"]] == ["flow:s"]
    assert "flow:s/steps/first" not in env.ledger()  # nothing ran yet

    again = env.telo("schedule", "m.yaml", "flow", "--after", "1s", "--input", "id=s")
    assert again.returncode == 1 and "scheduled: false" in again.stdout and "another --run-id" in again.stderr

    custom = env.telo("schedule", "m.yaml", "flow", "--at", "2000-01-01T00:00:00Z", "--input", "id=t",
                      "--run-id", "nightly:1", "--json", check=True)
    assert json.loads(custom.stdout)["run"] == "nightly:1"

    env.telo("worker", "m.yaml", "--until-idle", "--interval", "200ms", check=True)
    assert env.json("runs", "show", "flow:s")["status"] == "completed"
    assert env.json("runs", "show", "nightly:1")["status"] == "completed"
    ledger = Counter(env.ledger())
    assert ledger["flow:s/steps/third"] == 1 and ledger["nightly:1/steps/first"] == 1


def test_schedule_usage_and_refusals(sqlite_env: Env) -> None:
    env = sqlite_env
    assert env.telo("schedule", "m.yaml", "flow", "--input", "id=x").returncode == 2  # neither --after nor --at
    assert env.telo("schedule", "m.yaml", "flow", "--after", "1s", "--at", "2000-01-01T00:00:00Z",
                    "--input", "id=x").returncode == 2
    unknown = env.telo("schedule", "m.yaml", "nope", "--after", "1s")
    assert unknown.returncode == 1 and "error: ERR_WORKFLOW_NOT_FOUND" in unknown.stderr
    assert "hint: its workflows: flow" in unknown.stderr
    bad = env.telo("schedule", "m.yaml", "flow", "--after", "soon", "--input", "id=x")
    assert bad.returncode == 2 and "error: ERR_INVALID_VALUE" in bad.stderr  # a malformed option: usage (docs/cli.md)
