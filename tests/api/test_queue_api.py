"""A workflow in a ``Local.Queue`` from Python (issue 16): ``App.start`` admits the run ``scheduled`` and
answers so; the process waits for a slot and executes the run itself; ``App.run`` returns its outcome as for
any run. Before this change ``Local.Queue`` was an unknown kind and the manifest did not load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import telo


@telo.kind("QueueShop.Work", idempotent=True)
def work(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"did": inputs.get("order")}


MANIFEST = """\
kind: Telo.Application
metadata: { name: QueueApi, version: 1.0.0 }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Shop: QueueShop }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./.telo/runs.db
---
kind: Local.Queue
metadata: { name: orders }
journal: !ref runs
concurrency: 1
workerConcurrency: 1
concurrencyKey: { key: !cel "inputs.shop", limit: 1 }
---
kind: Shop.Work
metadata: { name: doWork }
---
kind: Local.Workflow
metadata: { name: order }
journal: !ref runs
queue: !ref orders
runId: !cel "'order:' + inputs.order"
inputs: { order: !cel "inputs.order" }
steps:
  - { name: work, invoke: !ref doWork, inputs: { order: !cel "inputs.order" } }
"""


def test_a_queued_start_is_scheduled_then_runs_here_to_its_outcome(tmp_path: Path) -> None:
    with telo.load(MANIFEST, journal=str(tmp_path / "j.db")) as app:
        refs = [app.start("order", {"order": f"A-{i}", "shop": "north"}) for i in range(3)]
        assert [r.status for r in refs] == ["scheduled"] * 3 and all(r.started for r in refs)
        results = [app.wait(r) for r in refs]  # one at a time (concurrency 1), all in this process
        assert [r.status for r in results] == ["completed"] * 3
        assert [r.step("work")["did"] for r in results] == ["A-0", "A-1", "A-2"]
        assert app.run("order", {"order": "A-0", "shop": "north"}).ok  # attaching to a settled one
    with telo.load(MANIFEST, journal=str(tmp_path / "j.db")) as app:
        shown = app.status("order:A-1")
    assert shown.status == "completed"
