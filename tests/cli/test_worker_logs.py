"""`telo worker` says what it does (issue 15): a line per run it continues, parks or settles, at its default
`--log-level info`; `--log-json` gives one JSON object a line; `--log-level warning` keeps it quiet. Before, a
worker printed nothing while it worked. Driven through the real command."""

from __future__ import annotations

import json
from pathlib import Path

from tests.process import telo

MANIFEST = """\
kind: Telo.Application
metadata: { name: WorkerLogs, version: 1.0.0 }
imports: { Local: durable-local, Durable: durable, Journal: durable-journal-sqlite, Py: python }
targets:
  - { name: start, invoke: !ref flow, inputs: { id: !cel "inputs.id" } }
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
kind: Durable.Sleep
metadata: { name: nap }
for: 30m
---
kind: Local.Workflow
metadata: { name: flow }
journal: !ref runs
runId: !cel "'flow:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - { name: first, invoke: !ref work }
  - { name: gate, invoke: !ref gate, inputs: { id: !cel "inputs.id" } }
  - { name: nap, when: !cel "inputs.id == 'sleepy'", invoke: !ref nap }
  - { name: last, invoke: !ref work }
"""


def parked_runs(tmp_path: Path, *ids: str) -> Path:
    (tmp_path / "steps.py").write_text("def work(inputs):\n    return 'done'\n")
    manifest = tmp_path / "flow.yaml"
    manifest.write_text(MANIFEST)
    for run_id in ids:  # each parks at the gate; a delivery makes it due for the worker
        assert telo("run", str(manifest), "--input", f"id={run_id}", cwd=tmp_path).returncode == 4
        delivered = telo("deliver", f"gate:{run_id}", "--manifest", str(manifest), "--payload", "{}", cwd=tmp_path)
        assert delivered.returncode == 0, delivered.stderr
    return manifest


def test_a_worker_logs_a_line_per_run_it_continues_parks_or_settles(tmp_path: Path) -> None:
    manifest = parked_runs(tmp_path, "a", "sleepy")
    out = telo("worker", str(manifest), "--until-idle", "--interval", "100ms", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert "telo: durable.run.continuing durable.run='flow:a' durable.workflow='flow'" in out.stderr, out.stderr
    assert any(line.startswith("telo: durable.resumer.resumed durable.run='flow:a' durable.status='completed'")
               for line in lines), out.stderr
    parked = [line for line in lines if line.startswith("telo: durable.park durable.run='flow:sleepy'")]
    assert parked and "durable.path='steps/nap'" in parked[0], out.stderr
    assert "durable.due_at='20" in parked[0] and "Z'" in parked[0]  # an RFC 3339 time, not epoch ms
    assert "durable.token" not in parked[0]  # no attribute printed as None


def test_log_json_is_one_object_a_line_and_warning_is_quiet(tmp_path: Path) -> None:
    manifest = parked_runs(tmp_path, "b")
    out = telo("worker", str(manifest), "--until-idle", "--interval", "100ms", "--log-json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stderr.splitlines()]
    settled = [r for r in records if r["event"] == "durable.resumer.resumed" and r["durable.run"] == "flow:b"]
    assert settled and settled[0]["durable.status"] == "completed" and settled[0]["level"] == "info", records
    assert settled[0]["time"].endswith("Z") and settled[0]["logger"] == "telo.durable"
    parked_runs(tmp_path, "c")  # work for the quiet worker too
    quiet = telo("worker", str(manifest), "--until-idle", "--interval", "100ms", "--log-level", "warning",
                 cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    status = telo("status", "flow:c", "--manifest", str(manifest), "--json", cwd=tmp_path)
    assert json.loads(status.stdout)["status"] == "completed"  # it did the work, silently
