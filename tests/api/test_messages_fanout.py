"""Parallel branches of one run receiving on their own topics (issue 18 review, bug 2). Both park in one execution
and the run record holds one park: a send to the topic of the branch whose park was overwritten used to find no
run parked on its token and wake nothing (for good, without a timeout), a resume was refused, and the earlier
branch's receive deadline was lost. Sends now wake the run by the receives' ``@waiting`` records, and the parks of
one execution merge (telo.durable.parks: the earliest due time)."""
from __future__ import annotations

from pathlib import Path

import telo
from telo.clock import FakeClock
from telo.durable import messages
from telo.journal.compat import writer_for
from telo.journal.model import Entry

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
    (tmp_path / "app.yaml").write_text(MANIFEST)
    with telo.load(tmp_path / "app.yaml") as app:
        first = app.run("fan", {"id": "1"})
        assert first.status == "parked", first
        token = first.parked.token if first.parked else None
        assert token in ("inbox:fan:1:x", "inbox:fan:1:y"), token  # the park recorded last (either, by timing)
        missed, other = ("x", "y") if token.endswith(":y") else ("y", "x")  # a send to `missed` used to wake nothing
        sent = app.send("fan:1", missed, "hello", key="k")
        status = app.wait("fan:1", 5)
        took = [e.path for e in app.journal("fan:1") if e.path.endswith("/@received")]
        assert sent.woke and len(took) == 1, (sent, status, took)
        assert status.status == "parked"  # the other still waits
        app.send("fan:1", other, "there", key="k")
        done = app.result("fan:1", wait=5)
        received = sorted(e.value["payload"] for e in app.journal("fan:1") if e.path.endswith("/@received"))
    assert done.ok, done
    assert received == ["hello", "there"]


def test_a_message_whose_wake_was_lost_is_taken_on_resume(tmp_path: Path) -> None:
    """A sender that stored its message and died before its wake: `telo resume` continues the run for the
    receive of ANY branch the message is for, not only the one whose token the park record holds."""
    (tmp_path / "app.yaml").write_text(MANIFEST)
    with telo.load(tmp_path / "app.yaml") as app:
        first = app.run("fan", {"id": "2"})
        token = first.parked.token if first.parked else ""
        missed = "x" if token.endswith(":y") else "y"  # the branch whose park the record does not hold
        store = app.aio._store()
        text, v = writer_for(store).stored({"payload": "hello", "nonce": "n"})
        store.append_in_order("fan:2", Entry(messages.inbox_path(missed, "k"), "decision", text, v,
                                             messages.MESSAGE_DECISION, None))  # (and no wake)
        assert app.status("fan:2").status == "parked"
        resumed = app.resume("fan:2")
        status = app.wait("fan:2", 5)
        took = [e.value for e in app.journal("fan:2") if e.path.endswith("/@received")]
        refused = app.resume("fan:2")  # y waits, and nothing is there for it
    assert resumed and status.status == "parked"
    assert [t["key"] for t in took] == ["k"]
    assert not refused


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
