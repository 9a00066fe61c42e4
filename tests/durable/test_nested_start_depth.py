"""Workflows that start each other stop at the nested-start limit (issue 15: 13,184 runs in 30 s before it): the
start past MAX_NESTED_RUNS fails like any step, so the deepest run settles `failed` naming the chain, and the
number of runs is bounded. A recursion that ends below the limit is not touched."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from telo.errors import Code
from telo.kinds.workflow import MAX_NESTED_RUNS
from tests.process import telo

FIXTURES = Path(__file__).resolve().parents[1] / "manifests" / "__fixtures__" / "cycles"
FIXTURE = FIXTURES / "workflows_start_each_other.yaml"


def runs(db: Path) -> list[tuple[str, str, str | None]]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.execute("SELECT workflow, status, error FROM telo_durable_runs ORDER BY created_at, run"))
    finally:
        conn.close()


def test_workflows_starting_each_other_stop_at_the_limit_with_a_clear_error(tmp_path: Path) -> None:
    shutil.copy(FIXTURE, tmp_path / "app.yaml")
    assert telo("check", "app.yaml", cwd=tmp_path).returncode == 0  # a chain of runs, not a call that never returns
    done = telo("run", "app.yaml", cwd=tmp_path, timeout=30)
    found = runs(tmp_path / "journal.db")
    assert len(found) == MAX_NESTED_RUNS == 64, done.stdout + done.stderr
    assert [status for _, status, _ in found].count("completed") == MAX_NESTED_RUNS - 1
    [(workflow, _, error)] = [r for r in found if r[1] == "failed"]
    assert workflow == "pong"  # the 64th run, whose step would have started the 65th (a ping)
    recorded = json.loads(error or "{}")
    assert recorded["code"] == Code.DURABLE_NESTING_TOO_DEEP.value
    assert "would start a run 65 runs deep, past the limit of 64" in recorded["message"]
    assert "ping → pong → ping → … → pong → ping → pong → ping" in recorded["message"]
    assert Code.DURABLE_NESTING_TOO_DEEP.value in done.stderr  # `telo run` reports the failed run


def test_a_recursion_that_ends_below_the_limit_runs_to_completion(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text("""\
kind: Telo.Application
metadata: { name: Countdown }
imports: { Local: durable-local, Journal: durable-journal-sqlite }
targets:
  - { name: go, invoke: !ref ping, inputs: { n: 10 } }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./journal.db
---
kind: Local.Workflow
metadata: { name: ping }
journal: !ref runs
inputs: { n: !cel "inputs.n" }
steps:
  - { name: serve, when: !cel "inputs.n > 0", invoke: !ref pong, inputs: { n: !cel "inputs.n - 1" } }
---
kind: Local.Workflow
metadata: { name: pong }
journal: !ref runs
inputs: { n: !cel "inputs.n" }
steps:
  - { name: answer, when: !cel "inputs.n > 0", invoke: !ref ping, inputs: { n: !cel "inputs.n - 1" } }
""")
    done = telo("run", "app.yaml", cwd=tmp_path, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    found = runs(tmp_path / "journal.db")
    assert [status for _, status, _ in found] == ["completed"] * 11, found
