"""Durable execution over real stores: replay, resumption after a crash, parking, delivery, swallow, cancel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from telo.clock import FakeClock
from telo.durable.aio import AsyncStore
from telo.durable.execute import Execution, WorkflowBody, execute_run
from telo.durable.waits import await_delivery, deliver, sleep
from telo.engine.interpreter import Services
from telo.engine.steps import compile_steps
from telo.journal.claims import Fence, Holder
from telo.journal.model import Admission, Outcome
from telo.journal.store import Store
from telo.values.equality import equal
from tests.unit.engine.fakes import DictCompiler, Target

HOLDER = Holder.for_this_process("test").to_text()


def claimed(store: Store, run: str, clock: FakeClock) -> Fence:
    """Claim ``run`` for an execution of the test, as a workflow does before executing it. A claim an earlier
    execution of the test left (it "crashed") is released first: a new process takes a dead one's over."""
    store.release(run, HOLDER)
    token = store.claim(run, HOLDER, 60_000, clock.now_ms())
    assert token is not None
    return Fence(HOLDER, token)


class Crash(BaseException):
    """Stands in for the process dying mid-step: nothing after it runs, nothing settles the run."""


def body(raw: list[dict[str, Any]], inputs: Any = None) -> WorkflowBody:
    from tests.unit.engine.fakes import Fn

    return WorkflowBody("order", compile_steps(raw, DictCompiler(), where="test"),
                        inputs=Fn(inputs) if inputs else None)


def execute(store: Store, run: str, wf: WorkflowBody, inputs: Any = None, clock: FakeClock | None = None) -> Execution:
    clock = clock or FakeClock()
    store.admit(Admission.of(run))
    return asyncio.run(execute_run(AsyncStore(store), run, wf, inputs or {}, fence=claimed(store, run, clock),
                                   clock=clock, services=Services(clock=clock)))


def test_a_completed_run_replays_without_executing(store: Store) -> None:
    charge, ship = Target("charge", fn=lambda i: {"charged": i["order"]}), Target("ship", fn=lambda i: "shipped")
    wf = body([{"name": "charge", "invoke": charge, "inputs": lambda s: {"order": s["inputs"]["order"]}},
               {"name": "ship", "invoke": ship}], inputs=lambda s: {"order": s["inputs"]["order"]})
    first = execute(store, "order:A-1", wf, {"order": "A-1"})
    assert first.status == "completed" and not first.replayed
    assert equal(first.result, {"steps": {"charge": {"result": {"charged": "A-1"}}, "ship": {"result": "shipped"}}})
    rec = store.read_run("order:A-1")
    assert rec is not None and rec.status == "completed" and equal(rec.decoded_result(), first.result)
    store.update_run("order:A-1", status="running")  # run it again: every step replays
    again = execute(store, "order:A-1", wf, {"order": "A-1"})
    assert again.status == "completed" and again.replayed_steps == 2 and again.executed_steps == 0
    assert len(charge.calls) == 1 and len(ship.calls) == 1


def test_an_interrupted_run_continues_where_it_stopped(store: Store) -> None:
    calls: list[str] = []

    def crash_once(i: Any) -> Any:
        calls.append("ship")
        if calls.count("ship") == 1:
            raise Crash()
        return "shipped"

    wf = body([{"name": "charge", "invoke": Target("charge", fn=lambda i: calls.append("charge") or 1)},
               {"name": "ship", "invoke": Target("ship", fn=crash_once)}])
    with pytest.raises(Crash):
        execute(store, "r", wf)
    rec = store.read_run("r")
    assert rec is not None and rec.status == "running"
    done = execute(store, "r", wf)
    assert done.status == "completed" and done.replayed_steps == 1
    assert calls == ["charge", "ship", "ship"]  # charge exactly once; only the interrupted step again


