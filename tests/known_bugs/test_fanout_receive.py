"""Two parallel branches of one run each receive on their own topic. Both park; the run's record holds ONE park
token (the last written), so a send to the other branch's topic finds no run parked on its token and wakes
nothing: the run stays parked although a receive it waits at has a message (no timeout: for good)."""
from __future__ import annotations

from pathlib import Path

import telo
from telo.clock import FakeClock

MANIFEST = """\
kind: Telo.Application
metadata: { name: Fan }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Durable: durable, Run: run }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Durable.Receive
metadata: { name: anyTopic }
---
kind: Run.Iteration
metadata: { name: both }
collection: ["x", "y"]
concurrency: 2
steps:
  - { name: r, invoke: !ref anyTopic, inputs: { topic: !cel "item" } }
---
kind: Local.Workflow
metadata: { name: fan }
journal: !ref runs
runId: !cel "'fan:' + inputs.id"
steps:
  - { name: f, invoke: !ref both }
"""


def test_a_send_to_either_parked_branch_wakes_the_run(tmp_path: Path) -> None:
    topic = "x"  # (the branch that parked first: a send to the last one, y, does wake the run)
    (tmp_path / "app.yaml").write_text(MANIFEST)
    with telo.load(tmp_path / "app.yaml") as app:
        first = app.run("fan", {"id": "1"})
        assert first.status == "parked", first
        token = first.parked.token if first.parked else None
        sent = app.send("fan:1", topic, "hello", key="k")
        status = app.wait("fan:1", 5)
        journal = {e.path: e.value for e in app.journal("fan:1")}
    took = [p for p in journal if p.endswith("/@received")]
    assert sent.woke and took, (f"parked on {token!r}; send to {topic!r}: woke={sent.woke}; "
                                f"status {status.status}; received: {took}")


def test_the_stuck_run_cannot_even_be_resumed(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(MANIFEST)
    with telo.load(tmp_path / "app.yaml") as app:
        app.run("fan", {"id": "2"})
        app.send("fan:2", "x", "hello", key="k")
        resumed = app.resume("fan:2")
    assert resumed, "resume refused: the run looks parked on 'y' with nothing waiting, though 'x' has a message"


MANIFEST_T = MANIFEST.replace('inputs: { topic: !cel "item" }',
                              'inputs: { topic: !cel "item", timeout: !cel "item == \'x\' ? \'1h\' : \'100d\'" }')


def test_a_branch_receives_deadline_survives_a_sibling_park(tmp_path: Path) -> None:
    """Branch x receives with a 1 h timeout, branch y with 100 d: the run's park holds y's due time, so
    branch x's deadline is missed by 100 days (with no timeout on y: never)."""
    (tmp_path / "app.yaml").write_text(MANIFEST_T)
    clock = FakeClock()
    with telo.load(tmp_path / "app.yaml", clock=clock) as app:
        first = app.run("fan", {"id": "3"})
    assert first.status == "parked"
    assert first.due_at is not None and first.due_at <= clock.now_ms() + 3_600_000, (
        f"parked on {first.parked.token if first.parked else None!r}, due in "
        f"{(first.due_at - clock.now_ms()) / 3_600_000 if first.due_at else None} h")
