"""Confirmed effects (event-log spec §2) on every store: an effect whose outcome is unknown after a crash is
never re-run blindly, and a crash mid-retry neither resets the budget nor repeats an attempt."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from telo.clock import FakeClock
from telo.durable.effects import NOT_FOUND, PARK, REDRIVE, EffectPolicy
from telo.durable.operator import resolve_unconfirmed
from telo.errors import TeloError
from telo.journal import eventlog
from telo.journal.store import Store
from telo.values.equality import equal
from tests.durable.test_execute import Crash, body, execute
from tests.unit.engine.fakes import Target


def crashing_once(effects: list[Any], result: Any = "done") -> Any:
    def fn(inputs: Any) -> Any:
        effects.append(inputs)
        if len(effects) == 1:
            raise Crash()  # the effect happened (it is in `effects`); the process died before its receipt
        return result

    return fn


def with_policy(wf: Any, policy: EffectPolicy) -> Any:
    return replace(wf, effect_policy=lambda target: policy)


def test_redrive_executes_again_with_the_same_key_and_records_why(store: Store) -> None:
    effects: list[Any] = []
    wf = with_policy(body([{"name": "charge", "invoke": Target("charge", fn=crashing_once(effects))}]),
                     EffectPolicy(REDRIVE))
    with pytest.raises(Crash):
        execute(store, "r", wf)
    done = execute(store, "r", wf)
    assert done.status == "completed" and len(effects) == 2
    entries = eventlog.recover(store, "r").entries
    assert equal(entries["steps/charge/@unconfirmed[0]"].decode("r"), {"action": "redrive", "by": "policy"})


def test_park_waits_for_an_operator_who_supplies_the_result(store: Store) -> None:
    effects: list[Any] = []
    wf = with_policy(body([{"name": "charge", "invoke": Target("charge", fn=crashing_once(effects))},
                           {"name": "after", "invoke": Target("after")}]), EffectPolicy(PARK))
    with pytest.raises(Crash):
        execute(store, "p", wf)
    parked = execute(store, "p", wf)
    assert parked.status == "parked" and len(effects) == 1  # not re-run blindly
    rec = store.read_run("p")
    assert rec is not None and rec.parked is not None
    assert rec.parked.path == "steps/charge/@unconfirmed[0]"
    assert rec.parked.reason is not None and "telo resolve p steps/charge" in rec.parked.reason
    resolve_unconfirmed(store, "p", "steps/charge", "skip", {"charged": "by hand"})
    done = execute(store, "p", wf)
    assert done.status == "completed" and len(effects) == 1
    assert equal(done.result["steps"]["charge"]["result"], {"charged": "by hand"})


def test_an_interrupted_redrive_asks_again(store: Store) -> None:
    effects: list[Any] = []

    def crashes_twice(inputs: Any) -> Any:
        effects.append(inputs)
        if len(effects) <= 2:
            raise Crash()
        return "ok"

    wf = with_policy(body([{"name": "charge", "invoke": Target("charge", fn=crashes_twice)}]), EffectPolicy(PARK))
    with pytest.raises(Crash):
        execute(store, "a", wf)
    assert execute(store, "a", wf).status == "parked"
    resolve_unconfirmed(store, "a", "steps/charge", "redrive")
    with pytest.raises(Crash):  # the operator's redrive is itself interrupted
        execute(store, "a", wf)
    again = execute(store, "a", wf)
    assert again.status == "parked"  # a new unknown outcome: asked again, not redriven blindly
    rec = store.read_run("a")
    assert rec is not None and rec.parked is not None and rec.parked.path == "steps/charge/@unconfirmed[1]"


def test_fail_policy_fails_the_run(store: Store) -> None:
    effects: list[Any] = []
    wf = with_policy(body([{"name": "charge", "invoke": Target("charge", fn=crashing_once(effects))}]),
                     EffectPolicy("fail"))
    with pytest.raises(Crash):
        execute(store, "f", wf)
    failed = execute(store, "f", wf)
    assert failed.status == "failed" and failed.error is not None
    assert failed.error["code"] == "ERR_DURABLE_EFFECT_UNCONFIRMED" and len(effects) == 1
    assert "its policy is to fail rather than repeat it" in failed.error["message"]


def test_an_operators_fail_says_the_operator_chose_it(store: Store) -> None:
    # (it said "its policy is to fail rather than repeat it", the policy being to park for the operator)
    effects: list[Any] = []
    wf = with_policy(body([{"name": "charge", "invoke": Target("charge", fn=crashing_once(effects))}]),
                     EffectPolicy(PARK))
    with pytest.raises(Crash):
        execute(store, "o", wf)
    assert execute(store, "o", wf).status == "parked"
    resolve_unconfirmed(store, "o", "steps/charge", "fail")
    failed = execute(store, "o", wf)
    assert failed.status == "failed" and failed.error is not None and len(effects) == 1
    assert failed.error["code"] == "ERR_DURABLE_EFFECT_UNCONFIRMED"
    assert "an operator chose to fail it (telo resolve --fail)" in failed.error["message"], failed.error


@pytest.mark.parametrize("found", [True, False])
def test_lookup_resolves_the_outcome_from_the_outside_system(store: Store, found: bool) -> None:
    effects: list[Any] = []
    asked: list[str] = []

    async def lookup(key: str) -> Any:
        asked.append(key)
        return {"charged": "found"} if found else NOT_FOUND

    wf = with_policy(body([{"name": "charge", "invoke": Target("charge", fn=crashing_once(effects, "fresh"))}]),
                     EffectPolicy(PARK, lookup))
    with pytest.raises(Crash):
        execute(store, "l", wf)
    done = execute(store, "l", wf)
    assert asked == ["l/steps/charge"]
    assert done.status == "completed"
    if found:
        assert len(effects) == 1 and equal(done.result["steps"]["charge"]["result"], {"charged": "found"})
    else:
        assert len(effects) == 2 and done.result["steps"]["charge"]["result"] == "fresh"


def test_a_crash_mid_retry_keeps_the_budget_and_the_remaining_delay(store: Store, clock: FakeClock) -> None:
    calls: list[int] = []

    def flaky(inputs: Any) -> Any:
        calls.append(len(calls))
        if len(calls) == 1:
            raise TeloError("ERR_DOWN", "down")
        return "ok"

    wf = body([{"name": "call", "invoke": Target("call", fn=flaky),
                "retry": {"attempts": 1, "initialDelay": 5_000, "jitter": "none"}}])
    # The first execution fails attempt 0, records its verdict, then dies while waiting out the backoff.
    from telo.engine.interpreter import Services

    async def die(seconds: float) -> None:
        raise Crash()

    import asyncio

    from telo.durable.aio import AsyncStore
    from telo.durable.execute import execute_run
    from telo.journal.model import Admission
    from tests.durable.test_execute import claimed

    store.admit(Admission.of("rt"))
    with pytest.raises(Crash):
        asyncio.run(execute_run(AsyncStore(store), "rt", wf, {}, fence=claimed(store, "rt", clock), clock=clock,
                                services=Services(clock=clock, sleep=die)))
    verdict = eventlog.recover(store, "rt").entries["steps/call/@retry[0]"].decode("rt")
    assert verdict["attempt"] == 0 and verdict["code"] == "ERR_DOWN" and verdict["backoffMs"] == 5_000
    clock.advance(ms=3_000)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    done = asyncio.run(execute_run(AsyncStore(store), "rt", wf, {}, fence=claimed(store, "rt", clock), clock=clock,
                                   services=Services(clock=clock, sleep=sleep)))
    assert done.status == "completed"
    assert calls == [0, 1]  # attempt 0 is not repeated: its failure was confirmed
    assert slept == [2.0]  # only what was left of the 5 s backoff
