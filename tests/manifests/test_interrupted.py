"""Durable scenarios that need more than one process.

A durable run interrupted by a plain process exit continues when the same run id is submitted again.

Two processes: the first ``telo run`` dies inside the third step (``os._exit(1)``, no cleanup); the second,
with the same run id, claims the run at once (its holder process is gone), replays the two finished steps
from the journal, re-runs the unfinished one and completes. The ledger shows the finished steps' effects
happened exactly once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "__fixtures__" / "interrupted" / "interrupted.yaml"
SCHEDULED = HERE / "__fixtures__" / "scheduled" / "scheduled.yaml"


def telo(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "telo", *args], capture_output=True, text=True, timeout=60,
                          env=env, stdin=subprocess.DEVNULL)


def test_a_run_killed_by_a_process_exit_continues_when_resubmitted(tmp_path: Path) -> None:
    ledger, journal = tmp_path / "ledger.txt", tmp_path / "journal.db"
    env = {**os.environ, "INTERRUPTED_LEDGER": str(ledger), "INTERRUPTED_MARKER": str(tmp_path / "crashed"),
           "INTERRUPTED_JOURNAL": str(journal)}
    run = f"interrupted-{uuid.uuid4()}"

    first = telo("run", str(FIXTURE), "--input", f"run={run}", env=env)
    assert first.returncode == 1, first.stdout + first.stderr
    assert ledger.read_text().splitlines() == ["first", "second after first", "crash step entered"]
    status = telo("status", run, "--journal", str(journal), "--json", env=env)
    assert json.loads(status.stdout)["status"] == "running", status.stdout + status.stderr

    second = telo("run", str(FIXTURE), "--input", f"run={run}", env=env)
    assert second.returncode == 0, second.stdout + second.stderr

    result = telo("result", run, "--journal", str(journal), "--json", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "completed"
    assert outcome["replayedSteps"] == 2  # first and second came from the journal
    steps = outcome["result"]["steps"]
    assert steps["second"]["result"] == {"recorded": "second after first"}
    assert steps["fragile"]["result"] == {"survived": True}
    assert steps["third"]["result"] == {"recorded": "third"}
    # finished steps ran once; only the step the process died in ran twice
    assert ledger.read_text().splitlines() == [
        "first", "second after first", "crash step entered", "crash step entered", "third",
    ]

    again = telo("run", str(FIXTURE), "--input", f"run={run}", env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(ledger.read_text().splitlines()) == 5  # a completed run is attached to, never re-run


def test_a_scheduled_run_is_started_by_a_worker_with_its_typed_inputs(tmp_path: Path) -> None:
    """Local.Schedule only admits the run; `telo worker` starts it once due, with the scheduled inputs decoded
    from the run record (an int beyond 2^53, a uint, bytes, a timestamp, a duration, an int-keyed map)."""
    journal = tmp_path / "journal.db"
    env = {**os.environ, "SCHEDULED_JOURNAL": str(journal)}
    run = f"scheduled-{uuid.uuid4()}"

    scheduled = telo("run", str(SCHEDULED), "--input", f"run={run}", "--json", env=env)
    assert scheduled.returncode == 0, scheduled.stdout + scheduled.stderr
    assert json.loads(scheduled.stdout.splitlines()[-1])["schedule"]["scheduled"] is True
    status = json.loads(telo("status", run, "--journal", str(journal), "--json", env=env).stdout)
    assert status["status"] == "scheduled" and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", status["dueAt"])

    worker = telo("worker", str(SCHEDULED), "--interval", "200ms", "--until-idle", env=env)
    assert worker.returncode == 0, worker.stdout + worker.stderr

    result = telo("result", run, "--journal", str(journal), "--json", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "completed"
    assert outcome["result"]["steps"]["checks"]["result"] == {
        "big": True, "u": True, "raw": True, "at": True, "span": True, "byInt": True,
    }
