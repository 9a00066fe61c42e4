"""Messages into a run, events out of it (issue 18; telo.durable.messages), through the Python API on every
journal kind: order, exactly once, idempotent keys, time-outs, typed payloads, the lost wake-up, events while
the run waits and after it settles, and a workflow's own sends."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import telo
from telo.clock import FakeClock
from telo.durable import messages
from telo.durable.handle import LocalRunHandle
from telo.errors import TeloError
from telo.journal.model import Entry
from tests.pg_support import fresh_prefix, pg_url

RELEASE = threading.Event()


@telo.kind("MsgTest.Hold", idempotent=True)
def hold(inputs: dict[str, Any]) -> dict[str, Any]:
    """Blocks its step (the run is executing) until the test releases it."""
    assert RELEASE.wait(30), "never released"
    return {}


MANIFEST = """\
kind: Telo.Application
metadata: { name: Msgs }
imports: { Local: durable-local, Journal: %(module)s, Durable: durable, T: MsgTest, Run: run }
---
kind: Journal.Journal
metadata: { name: runs }
%(location)s
---
kind: Durable.Receive
metadata: { name: nextCmd }
topic: cmds
---
kind: Durable.Receive
metadata: { name: typedCmd }
topic: typed
outputType:
  kind: Telo.JsonSchema
  schema: { type: object, properties: { n: { type: integer } }, required: [n] }
---
kind: Durable.Receive
metadata: { name: briefCmd }
topic: brief
timeout: 1h
---
kind: Durable.StreamWrite
metadata: { name: emit }
stream: rows
value: !cel "inputs.v"
---
kind: Durable.StreamWrite
metadata: { name: endRows }
stream: rows
close: true
---
kind: Local.Workflow
metadata: { name: writer }
journal: !ref runs
runId: !cel "'writer:' + inputs.id"
steps:
  - name: w0
    invoke: !ref emit
    inputs: { v: "zero" }
  - name: w1
    invoke: !ref emit
    inputs: { v: { n: 1 } }
  - name: wait
    invoke: !ref nextCmd
  - name: w2
    invoke: !ref emit
    inputs: { v: !cel "steps.wait.result.payload" }
  - name: end
    invoke: !ref endRows
  - name: after
    invoke: !ref emit
    inputs: { v: "too late" }
---
kind: Durable.Receive
metadata: { name: go }
topic: go
---
kind: Run.Iteration
metadata: { name: both }
collection: [1, 2, 3]
concurrency: 3
steps:
  - { name: r, invoke: !ref nextCmd }
  - { name: w, invoke: !ref emit, inputs: { v: !cel "steps.r.result.key" } }
---
kind: Local.Workflow
metadata: { name: parallel }
journal: !ref runs
runId: !cel "'parallel:' + inputs.id"
steps:
  - { name: wait, invoke: !ref go }
  - { name: fan, invoke: !ref both }
---
kind: T.Hold
metadata: { name: holdOn }
---
kind: Local.Workflow
metadata: { name: busy }
journal: !ref runs
runId: !cel "'busy:' + inputs.id"
steps:
  - { name: p, invoke: !ref progress, inputs: { v: "halfway" } }
  - { name: h, invoke: !ref holdOn }
  - { name: q, invoke: !ref progress, inputs: { v: "all done" } }
---
kind: Durable.Publish
metadata: { name: progress }
name: progress
value: !cel "inputs.v"
---
kind: Local.Workflow
metadata: { name: three }
journal: !ref runs
runId: !cel "'three:' + inputs.id"
steps:
  - name: a
    invoke: !ref nextCmd
  - name: p1
    invoke: !ref progress
    inputs: { v: !cel "steps.a.result.payload" }
  - name: b
    invoke: !ref nextCmd
  - name: c
    invoke: !ref nextCmd
  - name: p2
    invoke: !ref progress
    inputs: { v: "done" }
---
kind: Local.Workflow
metadata: { name: typed }
journal: !ref runs
runId: !cel "'typed:' + inputs.id"
steps:
  - name: t
    invoke: !ref typedCmd
---
kind: Local.Workflow
metadata: { name: brief }
journal: !ref runs
runId: !cel "'brief:' + inputs.id"
steps:
  - name: r
    invoke: !ref briefCmd
