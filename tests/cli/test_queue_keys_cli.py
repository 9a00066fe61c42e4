"""What `telo run` says of a start a ``Local.Queue``'s key decided (issue 16 step 4, telo.kinds.queue_keys): a
start ``singleton`` (mode ``skip``) admitted nothing prints a line naming the live run and exits 0 — skipping is
what the manifest asked for; ``--json`` answers ``skipped``; a start ``onDuplicate: reject`` refused fails with
ERR_DURABLE_RUN_EXISTS and its hint; one ``dedupKey`` attached reports the live run. Driven through the real
command; before this change the queue's fields were unknown and the manifest did not load."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.process import telo
from tests.queue_manifests import SQLITE, header

FLOW = """\
---
kind: Durable.Await
metadata: { name: gate }
token: !cel "'gate:' + inputs.order"
---
kind: Local.Workflow
metadata: { name: flow }
journal: !ref runs
queue: !ref orders
inputs: { order: !cel "inputs.order" }
steps:
  - { name: gate, invoke: !ref gate, inputs: { order: !cel "inputs.order" } }
"""


def run(tmp_path: Path, rule: str, *more: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "flow.yaml").write_text(header("KeyedCli", SQLITE, "path: ./runs.db", imports={"Durable": "durable"},
                                               start="flow", start_inputs=["order"], queues={"orders": rule}) + FLOW)
    return telo("run", str(tmp_path / "flow.yaml"), "--input", "order=A-1", "--progress", "off", *more, cwd=tmp_path)


def live_run(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 4 and "parked, waiting for a delivery to 'gate:A-1'" in out.stdout, out.stdout + out.stderr
    return out.stdout.split("run '")[1].split("'")[0]


def test_a_skipped_start_names_the_live_run_and_exits_0(tmp_path: Path) -> None:
    rule = 'singleton: { key: !cel "inputs.order", mode: skip }'
    parked = live_run(run(tmp_path, rule))  # live: parked, waiting for a delivery
    skipped = run(tmp_path, rule)
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert f"run '{parked}': live already, holding its queue's singleton key; this start was skipped" in skipped.stdout
    assert f"telo result {parked}" in skipped.stdout, skipped.stdout
    answer = json.loads(run(tmp_path, rule, "--json").stdout)["start"]
    assert answer == {"runId": parked, "skipped": True, "status": "skipped"}, answer


def test_a_rejected_duplicate_fails_with_its_code_and_hint(tmp_path: Path) -> None:
    rule = 'dedupKey: !cel "inputs.order"\nonDuplicate: reject'
    parked = live_run(run(tmp_path, rule))
    refused = run(tmp_path, rule)
    assert refused.returncode != 0, refused.stdout + refused.stderr
    said = refused.stdout + refused.stderr
    assert "ERR_DURABLE_RUN_EXISTS" in said and f"run '{parked}' (parked) holds the dedup key 'A-1'" in said, said
    assert "onDuplicate: attach" in said


def test_an_attached_duplicate_reports_the_live_run(tmp_path: Path) -> None:
    rule = 'dedupKey: !cel "inputs.order"'
    parked = live_run(run(tmp_path, rule))
    attached = run(tmp_path, rule)
    assert live_run(attached) == parked  # the same run, still waiting for its delivery


def test_a_restore_while_a_newer_run_holds_the_key_is_refused_naming_it(tmp_path: Path) -> None:
    """``telo restore`` of a cancelled run whose dedup key a newer live run of the queue holds now: exit 3,
    ERR_DURABLE_RUN_EXISTS naming that run, the queue and the key, with a hint — nothing restored. (Before:
    ``sqlite3.IntegrityError: UNIQUE constraint failed``, after a ``@restore`` entry was written.)"""
    rule = 'dedupKey: !cel "inputs.order"'
    first = live_run(run(tmp_path, rule))
    cancelled = telo("cancel", first, "--journal", "runs.db", cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    second = live_run(run(tmp_path, rule))  # the key was free again: a new run holds it
    assert second != first
    refused = telo("restore", first, "0", "--journal", "runs.db", cwd=tmp_path)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "error: ERR_DURABLE_RUN_EXISTS" in refused.stderr, refused.stderr
    assert (f"run '{first}' (cancelled) cannot be restored: run '{second}' (parked) holds its dedup key 'A-1' of "
            "queue 'orders'") in refused.stderr, refused.stderr
    assert f"hint: wait for run '{second}' to settle" in refused.stderr and f"telo cancel {second}" in refused.stderr
    assert "Traceback" not in refused.stdout + refused.stderr
    shown = json.loads(telo("status", first, "--journal", "runs.db", "--json", cwd=tmp_path).stdout)
    assert shown["status"] == "cancelled", shown
