"""A workflow in a ``Local.Queue`` started from the command line (issue 16), through the real ``telo`` command.

``telo run`` admits a queued run ``scheduled`` and waits for a slot the way it waits out a timed park: with a
slot free it runs the run and prints its outcome as before; with the queue full it waits — ``telo status``
says why (the queue, the key, what holds the slots) — and runs it once the slot frees. A queue on the file
journal, or on another journal than its workflow's, is refused at load with a clear error. Before this change
``Local.Queue`` was an unknown kind: every one of these manifests was refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from telo.journal.claims import Holder
from telo.journal.model import Admission
from telo.journal.sqlite import SqliteStore
from tests.process import telo

MANIFEST = """\
kind: Telo.Application
metadata: {{ name: Queued, version: 1.0.0 }}
imports: {{ Local: durable-local, Journal: {journal_module}, Other: durable-journal-sqlite, Py: python }}
targets:
  - name: start
    invoke: !ref flow
    inputs: {{ id: !cel "inputs.id", tenant: !cel "inputs.tenant" }}
---
kind: Journal.Journal
metadata: {{ name: runs }}
{location}
{other}---
kind: Local.Queue
metadata: {{ name: q }}
journal: !ref {queue_journal}
concurrency: 1
concurrencyKey: {{ key: !cel "inputs.tenant", limit: 1 }}
---
kind: Py.Function
metadata: {{ name: work }}
function: steps:work
---
kind: Local.Workflow
metadata: {{ name: flow }}
journal: !ref runs
queue: !ref q
runId: !cel "'flow:' + inputs.id"
inputs: {{ id: !cel "inputs.id", tenant: !cel "inputs.tenant" }}
steps:
  - {{ name: work, invoke: !ref work, inputs: {{ id: !cel "inputs.id" }} }}
"""

STEPS = """\
def work(inputs):
    return {"worked": inputs["id"]}
"""


def app(tmp_path: Path, journal: str = "sqlite", queue_journal: str = "runs") -> Path:
    module, location = {"sqlite": ("durable-journal-sqlite", "path: ./runs.db"),
                        "file": ("durable-journal-file", "directory: ./runs")}[journal]
    (tmp_path / "steps.py").write_text(STEPS)
    manifest = tmp_path / "flow.yaml"
    other = "---\nkind: Other.Journal\nmetadata: { name: elsewhere }\npath: ./elsewhere.db\n" \
        if queue_journal == "elsewhere" else ""
    manifest.write_text(MANIFEST.format(journal_module=module, location=location, queue_journal=queue_journal,
                                        other=other))
    return manifest


def test_a_queued_start_with_a_free_slot_runs_and_prints_its_outcome(tmp_path: Path) -> None:
    manifest = app(tmp_path)
    out = telo("run", str(manifest), "--input", "id=a", "--input", "tenant=acme", "--progress", "off", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "run 'flow:a': completed; result: " in out.stdout and '"worked": "a"' in out.stdout, out.stdout
    with SqliteStore(str(tmp_path / "runs.db")) as store:
        record = store.read_run("flow:a")
    assert record is not None and record.status == "completed"
    assert (record.queue, record.queue_key) == ("q", "acme")  # admitted to the queue, its key recorded
    again = telo("run", str(manifest), "--input", "id=b", "--input", "tenant=acme", "--progress", "off", "--json",
                 cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["start"]["status"] == "completed", again.stdout


def test_a_queued_start_waits_for_its_slot_and_status_says_why(tmp_path: Path) -> None:
    manifest = app(tmp_path)
    other = Holder("worker", "another-host", 7, 7).to_text()  # a live holder elsewhere: it holds the one slot
    with SqliteStore(str(tmp_path / "runs.db")) as store:
        store.admit(Admission.of("flow:busy", status="scheduled", due_at=0, inputs={"id": "busy", "tenant": "acme"},
                                 workflow="flow", queue="q", queue_key="acme"))
        assert store.claim("flow:busy", other, 600_000, int(time.time() * 1000)) is not None
        store.update_run("flow:busy", status="running", due_at=None)
    waiting = subprocess.Popen([sys.executable, "-m", "telo", "run", str(manifest), "--input", "id=w", "--input",
                                "tenant=acme", "--progress", "off"], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        status: dict[str, object] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            shown = telo("status", "flow:w", "--manifest", str(manifest), "--json", cwd=tmp_path)
            if shown.returncode == 0:
                status = json.loads(shown.stdout)
                break
            time.sleep(0.1)
        assert status.get("status") == "scheduled", status
        assert status["queue"] == {"name": "q", "key": "acme", "running": 1, "runningWithKey": 1, "parked": 0}
        human = telo("status", "flow:w", "--manifest", str(manifest), cwd=tmp_path)
        assert "queue: q (key acme); waiting for a slot: 1 running (1 with its key), 0 parked" in human.stdout, \
            human.stdout
        shown = telo("runs", "show", "flow:w", "--manifest", str(manifest), "--json", cwd=tmp_path)
        assert json.loads(shown.stdout)["queue"] == status["queue"], shown.stdout + shown.stderr
        assert waiting.poll() is None  # still waiting for the slot
        with SqliteStore(str(tmp_path / "runs.db")) as store:
            store.release("flow:busy", other)
            store.update_run("flow:busy", status="cancelled")  # the slot frees
        stdout, stderr = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert waiting.returncode == 0, stdout + stderr
    assert "run 'flow:w': completed" in stdout, stdout


def test_a_queue_on_the_file_journal_is_refused(tmp_path: Path) -> None:
    out = telo("run", str(app(tmp_path, journal="file")), "--input", "id=a", "--input", "tenant=acme",
               "--progress", "off", cwd=tmp_path)
    assert out.returncode != 0
    assert "ERR_JOURNAL_CONFIG_INVALID" in out.stderr and "file journal" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert not list((tmp_path / "runs").glob("*.ndjson"))  # nothing admitted


def test_a_queue_on_another_journal_than_its_workflows_is_refused(tmp_path: Path) -> None:
    out = telo("run", str(app(tmp_path, queue_journal="elsewhere")), "--input", "id=a", "--input", "tenant=acme",
               "--progress", "off", cwd=tmp_path)
    assert out.returncode != 0
    assert "ERR_MANIFEST_VALIDATION_FAILED" in out.stderr and "'elsewhere'" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
