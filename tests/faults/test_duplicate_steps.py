"""Duplicate step names are a load error for ``telo run`` too, not a warning of ``telo check`` only (issue 12,
case 8: with two ``pay`` steps the second never executed — it replayed the first's receipt)."""

from __future__ import annotations

from pathlib import Path

from tests.process import telo

MANIFEST = """\
kind: Telo.Application
metadata: { name: Twice, version: 1.0.0 }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Py: python }
targets:
  - { name: start, invoke: !ref pay, inputs: {} }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Py.Function
metadata: { name: charge }
function: payments:charge
---
kind: Local.Workflow
metadata: { name: pay }
journal: !ref runs
steps:
  - { name: pay, invoke: !ref charge, inputs: { id: first } }
  - { name: pay, invoke: !ref charge, inputs: { id: second } }
"""


def test_telo_run_refuses_a_manifest_with_two_steps_of_one_name(tmp_path: Path) -> None:
    manifest = tmp_path / "twice.yaml"
    manifest.write_text(MANIFEST)
    ran = telo("run", str(manifest), cwd=tmp_path)
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert f"{manifest}:20:" in ran.stderr and "ERR_DUPLICATE_STEP_NAME" in ran.stderr, ran.stderr
    assert "nothing was run" in ran.stderr and not (tmp_path / "runs.db").exists()
    checked = telo("check", str(manifest), cwd=tmp_path)
    assert checked.returncode == 1 and "ERR_DUPLICATE_STEP_NAME" in checked.stdout, checked.stdout
