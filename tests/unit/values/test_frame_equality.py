"""`telo.values.equal`: strict domain equality, CEL type included (what "reads back equal" means in tests)."""

from __future__ import annotations

import math

import pytest

from telo.values import CelMap, Duration, Timestamp, Uint, Url, equal


@pytest.mark.parametrize(
    "a,b",
    [
        (True, 1),
        (1, Uint(1)),
        (1, 1.0),
        (0.0, -0.0),
        (math.nan, 0.0),
        ("1", 1),
        (None, False),
        (b"a", "a"),
        ([1], [Uint(1)]),
        ([1.0], [1.0, 2.0]),
        ({"a": 1}, {"a": 1.0}),
        ({1: "x"}, {Uint(1): "x"}),
        ({1: "x"}, {True: "x"}),
        ({"a": 1}, {"b": 1}),
        ({"a": 1}, CelMap([("a", 1), ("b", 2)])),
        (Timestamp(1), Duration(1)),
        ({"a": [1]}, [("a", [1])]),
    ],
)
def test_values_of_different_types_or_contents_differ(a: object, b: object) -> None:
    assert not equal(a, b)
    assert not equal(b, a)


@pytest.mark.parametrize(
    "a,b",
    [
        (math.nan, -math.nan),
        (-0.0, -0.0),
        (Uint(3), Uint(3)),
        ({"a": [1, {2: math.nan}]}, {"a": [1, {2: math.nan}]}),
        ({"b": 1.0, "a": 2.0}, {"a": 2.0, "b": 1.0}),
        ({"a": 1, 2: True}, CelMap([(2, True), ("a", 1)])),
        (CelMap([(1, "i"), (True, "b")]), CelMap([(True, "b"), (1, "i")])),
        (Url(scheme="https", host="h", query={"a": "1"}), Url(scheme="HTTPS", host="h", query={"a": "1"})),
        (Timestamp(5, 1), Timestamp(5, 1)),
    ],
)
def test_the_same_value_is_equal_whatever_its_representation(a: object, b: object) -> None:
    assert equal(a, b)
    assert equal(b, a)