---
kind: Local.Send
metadata: { name: tell }
journal: !ref runs
run: !cel "inputs.to"
topic: cmds
payload: !cel "inputs.what"
---
kind: Local.Workflow
metadata: { name: sender }
journal: !ref runs
runId: !cel "'sender:' + inputs.id"
inputs: { to: !cel "inputs.to", what: !cel "inputs.what" }
steps:
  - name: s
    invoke: !ref tell
    inputs: { to: !cel "inputs.to", what: !cel "inputs.what" }
"""


@pytest.fixture(params=["memory", "sqlite", "file", "postgres"])
def load(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    kind = request.param

    def make(clock: FakeClock | None = None) -> telo.App:
        if kind == "postgres":
            location = f"url: {json.dumps(pg_url())}\ntable: {fresh_prefix()}"
            return telo.load(MANIFEST % {"module": "durable-journal-postgres", "location": location}, clock=clock)
        journal = {"memory": "memory:", "sqlite": str(tmp_path / "j.db"), "file": (tmp_path / "jdir").as_uri()}[kind]
        text = MANIFEST % {"module": "durable-journal-sqlite", "location": "path: ./.telo/runs.db"}
        return telo.load(text, journal=journal, clock=clock)

    yield make


def test_messages_are_received_once_each_in_order_and_a_repeated_key_delivers_once(load: Any) -> None:
    with load() as app:
        assert app.run("three", {"id": "1"}).status == "parked"
        first = app.send("three:1", "cmds", {"n": 1}, key="k1")
        assert not first.duplicate and first.woke
        again = app.send("three:1", "cmds", {"n": 99}, key="k1")  # same key: nothing is written
        assert again.duplicate and again.seq == first.seq and not again.woke
        assert app.wait("three:1", 10).status == "parked"  # took k1 at `a`, waits at `b`
        # Two sent while it waits: `b` gets the older, `c` the newer, each once.
        app.send("three:1", "cmds", "second", key="k2")
        app.send("three:1", "cmds", "third", key="k3")
        done = app.result("three:1", wait=10)
    assert done.ok
    got = [done.step(s) for s in ("a", "b", "c")]
    assert [(g["key"], g["payload"]) for g in got] == [("k1", {"n": 1}), ("k2", "second"), ("k3", "third")]
    assert got[0]["seq"] < got[1]["seq"] < got[2]["seq"] and not any(g["timedOut"] for g in got)


def test_messages_sent_before_the_receive_wait_for_it(load: Any) -> None:
    with load() as app:
        assert app.run("three", {"id": "2"}).status == "parked"
        for n in range(3):  # all three queued while it is parked at `a`: only the first wakes it
            app.send("three:2", "cmds", n, key=f"m{n}", continue_run=False)
        assert app.status("three:2").status == "running"  # due: a worker (here run_due) continues it
        assert app.run_due() == 1
        done = app.result("three:2", wait=10)
    assert done.ok and [done.step(s)["payload"] for s in ("a", "b", "c")] == [0, 1, 2]


def test_events_are_readable_while_the_run_waits_and_after_it_settles(load: Any) -> None:
    with load() as app:
        with pytest.raises(TeloError) as unknown:
            app.events("three:3")
        assert unknown.value.code == "ERR_DURABLE_RUN_NOT_FOUND"
        app.run("three", {"id": "3"})
        assert app.event("three:3", "progress") is None  # parked at `a`: nothing published yet
        app.send("three:3", "cmds", {"pct": 50})
        assert app.wait("three:3", 10).status == "parked"
        seen = app.event("three:3", "progress", wait=5)  # parked at `b`: p1 published
        assert seen is not None and seen.value == {"pct": 50} and seen.path == "steps/p1"
        app.send("three:3", "cmds", 1)
        app.send("three:3", "cmds", 2)
        assert app.result("three:3", wait=10).ok
        latest = app.event("three:3", "progress")
        history = app.events("three:3", "progress")
    assert latest is not None and latest.value == "done"  # the latest per name wins
    assert [e.value for e in history] == [{"pct": 50}, "done"] and history[0].seq < history[1].seq


def test_a_settled_or_unknown_run_refuses_a_message(load: Any) -> None:
    with load() as app:
        with pytest.raises(TeloError) as unknown:
            app.send("three:none", "cmds", 1)
        app.run("three", {"id": "4"})
        first_key = app.send("three:4", "cmds", 0).key
        for n in range(1, 3):
            app.send("three:4", "cmds", n)
        assert app.result("three:4", wait=10).ok
        with pytest.raises(TeloError) as settled:
            app.send("three:4", "cmds", 4)
        retried = app.send("three:4", "cmds", 0, key=first_key)  # a retry of a send that landed: no error
        with pytest.raises(TeloError) as no_topic:
            app.send("three:4", "", 4)
    assert unknown.value.code == "ERR_DURABLE_RUN_NOT_FOUND"
    assert settled.value.code == "ERR_DURABLE_RUN_SETTLED"
    assert retried.duplicate and not retried.woke
    assert no_topic.value.code == "ERR_DURABLE_MESSAGE_INVALID"


def test_a_delivery_cannot_answer_a_receive(load: Any) -> None:
    """A receive parks on ``inbox:<run>:<topic>``; a delivery to that token would write the payload as the
    receive step's result, bypassing the message record: refused with a hint to send instead."""
    with load() as app:
        parked = app.run("three", {"id": "7"})
        assert parked.parked is not None and parked.parked.token == "inbox:three:7:cmds"
        with pytest.raises(TeloError) as refused:
            app.deliver("inbox:three:7:cmds", {"n": 1})
        assert app.status("three:7").status == "parked"
    assert refused.value.code == "ERR_DURABLE_TOKEN_REQUIRED" and "telo send" in (refused.value.hint or "")


