"""Issue 15, "The CLI tells the truth": runs held after a manifest change are released in bulk —
`telo resume --workflow W --force [--all] [--dry-run]`, one line per run saying what changed — and `telo fork`
says that the steps after the checkpoint run again under the new run's idempotency keys (the real `telo`)."""

from __future__ import annotations

import json
import re

import pytest

from tests.cli.support import Env

pytestmark = pytest.mark.timeout(300)


def hold_two(env: Env) -> None:
    """flow:h1 and flow:h2 parked on their Await, then held by a change to the workflow; flow:c completed."""
    env.run("c")
    env.run("h1", "gate=true")
    env.run("h2", "gate=true")
    env.manifest.write_text(env.manifest.read_text().replace("inputs: { n: 2 }", "inputs: { n: 20 }"))
    env.run("h1", "gate=true")
    env.run("h2", "gate=true")
    for run in ("flow:h1", "flow:h2"):
        assert env.json("status", run)["parked"]["path"] == "@manifest[0]"


def test_held_runs_are_listed_and_resumed_in_bulk(env: Env) -> None:
    hold_two(env)

    dry = env.j("resume", "--workflow", "flow", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    # (given the manifest — the env names one — each line also says the change is safe: it is after the Await)
    lines = [line.replace(" — safe — ", " — ") for line in dry.stdout.splitlines()]
    assert sorted(lines[:2]) == ["run 'flow:h1' (flow): changed: flow — would resume",
                                 "run 'flow:h2' (flow): changed: flow — would resume"], dry.stdout
    assert lines[2] == "dry run: 2 held run(s) of workflow 'flow'; nothing was written"
    assert "`telo resume " in dry.stderr and "--workflow flow --force`" in dry.stderr
    for run in ("flow:h1", "flow:h2"):  # nothing was written
        assert env.json("status", run)["parked"]["path"] == "@manifest[0]"

    # The bulk form takes no RUN, and forces only when told to.
    assert env.j("resume", "--workflow", "flow").returncode == 2
    assert env.j("resume", "flow:h1", "--workflow", "flow", "--force").returncode == 2
    assert env.j("resume", "--force").returncode == 2
    other = env.j("resume", "--workflow", "other", "--force")
    assert other.returncode == 1 and "0 of 0 held run(s) of workflow 'other' resumed" in other.stdout

    done = env.j("resume", "--workflow", "flow", "--force", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert (answer["held"], answer["resumed"], answer["dryRun"]) == (2, 2, False)
    assert {r["run"]: (r["resumed"], r["changes"]["changed"]) for r in answer["runs"]} == \
        {"flow:h1": (True, ["flow"]), "flow:h2": (True, ["flow"])}
    for run in ("flow:h1", "flow:h2"):
        assert env.json("status", run)["status"] == "running"
        assert any("@manifest[0]" in line for line in env.j("runs", "journal", run).stdout.splitlines())
    env.telo("worker", "m.yaml", "--until-idle", check=True)  # continued on the new manifest: back to its Await
    for run in ("flow:h1", "flow:h2"):
        assert env.json("status", run)["parked"]["path"] == "steps/approve"

    nothing = env.j("resume", "--all", "--force")
    assert nothing.returncode == 1 and "0 of 0 held run(s) of any workflow resumed" in nothing.stdout


def test_fork_says_the_steps_after_the_checkpoint_run_under_new_keys(sqlite_env: Env) -> None:
    env = sqlite_env
    env.run("a")
    forked = env.j("fork", "flow:a", "steps/first", "--run-id", "flow:a-try2")
    assert forked.returncode == 0, forked.stderr
    assert "hint: the steps after the checkpoint execute again under the new run's idempotency keys " \
        "(flow:a-try2/steps/…), not flow:a's: an effect that is not idempotent across runs may happen twice" \
        in forked.stderr
    as_json = env.j("fork", "flow:a", "steps/first", "--run-id", "flow:a-try3", "--json")
    assert json.loads(as_json.stdout)["run"] == "flow:a-try3" and "flow:a-try3/steps/…" in as_json.stderr

    # What the hint says is what happens: the fork's effects carry its own keys.
    env.telo("worker", "m.yaml", "--until-idle", check=True)
    ledger = env.ledger()
    assert ledger.count("flow:a/steps/second") == 1
    assert "flow:a-try2/steps/second" in ledger and "flow:a-try2/steps/third" in ledger
    assert not any(re.match(r"flow:a-try2/steps/first", line) for line in ledger)  # before the checkpoint
