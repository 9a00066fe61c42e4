"""telo.values.legacy: plain JSON for a reader that predates the typed frame (journal compat ``legacy``).

The rule it must keep: a value is written only if plain JSON gives it back with its CEL type — to the upstream
reader (JSON as it stands) and to telo's legacy reader (``decode_stored`` with no codec version) — and is
refused, naming the node and its type, otherwise. Never a third outcome: written as something else.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telo.errors import LegacyUnencodable, TypedFrameUnencodable
from telo.journal.stored import decode_stored
from telo.values import CelMap, Duration, Timestamp, Uint, Url, decode_frame, encode_frame
from telo.values.legacy import encode_legacy

from .conftest import json_values, texts, values

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_plain_scalars = st.one_of(st.none(), st.booleans(), texts, st.floats(allow_nan=False, allow_infinity=False))
carriable = st.recursive(_plain_scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                                 st.dictionaries(texts, kids, max_size=4)),
                         max_leaves=20)


def _same(a: Any, b: Any) -> bool:
    """Equal, of the same types all the way down, maps in the same member order, -0.0 told from 0.0."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def _carries(value: Any, bigint: bool) -> bool:
    """Independently of the writer: does plain JSON carry ``value`` back with its types?"""
    t = type(value)
    if value is None or t in (bool, str):
        return True
    if t is float:
        return math.isfinite(value)
    if t is int:
        return bigint
    if t is list:
        return all(_carries(x, bigint) for x in value)
    if t is dict or t is CelMap:
        keys = list(value)
        if any(type(k) is not str for k in keys):
            return False
        if keys == ["$bigint"] and type(value["$bigint"]) is str:
            return False
        return all(_carries(value[k], bigint) for k in keys)
    return False  # uint, bytes, timestamp, duration, Telo.Url


def _check(value: Any, bigint: bool) -> None:
    try:
        frame = encode_frame(value)
    except TypedFrameUnencodable:  # outside the CEL domain: refused as the frame refuses it, never written
        with pytest.raises(TypedFrameUnencodable):
            encode_legacy(value, bigint=bigint)
        return
    try:
        text = encode_legacy(value, bigint=bigint)
    except LegacyUnencodable as exc:
        assert not _carries(value, bigint), value
        assert exc.code == "ERR_JOURNAL_LEGACY_UNENCODABLE" and exc.data["type"] in (
            "int", "uint", "bytes", "double", "map", "google.protobuf.Timestamp", "google.protobuf.Duration",
            "Telo.Url")
        return
    assert _carries(value, bigint), value
    typed = decode_frame(frame)
    assert _same(decode_stored(text, None, run="r", path="p"), typed), (value, text)
    assert json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":")) == text  # the file keeps it
    if not bigint:  # what the upstream reader takes as it stands: every number a JS number
        assert _same(json.loads(text, parse_int=float), typed)


@_SETTINGS
@given(st.one_of(values, json_values, carriable), st.booleans())
def test_written_exactly_when_plain_json_carries_it_back(value: Any, bigint: bool) -> None:
    _check(value, bigint)


@pytest.mark.parametrize(("value", "pointer", "type_name"), [
    ({"n": 3}, "/n", "int"),
    ([Uint(3)], "/0", "uint"),
    (b"\x00", "", "bytes"),
    ({"at": Timestamp(0, 0)}, "/at", "google.protobuf.Timestamp"),
    ({"wait": [Duration(1, 0)]}, "/wait/0", "google.protobuf.Duration"),
    ({"u": Url.parse("https://x.example/")}, "/u", "Telo.Url"),
    ({"x": math.nan}, "/x", "double"),
    ([math.inf], "/0", "double"),
    ({"m": {1: "a"}}, "/m", "map"),
    ({"m": CelMap([(True, 1)])}, "/m", "map"),
    ({"a/b~": {"$bigint": "3"}}, "/a~1b~0", "map"),
    ({"$telo": {"$bigint": "1"}}, "/$telo", "map"),
])
def test_refusals_name_the_node_and_its_type(value: Any, pointer: str, type_name: str) -> None:
    with pytest.raises(LegacyUnencodable) as caught:
        encode_legacy(value)
    assert caught.value.data == {"path": pointer, "type": type_name}
    assert type_name in caught.value.message and f"at {pointer or '/'} inside the value" in caught.value.message


def test_what_it_writes() -> None:
    assert encode_legacy({"b": [1.5, None, True, "x"], "a": {"$telo": "int", "value": "1"}, "z": -0.0,
                          "e": 1e-7, "w": 3.0, "big": 1e21}) == (
        '{"a":{"$telo":"int","value":"1"},"b":[1.5,null,true,"x"],"big":1e+21,"e":1e-07,"w":3,"z":-0.0}')
    assert encode_legacy({"n": [3, {"k": -4}]}, bigint=True) == '{"n":[{"$bigint":"3"},{"k":{"$bigint":"-4"}}]}'
    assert encode_legacy("ünï \x01") == '"ünï \\u0001"'
    with pytest.raises(TypedFrameUnencodable) as caught:  # outside the domain: the frame's own refusal
        encode_legacy({"x": object()})
    assert not isinstance(caught.value, LegacyUnencodable) and caught.value.code == "ERR_TYPED_FRAME_UNENCODABLE"