def test_a_receive_times_out_at_its_journaled_deadline(load: Any) -> None:
    clock = FakeClock()
    with load(clock) as app:
        parked = app.run("brief", {"id": "1"})
        assert parked.status == "parked" and parked.due_at == clock.now_ms() + 3_600_000
        clock.advance(seconds=3600)
        assert app.run_due() == 1
        done = app.result("brief:1")
    assert done.ok and done.step("r") == {"topic": "brief", "timedOut": True}


def test_a_payload_the_waiting_receive_would_refuse_is_refused_at_send(load: Any) -> None:
    """Stored, it would fail the receive's step and the run (a walk-through found `telo send` did not check it,
    where `telo deliver` checks an Await's payload): refused, nothing written, the run still waits."""
    with load() as app:
        app.run("typed", {"id": "1"})  # parks at `t`, whose outputType wants {n: integer}
        with pytest.raises(TeloError) as refused:
            app.send("typed:1", "typed", {"n": "not a number"}, key="bad")
        still = app.status("typed:1")
        app.send("typed:1", "typed", {"n": 7})
        fine = app.result("typed:1", wait=10)
        stored = [e.path for e in app.journal("typed:1") if e.path.startswith("@inbox")]
    assert refused.value.code == "ERR_DURABLE_PAYLOAD_INVALID" and "steps/t" in refused.value.message
    assert still.status == "parked"
    assert fine.ok and fine.step("t")["payload"] == {"n": 7}
    assert len(stored) == 1 and not any(p.endswith("/bad") for p in stored)


