"""Steps whose inputs are not a map (issue 18 review, bug 5): a Durable.Receive with no `topic:` reads
`inputs.topic`, a DurableLocal.Event `inputs.name`, a DurableLocal.Send/Event `inputs.run`; given `inputs: cmds` they
failed with a Python AttributeError ("'str' object has no attribute 'get'") instead of a telo error naming the
resource."""
from __future__ import annotations

from pathlib import Path

import telo

MANIFEST = """\
kind: Telo.Application
metadata: { name: Rin }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Durable: durable, DurableLocal: durable-local }
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
---
kind: DurableLocal.Event
metadata: { name: peek }
journal: !ref runs
---
kind: Local.Workflow
metadata: { name: e }
journal: !ref runs
runId: !cel "'e:' + inputs.id"
steps:
  - { name: r, invoke: !ref peek, inputs: "cmds" }
"""


def test_non_map_inputs_give_a_telo_error_naming_the_resource(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(MANIFEST)
    with telo.load(tmp_path / "app.yaml") as app:
        receive = app.run("w", {"id": "1"})
        event = app.run("e", {"id": "1"})
    assert receive.error is not None and event.error is not None
    assert receive.error.code == "ERR_INVALID_VALUE", receive.error
    assert "Durable.Receive 'anyTopic'" in receive.error.message and "must be a map" in receive.error.message
    assert "AttributeError" not in event.error.message, event.error
    assert event.error.code == "ERR_DURABLE_RUN_ID_INVALID", event.error
