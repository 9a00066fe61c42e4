"""Composers journal their own collection and turns, and fan-out parks the branch, not the region."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from telo.engine.composers import Catch, IterationSpec, LoopSpec, run_iteration, run_loop
from telo.engine.context import derive, entered, root
from telo.engine.interpreter import Services
from telo.engine.steps import compile_steps
from telo.engine.suspend import ParkUntil, ParkWhere, Suspension
from telo.errors import TeloError
from telo.journal.model import NO_VALUE
from tests.unit.engine.fakes import Const, DictCompiler, Fn, RecordingHandle, Target


def go(coro_fn: Any, handle: RecordingHandle | None, path: str | None = "steps/each") -> Any:
    async def main() -> Any:
        with entered(derive(root(), handle=handle, path=path)):
            return await coro_fn()

    return asyncio.run(main())


def steps(raw: list[dict[str, Any]]) -> Any:
    return compile_steps(raw, DictCompiler(), where="test")


def test_iteration_records_the_collection_and_index_qualified_turns() -> None:
    h = RecordingHandle()
    t = Target("charge")
    spec = IterationSpec("each", Const([10, 20]), steps([{"name": "charge", "invoke": t,
                                                          "inputs": lambda s: {"item": s["item"]}}]))
    assert go(lambda: run_iteration(spec, {}, {}, Services()), h) is NO_VALUE
    assert h.paths() == ["steps/each/collection", "steps/each[0]/charge/inputs", "steps/each[0]/charge",
                         "steps/each[1]/charge/inputs", "steps/each[1]/charge"]
    assert t.calls == [{"item": 10}, {"item": 20}]


def test_projection_returns_outputs_in_input_order_with_concurrency() -> None:
    async def slow(s: Any) -> Any:
        return s

    spec = IterationSpec("proj", Const([3, 1, 2]), steps([{"name": "v", "value": lambda s: s["item"] * 2}]),
                         concurrency=3, outputs=Fn(lambda s: s["steps"]["v"]["result"]), projection=True)
    assert go(lambda: run_iteration(spec, {}, {}, Services()), RecordingHandle()) == [6, 2, 4]


def test_a_parked_branch_does_not_stop_its_siblings() -> None:
    h = RecordingHandle()
    done: list[int] = []

    def maybe_park(inputs: Any) -> Any:
        if inputs["item"] == 1:
            raise Suspension("run-1", ParkWhere("steps/each[1]/w", "approval"), ParkUntil(token="t"))
        done.append(inputs["item"])
        return inputs["item"]

    spec = IterationSpec("each", Const([0, 1, 2, 3]), steps([{"name": "w", "invoke": Target("w", fn=maybe_park),
                                                              "inputs": lambda s: {"item": s["item"]}}]),
                         concurrency=2)
    with pytest.raises(Suspension):
        go(lambda: run_iteration(spec, {}, {}, Services()), h)
    assert sorted(done) == [0, 2, 3]  # every other branch ran to completion
    assert {"steps/each[0]/w", "steps/each[2]/w", "steps/each[3]/w"} <= set(h.recorded)


def test_a_failure_stops_new_items_and_beats_a_park() -> None:
    started: list[int] = []

    def work(inputs: Any) -> Any:
        started.append(inputs["item"])
        if inputs["item"] == 0:
            raise TeloError("ERR_BAD", "bad item")
        return 1

    spec = IterationSpec("each", Const(list(range(10))), steps([{"name": "w", "invoke": Target("w", fn=work),
                                                                 "inputs": lambda s: {"item": s["item"]}}]))
    with pytest.raises(TeloError) as exc:
        go(lambda: run_iteration(spec, {}, {}, Services()), None)
    assert exc.value.code == "ERR_BAD" and started == [0]


def test_catches_give_a_fallback_value() -> None:
    spec = IterationSpec("each", Const("not a list"), steps([]),
                         catches=(Catch(Fn(lambda s: s["error"]["code"] == "INVALID_COLLECTION"), Const("fallback")),))
    assert go(lambda: run_iteration(spec, {}, {}, Services()), None) == "fallback"


def test_loop_records_each_turn_condition() -> None:
    h = RecordingHandle()
    spec = LoopSpec("loop", steps([{"name": "n", "value": lambda s: s["iteration"]}]),
                    condition=Fn(lambda s: s["iteration"] < 2), max_iterations=5,
                    outputs=Fn(lambda s: s["steps"]["n"]["result"]))
    assert go(lambda: run_loop(spec, {}, {}, Services()), h) == 1
    assert h.paths() == ["steps/each/while[0]", "steps/each[0]/n", "steps/each/while[1]", "steps/each[1]/n",
                         "steps/each/while[2]"]


def test_loop_needs_a_bound() -> None:
    with pytest.raises(TeloError) as exc:
        go(lambda: run_loop(LoopSpec("l", ()), {}, {}, Services()), None)
    assert exc.value.code == "INVALID_LOOP"