def test_sleep_parks_then_completes_once_due(store: Store, clock: FakeClock) -> None:
    class Sleeper:
        name, kind, module = "nap", "Durable.Sleep", None

        async def invoke(self, inputs: Any) -> Any:
            return await sleep("nap", for_ms=60_000, clock=clock)

    after = Target("after")
    wf = body([{"name": "nap", "invoke": Sleeper()}, {"name": "after", "invoke": after}])
    first = execute(store, "s", wf, clock=clock)
    assert first.status == "parked"
    rec = store.read_run("s")
    assert rec is not None and rec.status == "parked" and rec.parked is not None
    assert rec.parked.path == "steps/nap" and rec.due_at == clock.now_ms() + 60_000
    assert store.due_runs(clock.now_ms(), 10) == []
    clock.advance(ms=60_000)
    assert store.due_runs(clock.now_ms(), 10) == ["s"]
    store.unpark("s")
    done = execute(store, "s", wf, clock=clock)
    assert done.status == "completed" and len(after.calls) == 1
    assert done.result["steps"]["nap"]["result"]["wokeAt"] == clock.now_ms()


def test_await_parks_on_a_token_and_a_delivery_supplies_the_result(store: Store, clock: FakeClock) -> None:
    class Approval:
        name, kind, module = "approval", "Durable.Await", None

        async def invoke(self, inputs: Any) -> Any:
            return await await_delivery("approval", token=lambda: "approve:A-1", clock=clock)

    wf = body([{"name": "wait", "invoke": Approval()}, {"name": "after", "invoke": Target("after")}])
    assert execute(store, "a", wf, clock=clock).status == "parked"
    rec = store.read_run("a")
    assert rec is not None and rec.parked is not None and rec.parked.token == "approve:A-1"
    assert deliver(store, "approve:A-1", {"approvedBy": "ada"}) == {"delivered": True, "run": "a"}
    assert deliver(store, "approve:A-1", {"approvedBy": "eve"}) == {"delivered": False}  # spent
    done = execute(store, "a", wf, clock=clock)
    assert done.status == "completed"
    assert equal(done.result["steps"]["wait"]["result"], {"approvedBy": "ada"})


def test_a_swallowed_suspension_fails_the_run(store: Store, clock: FakeClock) -> None:
    class Absorber:
        name, kind, module = "absorber", "Test.Absorber", None

        async def invoke(self, inputs: Any) -> Any:
            try:
                await sleep("absorber", for_ms=1_000, clock=clock)
            except BaseException:  # a third-party `except BaseException` that eats everything
                return "swallowed"

    result = execute(store, "sw", body([{"name": "x", "invoke": Absorber()}]), clock=clock)
    assert result.status == "failed" and result.error is not None
    assert result.error["code"] == "ERR_DURABLE_SUSPENSION_SWALLOWED"
    rec = store.read_run("sw")
    assert rec is not None and rec.status == "failed"


def test_a_failed_step_settles_the_run_failed(store: Store) -> None:
    from telo.errors import TeloError

    def declined(i: Any) -> Any:
        raise TeloError("ERR_CARD_DECLINED", "card declined")

    result = execute(store, "f", body([{"name": "charge", "invoke": Target("charge", fn=declined)}]))
    assert result.status == "failed"
    rec = store.read_run("f")
    assert rec is not None and dict(rec.error or {}) == {"code": "ERR_CARD_DECLINED", "message": "card declined"}


def test_cancel_stops_a_running_body_at_its_next_journaling_point(store: Store) -> None:
    later = Target("later")

    def cancel_me(i: Any) -> Any:
        store.complete("c", Outcome.cancelled("operator"))
        return 1

    result = execute(store, "c", body([{"name": "first", "invoke": Target("first", fn=cancel_me)},
                                       {"name": "later", "invoke": later}]))
    assert result.status == "cancelled" and later.calls == []
    rec = store.read_run("c")
    assert rec is not None and rec.status == "cancelled"


def test_unjournalable_results_name_the_step_and_the_pointer(store: Store) -> None:
    result = execute(store, "u", body([{"name": "bad", "invoke": Target("bad", fn=lambda i: {"x": [object()]})}]))
    assert result.status == "failed" and result.error is not None
    assert result.error["code"] == "ERR_DURABLE_UNJOURNALABLE_VALUE"
    assert "steps/bad" in result.error["message"]


def test_replay_against_a_different_target_is_a_mismatch(store: Store) -> None:
    execute(store, "m", body([{"name": "charge", "invoke": Target("charge")}]))
    store.update_run("m", status="running")
    result = execute(store, "m", body([{"name": "charge", "invoke": Target("refund")}]))
    assert result.status == "failed" and result.error is not None
    assert result.error["code"] == "ERR_JOURNAL_ENTRY_MISMATCH"
