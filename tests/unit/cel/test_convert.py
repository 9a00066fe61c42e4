"""Value conversion through the CEL library, both ways, exact (spec §6; telo.cel.convert)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from telo.cel import CelEvalError, Scope
from telo.values import CelMap, Duration, Timestamp, Uint, Url, equal
from telo.values.types import INT64_MAX, INT64_MIN, TIMESTAMP_MAX_SECONDS, TIMESTAMP_MIN_SECONDS, UINT64_MAX

from .support import ENV, ev, values

# hypothesis renders the recursive value strategy's repr while generating; it is long, and harmless
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

EDGE_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    INT64_MIN,
    INT64_MAX,
    Uint(0),
    Uint(UINT64_MAX),
    Uint(2**63),
    0.0,
    -0.0,
    math.nan,
    math.inf,
    -math.inf,
    5e-324,
    "",
    "é😀\u2028\x00",
    b"",
    b"\x00",
    b"a\x00b\x00",
    bytes(range(256)),
    Timestamp(0, 0),
    Timestamp(1_767_225_600, 123_456_789),
    Timestamp(TIMESTAMP_MIN_SECONDS, 0),
    Timestamp(TIMESTAMP_MIN_SECONDS, 1),
    Timestamp(TIMESTAMP_MAX_SECONDS, 999_999_999),
    Timestamp(-1, 500_000_000),
    Duration(0, 0),
    Duration(-1, -5),
    Duration(0, -1),
    Duration(-90061, -1),
    Duration(315_576_000_000, 999_999_999),
    Duration(-315_576_000_000, -999_999_999),
    [],
    {},
    [1, Uint(1), 1.0, True, "1", b"1"],
    {"a": {"b": [Timestamp(5, 7), Duration(-3, -9)]}},
    CelMap([(1, "int"), (True, "bool")]),
    CelMap([(0, "int"), (False, "bool"), (Uint(1), "uint"), (True, {"nested": CelMap([(1, 1), (True, 2)])})]),
    {Uint(1): "u", 2: "i", False: "b", "s": [Uint(0)]},
    {-1: Timestamp(1, 1), INT64_MIN: None},
    Url.parse("postgres://app:p%40ss@db.internal:5432/orders?sslmode=require&a=b"),
    Url.parse("file:///etc/hosts"),
    Url.parse("mailto:x%40y"),
    Url.parse("http://[::1]:0"),
    [Url.parse("https://a.b/p"), {"u": Url.parse("s3://bucket")}],
]


@pytest.mark.parametrize("value", EDGE_VALUES, ids=repr)
def test_round_trip_edge_values(value: Any) -> None:
    assert equal(ev("x", x=value), value)


@pytest.mark.parametrize("value", EDGE_VALUES, ids=repr)
def test_round_trip_nested_in_list_and_map(value: Any) -> None:
    assert equal(ev("[x]", x=value), [value])
    assert equal(ev("{'k': [x, y]}", x=value, y=1), {"k": [value, 1]})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_round_trip_hypothesis(value: Any) -> None:
    assert equal(ev("x", x=value), value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_round_trip_hypothesis_plain_mapping_scope(value: Any) -> None:
    program = ENV.compile("[x, {'k': x}]")
    assert equal(program.evaluate({"x": value}), [value, {"k": value}])


def test_types_stay_distinct_inside_cel() -> None:
    assert ev("type(x) == uint && type(y) == int", x=Uint(1), y=1) is True
    assert ev("type(x) == bool", x=True) is True
    assert ev("type(x) == double", x=1.0) is True
    assert ev("type(x) == google.protobuf.Timestamp && type(y) == google.protobuf.Duration",
              x=Timestamp(1, 1), y=Duration(1, 1)) is True
    assert ev("x.map(k, type(k) == uint)", x={Uint(7): 1}) == [True]
    assert ev("size(x) == 2 && x[1] == 'int' && x[true] == 'bool'", x=CelMap([(1, "int"), (True, "bool")])) is True


def test_results_keep_cel_types() -> None:
    assert type(ev("1u + 2u")) is Uint
    assert ev("[1u, 2]") == [Uint(1), 2] and type(ev("[1u, 2]")[1]) is int
    assert ev("{1u: 'a'}") == {Uint(1): "a"} and type(next(iter(ev("{1u: 'a'}")))) is Uint
    assert type(ev("true")) is bool
    assert ev("b'a\\x00b'") == b"a\x00b"
    assert math.copysign(1.0, ev("-0.0")) == -1.0


def test_timestamps_keep_nanoseconds_top_level_and_nested() -> None:
    text = "timestamp('2026-01-15T07:30:00.123456789Z')"
    exact = Timestamp(1_768_462_200, 123_456_789)
    assert ev(text) == exact
    assert ev(f"[{text}]") == [exact]
    assert ev(f"{{'a': {{'b': [{text}]}}}}") == {"a": {"b": [exact]}}
    assert ev("x + duration('1ns')", x=Timestamp(0, 999_999_999)) == Timestamp(1, 0)
    assert ev("[duration('-1.000000001s')]") == [Duration(-1, -1)]


def test_url_is_a_real_type() -> None:
    assert ev("url('https://a.b:8080/p').port == 8080") is True
    assert ev("x.host + x.path", x=Url.parse("https://a.b/p")) == "a.b/p"
    assert ev("has(x.port)", x=Url.parse("https://a.b/p")) is False
    assert ev("x.query.sslmode", x=Url.parse("postgres://db/x?sslmode=require")) == "require"
    assert ev("[url('HTTPS://a.b?b=1&a=2')]") == [Url.parse("https://a.b?a=2&b=1")]
    assert ev("string(x)", x=Url.parse("HTTPS://a.b?b=1&a=2")) == "https://a.b?a=2&b=1"


def test_url_member_typo_is_a_compile_error() -> None:
    from telo.cel import CelCompileError, CelEnvironment

    env = CelEnvironment({"u": "Telo.Url"})
    assert env.compile("u.host").evaluate({"u": Url.parse("https://a.b")}) == "a.b"
    with pytest.raises(CelCompileError, match="nosuch"):
        env.compile("u.nosuch")
    with pytest.raises(CelCompileError, match="nosuch"):
        CelEnvironment().compile("url('https://a.b').nosuch")


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ((1, 2), "x"),
        ({"a": [1, object()]}, r"x.a\[1\]"),
        (2**63, "x"),
        ({1.5: 1}, "x"),
        (CelMap([("ok", {"k": {1, 2}})]), "x.ok.k"),
        ("\ud800", "x"),
    ],
    ids=repr,
)
def test_scope_value_outside_the_domain_raises(value: Any, where: str) -> None:
    with pytest.raises(CelEvalError, match=where) as info:
        ev("x", x=value)
    assert info.value.code == "ERR_CEL_EVAL"


@pytest.mark.parametrize("text", ["optional.of(1)", "optional.none()", "[optional.of(1)]", "type(1)", "[int]"])
def test_result_outside_the_domain_raises(text: str) -> None:
    with pytest.raises(CelEvalError, match="not in the value domain") as info:
        ev(text)
    assert info.value.code == "ERR_CEL_EVAL"


def test_unread_scope_values_are_never_converted() -> None:
    # An unconvertible value nobody reads does not fail an expression that does not read it.
    scope = Scope(inputs={"ok": 1, "bad": object()}, steps={}).with_step_result("a", object())
    assert ENV.compile("inputs.ok + 1").evaluate(scope) == 2
    with pytest.raises(CelEvalError, match=r"inputs.bad"):
        ENV.compile("inputs.bad").evaluate(scope)
    with pytest.raises(CelEvalError, match=r"steps.a.result"):
        ENV.compile("size(steps)").evaluate(scope)


def test_url_struct_literal_and_equality() -> None:
    assert ev("Telo.Url{scheme: 'https', host: 'a.b', port: 80}") == Url.parse("https://a.b:80")
    assert ev("Telo.Url{scheme: 'https', host: 'a.b'} == url('https://a.b')") is True
    with pytest.raises(CelEvalError, match=r"Telo\.Url whose members make no URL"):
        ev("Telo.Url{scheme: 'https', port: 80}")  # a port needs a host
