"""Parallel branches of one run receiving on their own topics (issue 18 review, bug 2). Both park in one execution
and the run record holds one park: a send to the topic of the branch whose park was overwritten used to find no
run parked on its token and wake nothing (for good, without a timeout), a resume was refused, and the earlier
branch's receive deadline was lost. Sends now wake the run by the receives' ``@waiting`` records, and the parks of
one execution merge (telo.durable.parks: the earliest due time)."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

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


@telo.kind("FanTest.Slow")
async def slow(inputs: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(0.6)
    return {}


MANIFEST_SLOW = MANIFEST.replace(
    "imports: { Local: durable-local,", "imports: { T: FanTest, Local: durable-local,").replace(
    '  - { name: r, invoke: !ref anyTopic, inputs: { topic: !cel "item" } }\n', """\
  - name: pick
    if: !cel "item == 'x'"
    then:
      - { name: r, invoke: !ref anyTopic, inputs: { topic: x } }
    else:
      - { name: s, invoke: !ref slowly }
      - { name: r, invoke: !ref anyTopic, inputs: { topic: y } }
---
kind: T.Slow
metadata: { name: slowly }
""")


def test_a_wake_is_not_undone_by_a_sibling_branch_parking_after_it(tmp_path: Path) -> None:
    """Branch x parks; a send to x wakes the run (woke: true) while branch y still runs; y then parked and wrote
    `parked` back over the wake: x's message sat untaken with nothing to wake the run (a review's finding). The
    execution, once unwound, looks for a waiting receive's message and unparks the run."""
    (tmp_path / "app.yaml").write_text(MANIFEST_SLOW)
    with telo.load(tmp_path / "app.yaml") as app:
        app.start("fan", {"id": "4"})
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and app.status("fan:4").status != "parked":  # x parked, y sleeps
            time.sleep(0.01)
        sent = app.send("fan:4", "x", "hello", key="k", continue_run=False)
        time.sleep(1.0)  # y parks on its receive, the execution unwinds
        after = app.status("fan:4")
        took = [e.path for e in app.journal("fan:4") if e.path.endswith("/@received")]
    assert sent.woke
    assert after.status == "running" or took, (after, took)  # due again (for a worker), or already received


HELD_V1 = """\
kind: Telo.Application
metadata: { name: Held }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Durable: durable }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Durable.Receive
metadata: { name: cmd }
---
kind: Local.Workflow
metadata: { name: w }
journal: !ref runs
runId: !cel "'w:' + inputs.id"
steps:
  - { name: r, invoke: !ref cmd, inputs: { topic: x } }
"""


def test_a_run_held_for_a_manifest_change_is_not_woken_by_each_send(tmp_path: Path) -> None:
    """Waking by `@waiting` woke a run an operator must release (held at @held[n] after its manifest changed):
    every send re-executed it and recorded another hold (a review's finding)."""
    (tmp_path / "v1.yaml").write_text(HELD_V1)
    (tmp_path / "v2.yaml").write_text(HELD_V1 + "  - { name: r2, invoke: !ref cmd, inputs: { topic: y } }\n")
    with telo.load(tmp_path / "v1.yaml") as app:
        assert app.run("w", {"id": "1"}).status == "parked"
    with telo.load(tmp_path / "v2.yaml") as app:
        app.send("w:1", "x", 0, key="first")  # wakes it: the manifest changed under it, so it is held
        app.serve(until_idle=True)
        held = app.status("w:1")
        woke = []
        for i in range(3):
            woke.append(app.send("w:1", "x", i, key=f"k{i}").woke)
            app.serve(until_idle=True)
        holds = [e.path for e in app.journal("w:1") if e.path.startswith("@held")]
    assert held.parked is not None and "MANIFEST_CHANGED" in (held.parked.reason or ""), held
    assert woke == [False, False, False] and len(holds) == 1, (woke, holds)
