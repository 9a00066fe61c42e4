"""The exact journaling calls (op, path, kind) the engine makes for each grammar element (reference §4)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from telo.clock import FakeClock
from telo.engine.context import derive, entered, root
from telo.engine.interpreter import Services, run_steps
from telo.engine.steps import compile_steps
from telo.engine.suspend import Suspension
from telo.engine.zones import ATOMIC, IDEMPOTENT, NO_SUSPEND, Zone
from telo.errors import TeloError
from tests.unit.engine.fakes import DictCompiler, RecordingHandle, Target


def run(raw: list[dict[str, Any]], handle: RecordingHandle | None = None, *, zones: tuple[Zone, ...] = (),
        path: str | None = None, sv: Services | None = None) -> dict[str, Any]:
    steps = compile_steps(raw, DictCompiler(), where="test")
    scope: dict[str, Any] = {"inputs": {"n": 2}, "steps": {}}

    async def go() -> None:
        with entered(derive(root(), handle=handle, zones=zones, path=path)):
            await run_steps(steps, scope, sv or Services())

    asyncio.run(go())
    return scope


def test_invoke_records_inputs_then_the_step() -> None:
    h = RecordingHandle()
    t = Target("charge")
    scope = run([{"name": "charge", "invoke": t, "inputs": lambda s: {"n": s["inputs"]["n"]}}], h)
    assert h.calls == [("decide", "steps/charge/inputs", "inputs"), ("step", "steps/charge", "charge")]
    assert scope["steps"] == {"charge": {"result": {"n": 2}}}
    assert t.paths_seen == ["steps/charge"]  # the dispatch carries the step's path to the body


def test_guard_is_journaled_at_the_reserved_segment() -> None:
    h = RecordingHandle()
    run([{"name": "charge", "when": lambda s: False, "invoke": Target("t")}], h)
    assert h.calls == [("decide", "steps/charge/@when", "predicate")]


def test_if_elseif_else_paths() -> None:
    h = RecordingHandle()
    run([{"name": "check", "if": lambda s: False, "then": [{"name": "a", "value": 1}],
          "elseif": [{"if": lambda s: False, "then": []}, {"if": lambda s: True, "then": [{"name": "b", "value": 2}]}],
          "else": [{"name": "c", "value": 3}]}], h)
    assert h.calls == [
        ("decide", "steps/check/if", "predicate"),
        ("decide", "steps/check/elseif[0]", "predicate"),
        ("decide", "steps/check/elseif[1]", "predicate"),
        ("decide", "steps/check/elseif[1]/then/b", "value"),
    ]


def test_else_body_path() -> None:
    h = RecordingHandle()
    run([{"name": "check", "if": lambda s: False, "then": [], "else": [{"name": "c", "value": 3}]}], h)
    assert h.paths() == ["steps/check/if", "steps/check/else/c"]


def test_while_records_each_turn() -> None:
    h = RecordingHandle()
    scope = run([
        {"name": "i", "value": 0},
        {"name": "poll", "while": lambda s: s["steps"]["i"]["result"] < 2,
         "do": [{"name": "i", "value": lambda s: s["steps"]["i"]["result"] + 1}]},
    ], h)
    assert h.paths() == ["steps/i", "steps/poll/while[0]", "steps/poll/do[0]/i", "steps/poll/while[1]",
                         "steps/poll/do[1]/i", "steps/poll/while[2]"]
    assert scope["steps"]["i"] == {"result": 2}


def test_switch_paths() -> None:
    h = RecordingHandle()
    run([{"name": "route", "switch": lambda s: "bulk",
          "cases": {"bulk": [{"name": "write", "value": 1}]}, "default": [{"name": "d", "value": 0}]}], h)
    assert h.calls == [("decide", "steps/route/switch", "switch"), ("decide", "steps/route/cases/bulk/write", "value")]
    h2 = RecordingHandle()
    run([{"name": "route", "switch": lambda s: 7, "cases": {"bulk": []}, "default": [{"name": "d", "value": 0}]}], h2)
    assert h2.paths() == ["steps/route/switch", "steps/route/default/d"]


def test_try_catch_finally_paths_and_error_shape() -> None:
    h = RecordingHandle()
    scope = run([{"name": "guarded", "when": lambda s: True,
                  "try": [{"name": "boom", "throw": {"code": "ERR_OUT", "message": "out of stock"}}],
                  "catch": [{"name": "seen", "value": lambda s: s["error"]}],
                  "finally": [{"name": "fin", "value": lambda s: s["error"]}]}], h)
    assert h.paths() == ["steps/guarded/when", "steps/guarded/catch/seen", "steps/guarded/finally/fin"]
    assert scope["steps"]["seen"]["result"] == {"code": "ERR_OUT", "message": "out of stock", "step": "guarded"}
    assert scope["steps"]["fin"]["result"] is None


def test_nested_bodies_continue_the_enclosing_path() -> None:
    h = RecordingHandle()
    run([{"name": "announce", "value": 1}], h, path="steps/charge")
    assert h.paths() == ["steps/charge/announce"]


def test_predicate_must_be_boolean_before_anything_is_recorded() -> None:
    h = RecordingHandle()
    with pytest.raises(TeloError) as exc:
        run([{"name": "check", "if": lambda s: "false", "then": []}], h)
    assert exc.value.code == "ERR_PREDICATE_NOT_BOOLEAN"
    assert "the string 'false'" in exc.value.message
    assert exc.value.data["produced"] == "string"
    assert h.recorded == {}


def test_replay_returns_recorded_values_without_executing() -> None:
    t = Target("charge", fn=lambda i: {"charged": True})
    h = RecordingHandle(recorded={"steps/charge/inputs": {"n": 99}, "steps/charge": {"charged": "recorded"}})
    scope = run([{"name": "charge", "invoke": t, "inputs": lambda s: {"n": 1}}], h)
    assert t.calls == []
    assert scope["steps"]["charge"]["result"] == {"charged": "recorded"}


def test_idempotent_zone_collapses_engine_entries_and_reports() -> None:
    h = RecordingHandle()
    zone = Zone("Durable.Idempotent", {IDEMPOTENT: "re-running is a no-op"})
    t = Target("t")
    run([{"name": "a", "invoke": t}, {"name": "v", "value": 1}], h, zones=(zone,), path="steps/bulk")
    assert h.calls == []
    assert t.paths_seen == ["steps/bulk/a"]  # the path is still propagated
    assert {(r.attribute, r.mode) for r in h.reports} == {(IDEMPOTENT, "collapsed")}


def test_atomic_zone_is_per_step_when_the_handle_attests() -> None:
    zone = Zone("Sql.Transaction", {ATOMIC: "rolled back together", NO_SUSPEND: "a transaction cannot wait"})
    h = RecordingHandle(attest=True)
    run([{"name": "v", "value": 1}], h, zones=(zone,), path="steps/tx")
    assert h.paths() == ["steps/tx/v"]
    assert h.reports[0].mode == "perStep" and h.reports[0].attestation == "writesInside"
    h2 = RecordingHandle(attest=False)
    run([{"name": "v", "value": 1}], h2, zones=(zone,), path="steps/tx")
    assert h2.calls == [] and h2.reports[0].mode == "collapsed"


def test_suspending_retry_journals_the_attempt_and_parks() -> None:
    h = RecordingHandle()
    failing = Target("flaky", fn=lambda i: (_ for _ in ()).throw(TeloError("ERR_DOWN", "down")))
    with pytest.raises(Suspension) as exc:
        run([{"name": "call", "invoke": failing,
              "retry": {"attempts": 3, "initialDelay": 60_000, "jitter": "none"}}], h)
    assert exc.value.where.path == "steps/call/retry[0]"
    # the verdict (telo's, reserved segment), then the upstream due-time record, then the park there
    assert h.paths() == ["steps/call/inputs", "steps/call", "steps/call/@retry[0]", "steps/call/retry[0]",
                         "steps/call/retry[0]"]
    assert [op for op, _, _ in h.calls] == ["decide", "step", "decide", "decide", "park"]
    assert h.recorded["steps/call/@retry[0]"]["code"] == "ERR_DOWN"


def test_suspending_retry_inside_no_suspend_zone_is_forbidden() -> None:
    zone = Zone("Sql.Transaction", {ATOMIC: "x", NO_SUSPEND: "a database transaction cannot stay open while waiting"},
                resource="tx")
    h = RecordingHandle(attest=True)
    failing = Target("flaky", fn=lambda i: (_ for _ in ()).throw(TeloError("ERR_DOWN", "down")))
    with pytest.raises(TeloError) as exc:
        run([{"name": "call", "invoke": failing, "retry": {"attempts": 1, "initialDelay": 60_000, "jitter": "none"}}],
            h, zones=(zone,))
    assert exc.value.code == "ERR_DURABLE_SUSPEND_FORBIDDEN"
    assert "cannot stay open while waiting" in exc.value.message


def test_short_retry_sleeps_in_process_and_journals_each_verdict_and_attempt() -> None:
    h = RecordingHandle()
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    count = {"n": 0}

    def flaky(i: Any) -> Any:
        count["n"] += 1
        if count["n"] < 3:
            raise TeloError("ERR_DOWN", "down")
        return "ok"

    scope = run([{"name": "call", "invoke": Target("flaky", fn=flaky),
                  "retry": {"attempts": 3, "initialDelay": 100, "jitter": "none"}}], h, sv=Services(sleep=sleep))
    assert scope["steps"]["call"]["result"] == "ok"
    assert slept == [0.1, 0.2]
    assert h.paths() == ["steps/call/inputs", "steps/call", "steps/call/@retry[0]", "steps/call/@attempt[1]",
                         "steps/call/@retry[1]", "steps/call/@attempt[2]"]
    assert h.recorded["steps/call/@retry[1]"]["backoffMs"] == 200


def test_retry_jitter_is_drawn_from_the_injected_clock() -> None:
    """Full jitter draws from the Services' clock (telo.clock), so a FakeClock's seed decides it."""
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    def failing(i: Any) -> Any:
        raise TeloError("ERR_DOWN", "down")

    def backoffs(seed: int) -> list[int]:
        h = RecordingHandle()
        with pytest.raises(TeloError):
            run([{"name": "call", "invoke": Target("failing", fn=failing),
                  "retry": {"attempts": 2, "initialDelay": 1000, "jitter": "full"}}], h,
                sv=Services(clock=FakeClock(seed=seed), sleep=sleep))
        return [h.recorded[f"steps/call/@retry[{k}]"]["backoffMs"] for k in range(2)]

    expected = FakeClock(seed=7)
    assert backoffs(7) == [int(1000 * expected.random()), int(2000 * expected.random())]
    assert backoffs(7) == backoffs(7) != backoffs(8)


def test_non_retryable_codes_fail_at_once() -> None:
    count = {"n": 0}

    def declined(i: Any) -> Any:
        count["n"] += 1
        raise TeloError("ERR_CARD_DECLINED", "declined")

    with pytest.raises(TeloError):
        run([{"name": "c", "invoke": Target("c", fn=declined),
              "retry": {"attempts": 3, "initialDelay": 1, "nonRetryable": ["ERR_CARD_DECLINED"]}}])
    assert count["n"] == 1
