"""`telo run` tells the truth (issue 15): it prints each durable run's outcome and exits with a code that says it;
`--json` reports a run's final status, never `running` for one that settled, and the steps' own output stays off
its stdout; attaching to a run another process executes says so. Driven through the real command. Each test
but the `--exit-on targets` one failed before: `telo run` printed nothing, exited 0 for a failed or parked run,
and `--json` read `"status": "running"` with the steps' prints mixed in."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.process import telo

MANIFEST = """\
kind: Telo.Application
metadata: { name: Outcomes, version: 1.0.0 }
imports: { Local: durable-local, Durable: durable, Journal: durable-journal-sqlite, Py: python }
targets:
  - name: start
    invoke: !ref flow
    inputs: { id: !cel "inputs.id", mode: !cel "inputs.mode" }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Py.Function
metadata: { name: work }
function: steps:work
---
kind: Durable.Await
metadata: { name: gate }
token: !cel "'gate:' + inputs.id"
---
kind: Local.Workflow
metadata: { name: flow }
journal: !ref runs
runId: !cel "'flow:' + inputs.id"
inputs: { id: !cel "inputs.id", mode: !cel "inputs.mode" }
steps:
  - name: work
    invoke: !ref work
    inputs: { mode: !cel "inputs.mode" }
  - name: gate
    when: !cel "inputs.mode == 'park'"
    invoke: !ref gate
    inputs: { id: !cel "inputs.id" }
"""

STEPS = """\
import time


def work(inputs):
    print("a line the step prints", flush=True)
    if inputs["mode"] == "fail":
        raise RuntimeError("the card was declined")
    if inputs["mode"] == "slow":
        time.sleep(4)
    return {"done": inputs["mode"]}
"""


def app(tmp_path: Path) -> Path:
    (tmp_path / "steps.py").write_text(STEPS)
    (tmp_path / "flow.yaml").write_text(MANIFEST)
    return tmp_path / "flow.yaml"


def run(tmp_path: Path, run_id: str, mode: str, *more: str) -> subprocess.CompletedProcess[str]:
    return telo("run", str(app(tmp_path)), "--input", f"id={run_id}", "--input", f"mode={mode}",
                "--progress", "off", *more, cwd=tmp_path)


def test_a_completed_run_prints_its_result_and_exits_0(tmp_path: Path) -> None:
    out = run(tmp_path, "a", "ok")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "run 'flow:a': completed; result: " in out.stdout and '"done": "ok"' in out.stdout, out.stdout


def test_a_failed_run_says_so_and_exits_1(tmp_path: Path) -> None:
    out = run(tmp_path, "b", "fail")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "run 'flow:b': failed: " in out.stdout and "the card was declined" in out.stdout, out.stdout


def test_a_parked_run_says_what_it_waits_for_and_exits_4(tmp_path: Path) -> None:
    out = run(tmp_path, "c", "park")
    assert out.returncode == 4, out.stdout + out.stderr
    assert "run 'flow:c': parked, waiting for a delivery to 'gate:c'" in out.stdout, out.stdout
    assert "telo deliver gate:c --manifest" in out.stdout
    delivered = telo("deliver", "gate:c", "--manifest", str(tmp_path / "flow.yaml"), "--payload", "{}", cwd=tmp_path)
    assert delivered.returncode == 0, delivered.stderr
    twice = telo("deliver", "gate:c", "--manifest", str(tmp_path / "flow.yaml"), "--payload", "{}", cwd=tmp_path)
    assert twice.returncode == 1 and "delivered: false" in twice.stdout  # (and, since a walk-through, why:)
    assert "hint: no run is parked on 'gate:c' now: it was delivered to already" in twice.stderr, twice.stderr
    again = run(tmp_path, "c", "park")
    assert again.returncode == 0 and "run 'flow:c': completed" in again.stdout, again.stdout + again.stderr


def test_json_reports_the_final_status_and_nothing_but_json(tmp_path: Path) -> None:
    out = run(tmp_path, "d", "park", "--json")
    assert out.returncode == 4, out.stdout + out.stderr
    answer = json.loads(out.stdout)["start"]  # the whole stdout is the JSON: the step's print went to stderr
    assert answer["runId"] == "flow:d" and answer["status"] == "parked", answer
    assert answer["parked"]["token"] == "gate:d"
    assert "a line the step prints" in out.stderr
    done = json.loads(run(tmp_path, "e", "ok", "--json").stdout)["start"]
    assert done["status"] == "completed" and done["result"]["steps"]["work"]["result"] == {"done": "ok"}, done
    failed = run(tmp_path, "f", "fail", "--json")
    assert failed.returncode == 1 and json.loads(failed.stdout)["start"]["error"]["code"], failed.stdout


def test_attaching_to_a_run_another_process_executes_names_that_process(tmp_path: Path) -> None:
    manifest = app(tmp_path)
    first = subprocess.Popen([sys.executable, "-m", "telo", "run", str(manifest), "--input", "id=g", "--input",
                              "mode=slow", "--progress", "off"], cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:  # the first process is inside the slow step once the journal names the run
            listed = telo("runs", "list", "--journal", str(tmp_path / "runs.db"), "--json", cwd=tmp_path)
            if listed.returncode == 0 and "flow:g" in listed.stdout:
                break
            assert time.monotonic() < deadline, listed.stderr
            time.sleep(0.1)
        second = run(tmp_path, "g", "slow")
        assert second.returncode == 4, second.stdout + second.stderr
        assert "run 'flow:g': running in another process (" in second.stdout, second.stdout
        assert f":{first.pid}:" in second.stdout  # the holder names the executing process
        assert "a line the step prints" not in second.stdout  # it did not execute the step
    finally:
        stdout, _ = first.communicate(timeout=60)
    assert first.returncode == 0 and "run 'flow:g': completed" in stdout, stdout


def test_exit_on_targets_keeps_upstreams_rule(tmp_path: Path) -> None:
    out = run(tmp_path, "h", "fail", "--exit-on", "targets")
    assert out.returncode == 0 and "run 'flow:h': failed" in out.stdout, out.stdout + out.stderr


def test_attaching_with_other_inputs_warns_and_the_run_keeps_its_own(tmp_path: Path) -> None:
    """A start that attaches to an existing run (onConflict: attach) used to take other inputs silently."""
    first = run(tmp_path, "i", "park")
    assert first.returncode == 4, first.stdout + first.stderr
    same = run(tmp_path, "i", "park")
    assert "inputs_differ" not in same.stderr, same.stderr
    other = run(tmp_path, "i", "ok")
    assert "durable.run.inputs_differ durable.run='flow:i'" in other.stderr, other.stderr
    assert "its own inputs are not used" in other.stderr
    assert other.returncode == 4 and "run 'flow:i': parked" in other.stdout  # still the parked run, mode=park


def test_attaching_to_a_run_that_failed_prints_its_outcome(tmp_path: Path) -> None:
    # (a user's walk-through: attaching raised the run's error as upstream does, and telo run printed no line
    # for the run on stdout, and nothing at all with --json)
    assert run(tmp_path, "k", "fail").returncode == 1
    again = run(tmp_path, "k", "fail")
    assert again.returncode == 1, again.stdout + again.stderr
    assert "run 'flow:k': failed: " in again.stdout and "the card was declined" in again.stdout, again.stdout
    assert "a line the step prints" not in again.stdout + again.stderr  # nothing executed again
    answer = json.loads(run(tmp_path, "k", "fail", "--json").stdout)["start"]
    assert answer["runId"] == "flow:k" and answer["attached"] is True and answer["status"] == "failed", answer
    assert "the card was declined" in answer["error"]["message"]
