"""telo.values.replica: the value a replay reads back, made without reading the frame."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from telo.errors import TypedFrameUnencodable
from telo.values import CelMap, Timestamp, Uint, decode_frame, encode_frame
from telo.values.replica import UNSUPPORTED, replica

from .conftest import json_values, values

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _same(a: Any, b: Any) -> bool:
    """Equal, of the same types all the way down, and maps in the same member ORDER (iteration order is what a
    body observes of a map; a replay must iterate it as the live execution did)."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is float and math.isnan(a):
        return math.isnan(b)
    if type(a) is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def _containers(v: Any) -> list[int]:
    if type(v) is dict:
        return [id(v)] + [i for x in v.values() for i in _containers(x)]
    if type(v) is list:
        return [id(v)] + [i for x in v for i in _containers(x)]
    return []


def _check(value: Any) -> bool:
    """True when replica answered (rather than leaving the value to the reader)."""
    try:
        frame = encode_frame(value)
    except TypedFrameUnencodable:
        return False  # replica is only ever asked about values whose frame was written
    copy = replica(value)
    if copy is UNSUPPORTED:
        return False
    assert _same(copy, decode_frame(frame)), (copy, frame)
    # the body's own containers: nothing it does to them can reach the value the effect returned, or back
    assert not set(_containers(copy)) & set(_containers(value))
    return True


@_SETTINGS
@given(values)
@example({"b": 1, "a": [2.0, -0.0, float("nan"), Uint(3), b"x", None, True], "c": {"z": "é", "y": 1e300}})
def test_a_replica_is_what_the_frame_reads_back(value: Any) -> None:
    _check(value)


@_SETTINGS
@given(json_values)
def test_json_like_values_are_replicated(value: Any) -> None:
    _check(value)


# What steps mostly return: JSON-like values with ASCII member names — the values replica answers for.
_ascii_keys = st.text(st.characters(max_codepoint=127), max_size=6)
_step_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(), st.text(max_size=8),
              st.binary(max_size=4), st.integers(0, 2**64 - 1).map(Uint)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_ascii_keys, inner, max_size=5)),
    max_leaves=20,
)


@_SETTINGS
@given(_step_values)
def test_step_like_values_are_replicated(value: Any) -> None:
    # every such value is answered, except a map that holds a "$telo" member (written tagged)
    assert _check(value) or "$telo" in repr(value)


@pytest.mark.parametrize("value", [
    {"n": 5, "tag": "s5"},
    {"tag": "s5", "n": 5},  # members reordered as the frame orders them
    [1, 2.5, "x", None, False, {"k": []}],
    -(2**63), -0.0, math.inf, Uint(7), b"\x00",
])
def test_common_values_take_the_fast_way(value: Any) -> None:
    assert _check(value)


@pytest.mark.parametrize("value", [
    {"é": 1, "e": 2},  # non-ASCII member names: UTF-16 order
    {"$telo": "x", "value": 1},  # written as a tagged map
    CelMap([(1, "one")]),
    Timestamp(0, 5),  # frozen, but left to the reader: nothing gained by trusting more types
    [{"a": 1}, {2: "int key"}],
])
def test_anything_else_is_left_to_the_reader(value: Any) -> None:
    encode_frame(value)
    assert replica(value) is UNSUPPORTED