def test_a_message_sent_between_the_receives_look_and_its_park_is_not_lost(
        load: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lost wake-up (telo.durable.messages): the message lands after the receive found none and before its
    park is recorded, and its sender finds the run not parked (so it unparks nothing). The receive's second look,
    after the park, must make the run due again; without it the run would stay parked for good."""
    park = LocalRunHandle.park
    sneaked: list[str] = []

    async def park_after_a_message(self: LocalRunHandle, where: Any, until: Any) -> Any:
        if until.token and until.token.startswith("inbox:") and not sneaked:
            entry = Entry(messages.inbox_path("cmds", "sneaky"), "decision", '"late"', 1, "message", None)
            await self.store.append(self.run_id, entry)  # a sender's append, before the run is parked
            sneaked.append(self.run_id)
        return await park(self, where, until)

    monkeypatch.setattr(LocalRunHandle, "park", park_after_a_message)
    with load() as app:
        app.run("three", {"id": "5"})
        assert sneaked == ["three:5"]
        # Made due again by its own second look, the run went on in this process: it took the message at `a`
        # and now waits at `b` (without the second look it would still be parked at `a`).
        status = app.wait("three:5", 10)
        journal = {e.path: e.value for e in app.journal("three:5")}
    assert status.status == "parked" and status.parked is not None and status.parked.path == "steps/b"
    assert journal["steps/a/@received"]["key"] == "sneaky"


def test_a_retried_send_wakes_the_run_a_sender_that_died_left_parked(
        load: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sender dies after its message is durable and before it wakes the run (here: the wake raises). Its
    retry with the same key is a duplicate, and must still wake the run while the message is untaken; once the
    message is taken, a duplicate wakes nothing."""
    with load() as app:
        assert app.run("three", {"id": "8"}).status == "parked"
        real = messages.inbox_token

        def died(run: str, topic: str) -> str:
            raise RuntimeError("the sender died after storing its message")

        monkeypatch.setattr(messages, "inbox_token", died)
        with pytest.raises(Exception, match="sender died"):
            app.send("three:8", "cmds", "m1", key="k1")
        monkeypatch.setattr(messages, "inbox_token", real)
        assert app.status("three:8").status == "parked"  # the message is stored, the run still waits
        retry = app.send("three:8", "cmds", "m1", key="k1")
        assert retry.duplicate and retry.woke
        status = app.wait("three:8", 10)
        assert status.parked is not None and status.parked.path == "steps/b"  # took k1 at `a`
        again = app.send("three:8", "cmds", "m1", key="k1")
        journal = {e.path: e.value for e in app.journal("three:8")}
    assert again.duplicate and not again.woke  # taken: nothing to wake for
    assert journal["steps/a/@received"]["key"] == "k1"


def test_resume_moves_a_receive_only_when_a_message_waits(load: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``telo resume`` of a run parked on a receive: refused with a ``telo send`` hint while no message waits (it
    would park again); with a message whose sender's wake was lost, it resumes and the receive takes it."""
    with load() as app:
        assert app.run("three", {"id": "9"}).status == "parked"
        assert not app.resume("three:9")
        real = messages.inbox_token

        def died(run: str, topic: str) -> str:
            raise RuntimeError("the sender died after storing its message")

        monkeypatch.setattr(messages, "inbox_token", died)
        with pytest.raises(Exception, match="sender died"):
            app.send("three:9", "cmds", "m1", key="k1")
        monkeypatch.setattr(messages, "inbox_token", real)
        assert app.resume("three:9")
        status = app.wait("three:9", 10)
        journal = {e.path: e.value for e in app.journal("three:9")}
    assert status.parked is not None and status.parked.path == "steps/b"
    assert journal["steps/a/@received"]["key"] == "k1"


def test_waits_take_seconds_or_duration_text_like_result(load: Any) -> None:
    """``event(wait="1s")`` raised a bare ValueError and ``stream(wait="1s")`` a TypeError; ``result`` took both."""
    with load() as app:
        app.run("three", {"id": "10"})
        assert app.event("three:10", "progress", wait="20ms") is None
        with pytest.raises(TeloError) as negative:
            app.event("three:10", "progress", wait=-1)

        async def follow() -> list[Any]:
            return [v async for v in app.aio.stream("three:10", "rows", wait="20ms")]

        assert app._call(follow()) == []
    assert negative.value.code == "ERR_INVALID_VALUE"


def test_a_restore_keeps_the_messages_sent_to_the_run(load: Any) -> None:
    """Messages are the run's inputs, not its history: a restore to before a receive makes its message untaken
    again (the receive re-executed takes it), instead of dropping it — and a resend with its key stays a
    duplicate."""
    with load() as app:
        app.run("three", {"id": "11"})
        app.send("three:11", "cmds", "m1", key="k1")
        assert app.wait("three:11", 10).status == "parked"  # took k1 at `a`, waits at `b`
        app.send("three:11", "cmds", "m2", key="k2")
        status = app.wait("three:11", 10)
        assert status.parked is not None and status.parked.path == "steps/c"
        checkpoint = next(c for c in app.checkpoints("three:11") if c.path == "steps/p1")
        app.restore("three:11", checkpoint)
        status = app.wait("three:11", 10)  # `b` executes again: it takes k2 again, and waits at `c`
        resent = app.send("three:11", "cmds", "m2", key="k2", continue_run=False)
        app.send("three:11", "cmds", "m3", key="k3")
        done = app.result("three:11", wait=10)
    assert status.parked is not None and status.parked.path == "@epoch[1]/steps/c", status
    assert resent.duplicate
    assert done.ok and [done.step(s)["key"] for s in ("a", "b", "c")] == ["k1", "k2", "k3"]


def test_a_workflow_sends_with_its_steps_idempotency_key(load: Any) -> None:
    with load() as app:
        app.run("three", {"id": "6"})
        sent = app.run("sender", {"id": "1", "to": "three:6", "what": "hi"}, wait=10)
        assert sent.ok
        out = sent.step("s")
        # The key is the sending step's idempotency key: a re-executed step sends nothing new.
        assert out["key"] == "sender:1/steps/s" and out["duplicate"] is False
        assert out["woke"] is True and app.run_due() == 1  # made due; a worker (here run_due) continues it
        assert app.wait("three:6", 10).status == "parked"  # at `b`
        received = {e.path: e.value for e in app.journal("three:6")}["steps/a"]
    assert received["payload"] == "hi" and received["key"] == "sender:1/steps/s"


def test_a_stream_is_read_from_an_offset_while_written_and_ends_at_its_close(load: Any) -> None:
    with load() as app:
        parked = app.run("writer", {"id": "1"})  # wrote offsets 0 and 1, waits for a message
        assert parked.status == "parked"
        page = app.read_stream("writer:1", "rows")
        assert page.values == ((0, "zero"), (1, {"n": 1})) and page.next == 2 and not page.ended
        assert app.read_stream("writer:1", "rows", 1).values == ((1, {"n": 1}),)
        assert list(app.stream("writer:1", "rows", 0, wait=0.3)) == [(0, "zero"), (1, {"n": 1})]  # waits, ends
        app.send("writer:1", "cmds", "two")
        done = app.result("writer:1", wait=10)
        followed = list(app.stream("writer:1", "rows", 1))  # ends at the close, with no wait given
        listed = app.list_streams("writer:1")
        final = app.read_stream("writer:1", "rows")
    # A write after the close fails its step (the values before it stand).
    assert done.status == "failed" and done.error is not None and done.error.code == "ERR_DURABLE_STREAM_CLOSED"
    assert followed == [(1, {"n": 1}), (2, "two")]
    assert [s.to_json() for s in listed] == [{"stream": "rows", "values": 3, "closed": True}]
    assert final.values == ((0, "zero"), (1, {"n": 1}), (2, "two")) and final.closed and final.next == 3


def test_an_event_is_readable_while_the_run_executes_a_step(load: Any) -> None:
    RELEASE.clear()
    with load() as app:
        ref = app.start("busy", {"id": "1"})
        try:
            seen = app.event(ref, "progress", wait=10)  # published, and the run is inside `h`, not parked
            status = app.status(ref).status
        finally:
            RELEASE.set()
        done = app.result(ref, wait=10)
        latest = app.event(ref, "progress")
    assert seen is not None and seen.value == "halfway" and status == "running"
    assert done.ok and latest is not None and latest.value == "all done"


def test_parallel_branches_never_take_one_message_twice_nor_write_one_offset_twice(load: Any) -> None:
    """Three branches of an iteration (concurrency 3) receive from one topic and write to one stream at once:
    each takes its own message, and the stream holds three offsets — the receives and writes take turns."""
    with load() as app:
        assert app.run("parallel", {"id": "1"}).status == "parked"
        for n in range(3):
            app.send("parallel:1", "cmds", n, key=f"m{n}", continue_run=False)
        app.send("parallel:1", "go", None)
        done = app.result("parallel:1", wait=10)
        page = app.read_stream("parallel:1", "rows")
        journal = app.journal("parallel:1")
    assert done.ok, done
    taken = sorted(e.value["key"] for e in journal if e.path.startswith("steps/fan[") and e.path.endswith("@received"))
    assert taken == ["m0", "m1", "m2"]
    assert sorted(v for _, v in page.values) == ["m0", "m1", "m2"] and page.next == 3
