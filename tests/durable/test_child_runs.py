"""A run started by a step of a durable run gets an id derived from that step, so a redriven start attaches to
the run it started instead of starting a second one (docs/guarantees.md)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.greeting_manifest import APPROVAL, manifest
from tests.process import telo

MANIFEST = manifest("Children", """\
kind: Local.Workflow
metadata: { name: child }
journal: !ref runs
steps:
  - { name: hi, invoke: !ref greet, inputs: { who: child } }
""", APPROVAL, """\
kind: Local.Workflow
metadata: { name: parent }
journal: !ref runs
runId: !cel "'parent:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - { name: spawn, invoke: !ref child, inputs: {} }
  - { name: wait, invoke: !ref approval, inputs: { id: !cel "inputs.id" } }
""", start="parent")


def child_runs(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [r for (r,) in conn.execute("SELECT run FROM telo_durable_runs WHERE workflow = 'child'")]
    finally:
        conn.close()


def test_a_redriven_child_start_attaches_to_the_child_it_started(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(MANIFEST)
    first = telo("run", "app.yaml", "--input", "id=a", cwd=tmp_path)
    assert first.returncode == 4, first.stdout + first.stderr  # parked on the await: not settled
    db = tmp_path / "journal.db"
    assert child_runs(db) == ["child:parent:a/steps/spawn"]
    # The crash window: the child was started, the parent's entry for the starting step never became durable.
    conn = sqlite3.connect(db)
    with conn:
        assert conn.execute("DELETE FROM telo_durable_entries WHERE run = 'parent:a' AND path = 'steps/spawn'"
                            ).rowcount == 1
    conn.close()
    delivered = telo("deliver", "go:a", "--journal", str(db), "--payload", "{}", cwd=tmp_path)
    assert delivered.returncode == 0, delivered.stdout + delivered.stderr
    again = telo("run", "app.yaml", "--input", "id=a", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert child_runs(db) == ["child:parent:a/steps/spawn"]  # one child, not two
    result = telo("result", "parent:a", "--journal", str(db), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    spawn = json.loads(result.stdout)["result"]["steps"]["spawn"]["result"]
    assert spawn["runId"] == "child:parent:a/steps/spawn" and spawn["attached"] is True
