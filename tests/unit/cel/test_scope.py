"""Scopes: converted once, extended per step, only read entries handed to the library (telo.cel.scope)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telo.cel import CelEvalError, Scope
from telo.cel import convert as convert_module
from telo.values import CelMap, Timestamp, Uint, equal

from .support import ENV, values

# hypothesis renders the recursive value strategy's repr while generating; it is long, and harmless
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


def test_scope_is_a_mapping_of_domain_values() -> None:
    scope = Scope({"inputs": {"a": 1}}, item=Uint(2))
    assert dict(scope) == {"inputs": {"a": 1}, "item": Uint(2)}
    assert len(scope) == 2 and "item" in scope and scope["inputs"] == {"a": 1}


def test_with_step_result_extends_without_changing_the_old_scope() -> None:
    s0 = Scope(inputs={"order": "o-1"})
    s1 = s0.with_step_result("charge", {"ok": True})
    s2 = s1.with_step_result("ship", 5)
    assert "steps" not in s0
    assert s1["steps"] == {"charge": {"result": {"ok": True}}}
    assert s2["steps"] == {"charge": {"result": {"ok": True}}, "ship": {"result": 5}}
    program = ENV.compile("steps.charge.result.ok && steps.ship.result == 5")
    assert program.evaluate(s2) is True
    with pytest.raises(CelEvalError) as info:
        program.evaluate(s1)
    assert info.value.code == "ERR_CEL_NO_SUCH_KEY"


def test_a_later_step_of_one_name_replaces_the_earlier() -> None:
    scope = Scope().with_step_result("poll", 1).with_step_result("poll", 2)
    assert ENV.compile("steps.poll.result").evaluate(scope) == 2


def test_with_values_and_with_entry() -> None:
    scope = Scope(inputs={"a": 1}).with_values(item="x", index=3).with_entry("resources", "db", {"status": "up"})
    assert ENV.compile("item + string(index) + resources.db.status + string(inputs.a)").evaluate(scope) == "x3up1"
    with pytest.raises(TypeError, match="not a map"):
        scope.with_entry("item", "k", 1)


def count_conversions(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every value the scope converts to the CEL library's types from now on, in order."""
    calls: list[Any] = []
    real = convert_module.to_lib

    def counting(value: Any) -> Any:
        calls.append(value)
        return real(value)

    monkeypatch.setattr("telo.cel.scope.to_lib", counting)
    return calls


def test_each_entry_is_converted_once_and_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_conversions(monkeypatch)
    big = {"ts": Timestamp(1, 1), "n": list(range(5))}
    scope = Scope(inputs={"x": 1}).with_step_result("a", big).with_step_result("b", 2)
    program = ENV.compile("steps.a.result.ts")
    assert program.evaluate(scope) == Timestamp(1, 1)
    assert program.evaluate(scope) == Timestamp(1, 1)
    assert program.evaluate(scope.with_step_result("c", 3)) == Timestamp(1, 1)  # shared by the extension
    assert calls == [{"result": big}]  # one conversion; "b", "c" and inputs never converted


def test_only_selected_entries_reach_the_library() -> None:
    scope = Scope(steps={"good": {"result": 1}, "bad": {"result": object()}})
    assert ENV.compile("steps.good.result + 1").evaluate(scope) == 2
    assert ENV.compile("has(steps.good) && !has(steps.nope)").evaluate(scope) is True
    assert ENV.compile("steps.?nope.orValue(0)").evaluate(scope) == 0
    with pytest.raises(CelEvalError, match=r"steps.bad.result"):
        ENV.compile("steps.map(k, k)").evaluate(scope)  # the whole map is needed, and converted


def test_shadowed_names_read_the_whole_variable() -> None:
    scope = Scope(steps={"a": {"result": 1}})
    assert ENV.compile("[2].map(steps, steps + 1) == [3] && steps.a.result == 1").evaluate(scope) is True
    assert ENV.compile("cel.bind(steps, {'z': 5}, steps.z)").evaluate(scope) == 5


_EXPRESSIONS = [
    "steps.a.result",
    "has(steps.b) ? steps.b.result : null",
    "[steps.a, inputs.k]",
    "steps",
    "size(steps) + size(inputs)",
    "steps.?c.orValue('none')",
    "inputs['k']",
]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=values, b=values, k=values, which=st.sampled_from(_EXPRESSIONS))
def test_scope_and_plain_mapping_agree(a: Any, b: Any, k: Any, which: str) -> None:
    plain = {"steps": {"a": {"result": a}, "b": {"result": b}}, "inputs": {"k": k}}
    scope = Scope(inputs={"k": k}).with_step_result("a", a).with_step_result("b", b)
    program = ENV.compile(which)
    assert equal(program.evaluate(scope), program.evaluate(plain))


def test_non_ascii_and_nul_keys_select_correctly() -> None:
    scope = Scope(inputs={"é": 1, "a\x00b": 2, "k": 3})
    assert ENV.compile("inputs['é'] + inputs.k").evaluate(scope) == 4
    assert ENV.compile("inputs['a\\x00b']").evaluate(scope) == 2
    assert ENV.compile("inputs['a\\x00b']").variables["inputs"] is None  # read whole: a NUL key needs to_lib


def test_inputs_may_be_any_map() -> None:
    assert ENV.compile("inputs[1] + inputs[true]").evaluate(Scope(inputs=CelMap([(1, 2), (True, 3)]))) == 5
    assert ENV.compile("inputs").evaluate({"inputs": {Uint(1): "u"}}) == {Uint(1): "u"}


def _outcome(program: Any, scope: Any, memo: Any) -> tuple[str, Any]:
    try:
        return "value", program.evaluate(scope, memo=memo)
    except CelEvalError as err:
        return "error", (err.code, err.message)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=values, b=values, k=values, which=st.lists(st.sampled_from(_EXPRESSIONS), min_size=1, max_size=4))
def test_a_memo_shared_by_several_expressions_changes_no_result(a: Any, b: Any, k: Any, which: list[str]) -> None:
    plain = {"steps": {"a": {"result": a}, "b": {"result": b}}, "inputs": {"k": k}}
    memo: dict[Any, Any] = {}
    for text in which:
        program = ENV.compile(text)
        alone, shared = _outcome(program, plain, None), _outcome(program, plain, memo)
        assert alone[0] == shared[0]
        assert alone[1] == shared[1] if alone[0] == "error" else equal(alone[1], shared[1])


def test_a_memo_converts_each_read_entry_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_conversions(monkeypatch)
    plain = {"steps": {"a": {"result": 1}, "b": {"result": 2}}, "inputs": {"k": 3}}
    memo: dict[Any, Any] = {}
    assert ENV.compile("steps.a.result + 1").evaluate(plain, memo=memo) == 2
    assert ENV.compile("string(steps.a.result)").evaluate(plain, memo=memo) == "1"
    assert ENV.compile("size(steps)").evaluate(plain, memo=memo) == 2  # whole: converted (once) too
    assert ENV.compile("size(steps) + steps.a.result").evaluate(plain, memo=memo) == 3
    assert calls == [{"result": 1}, plain["steps"]]
