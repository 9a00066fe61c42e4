"""A Durable.Receive with no `topic:` takes `inputs.topic`; given inputs that are not a map (a step's
`inputs: cmds`), it fails with a Python AttributeError (ERR_EXECUTION_FAILED "AttributeError: 'str' object has
no attribute 'get'")
instead of a telo error naming the field."""
from __future__ import annotations

from pathlib import Path

import telo

MANIFEST = """\
kind: Telo.Application
metadata: { name: Rin }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Durable: durable }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Durable.Receive
metadata: { name: anyTopic }
---
kind: Local.Workflow
metadata: { name: w }
journal: !ref runs
runId: !cel "'w:' + inputs.id"
steps:
  - { name: r, invoke: !ref anyTopic, inputs: "cmds" }
"""


def test_non_map_inputs_give_a_telo_error(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(MANIFEST)
    with telo.load(tmp_path / "app.yaml") as app:
        out = app.run("w", {"id": "1"})
    assert out.error is not None
    assert "AttributeError" not in out.error.message, (out.error.code, out.error.message)
