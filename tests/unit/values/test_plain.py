"""The plain encoding (spec §6.4): writing keyed on the value, reading keyed on the slot's schema."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telo.errors import PlainValueInvalid, TypedFrameUnencodable
from telo.values.plain import (
    decode_base64url,
    encode_base64url,
    from_plain,
    json_pointer,
    parse_cel_duration,
    to_plain,
)
from telo.values.types import (
    DURATION_MAX_SECONDS,
    INT64_MAX,
    INT64_MIN,
    TIMESTAMP_MAX_SECONDS,
    TIMESTAMP_MIN_SECONDS,
    UINT64_MAX,
    CelMap,
    Duration,
    Timestamp,
    Uint,
)
from telo.values.url import Url

TS = {"type": "string", "format": "date-time"}
DUR = {"type": "string", "format": "duration"}
BYTES = {"type": "string", "contentEncoding": "base64url"}
URL = {"type": "string", "format": "uri"}
UINT = {"type": "integer", "x-telo-type": "uint"}


def schema_for(value: object) -> dict[str, Any]:
    """The schema a slot carrying ``value`` would declare."""
    t = type(value)
    if t is Timestamp:
        return TS
    if t is Duration:
        return DUR
    if t is bytes:
        return BYTES
    if t is Url:
        return URL
    if t is Uint:
        return UINT
    return {"type": {int: "integer", float: "number", str: "string", bool: "boolean"}[t]}


# --- writing ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        (None, None),
        (True, True),
        ("é\u2028", "é\u2028"),
        (0, 0),
        (INT64_MIN, INT64_MIN),
        (Uint(UINT64_MAX), UINT64_MAX),
        (1.5, 1.5),
        (b"", ""),
        (bytes([251, 255, 0]), "-_8A"),
        (Timestamp(1768462200, 1), "2026-01-15T07:30:00.000000001Z"),
        (Timestamp(-1, 500_000_000), "1969-12-31T23:59:59.5Z"),
        (Duration(5400), "5400s"),
        (Duration(-1, -500_000_000), "-1.5s"),
        (Url(scheme="postgres", host="db", password="p@ss"), "postgres://:p%40ss@db"),
        ([1, [Uint(2)], {"a": b"\x00"}], [1, [2], {"a": "AA"}]),
    ],
)
def test_to_plain_scalars_and_containers(value: object, plain: object) -> None:
    written = to_plain(value)
    assert written == plain
    assert type(written) is type(plain)  # Uint is written as a plain int, never a subclass
    json.dumps(written, allow_nan=False)  # JSON-compatible


def test_negative_zero_keeps_its_sign() -> None:
    assert math.copysign(1.0, to_plain(-0.0)) == -1.0


def test_map_keys_written_as_text() -> None:
    assert to_plain({1: "a", Uint(2): "b", "c": "d"}) == {"1": "a", "2": "b", "c": "d"}
    assert to_plain(CelMap([(1, "int"), (True, "bool"), (False, "no")])) == {
        "1": "int",
        "true": "bool",
        "false": "no",
    }


@pytest.mark.parametrize(
    ("value", "path", "match"),
    [
        (math.nan, "", "no plain JSON form"),
        ({"a": [math.inf]}, "/a/0", "no plain JSON form"),
        ([-math.inf], "/0", "no plain JSON form"),
        (INT64_MAX + 1, "", "outside int64"),
        ({"k": INT64_MIN - 1}, "/k", "outside int64"),
        ((1, 2), "", "tuple"),
        ({"a": {1, 2}}, "/a", "set"),
        ([bytearray(b"x")], "/0", "bytearray"),
        ({"x/y~z": object()}, "/x~1y~0z", "object"),
        ("\ud800", "", "Unicode"),
        ({"\ud800x": 1}, "/\ufffdx", "Unicode"),
        ({1.5: "a"}, "/1.5", "map key"),
        ({1: "a", "1": "b"}, "/1", "same text"),
        (CelMap([(True, 1), ("true", 2)]), "/true", "same text"),
        ({INT64_MAX + 1: 0}, f"/{INT64_MAX + 1}", "outside int64"),
    ],
)
def test_to_plain_refuses_values_outside_the_domain(value: object, path: str, match: str) -> None:
    with pytest.raises(TypedFrameUnencodable, match=match) as info:
        to_plain(value)
    assert info.value.path == path
    assert info.value.code == "ERR_TYPED_FRAME_UNENCODABLE"


def test_to_plain_refuses_a_value_containing_itself_but_not_shared_children() -> None:
    loop: list[Any] = [1]
    loop.append({"again": loop})
    with pytest.raises(TypedFrameUnencodable, match="contains itself") as info:
        to_plain(loop)
    assert info.value.path == "/1/again"
    shared = [1]
    assert to_plain([shared, shared]) == [[1], [1]]


def test_json_pointer_escapes() -> None:
    assert json_pointer("", "a/b~c") == "/a~1b~0c"
    assert json_pointer("/x", 3) == "/x/3"


# --- base64url ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["AA==", "AA=", "+/8A", "A", "AB", "AAB", "A A", "é"])
def test_base64url_refusals(text: str) -> None:
    with pytest.raises(ValueError):
        decode_base64url(text)


@given(st.binary(max_size=64))
def test_base64url_round_trip(data: bytes) -> None:
    text = encode_base64url(data)
    assert "=" not in text
    assert decode_base64url(text) == data


# --- CEL durations -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("1h30m", 5400 * 10**9),
        ("1.5h", 5400 * 10**9),
        ("-1.5s", -1_500_000_000),
        ("0.000000001s", 1),
        ("1ns", 1),
        ("300ms", 300_000_000),
        ("1us", 1_000),
        ("1µs", 1_000),
        ("1μs", 1_000),
        ("-2m3s", -123 * 10**9),
        ("+5s", 5 * 10**9),
        (".5s", 500_000_000),
        ("1.s", 10**9),
        ("1s1s", 2 * 10**9),
        ("1m1h", 3660 * 10**9),
        ("0", 0),
        ("-0", 0),
        ("0s", 0),
        ("1.0000000000s", 10**9),  # trailing zeros past the nanosecond are exact, so they read
        ("1.5ms", 1_500_000),
        ("2.000000001s", 2_000_000_001),
        (f"{DURATION_MAX_SECONDS}s", DURATION_MAX_SECONDS * 10**9),
    ],
)
def test_parse_cel_duration(text: str, nanos: int) -> None:
    assert parse_cel_duration(text).total_nanos() == nanos


@pytest.mark.parametrize(
    "text",
    ["", "-", "+", "1h30", "h", "1d", "1.0000000001s", "0.5ns", "1.h.s", ".s", "1 s", " 1s", "1s ", "00",
     "1h-30m", "1S", "inf", "1e3s", f"{DURATION_MAX_SECONDS + 1}s", "١s"],
)
def test_parse_cel_duration_refusals(text: str) -> None:
    with pytest.raises(ValueError):
        parse_cel_duration(text)


def test_parse_cel_duration_extra_units() -> None:
    day = 86_400 * 10**9
    assert parse_cel_duration("1.5d", extra_units={"d": day}).total_nanos() == day * 3 // 2


@given(st.integers(-DURATION_MAX_SECONDS * 10**9, DURATION_MAX_SECONDS * 10**9))
def test_canonical_duration_text_reads_as_a_cel_duration(nanos: int) -> None:
    d = Duration.from_nanos(nanos)
    assert parse_cel_duration(d.to_text()) == d


# --- reading scalars ---------------------------------------------------------------------------------------

_durations = st.integers(-DURATION_MAX_SECONDS * 10**9, DURATION_MAX_SECONDS * 10**9).map(Duration.from_nanos)
_timestamps = st.builds(
    Timestamp, st.integers(TIMESTAMP_MIN_SECONDS, TIMESTAMP_MAX_SECONDS), st.integers(0, 999_999_999)
)
_scalars = st.one_of(
    st.booleans(),
    st.integers(INT64_MIN, INT64_MAX),
    st.integers(0, UINT64_MAX).map(Uint),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(codec="utf-8")),
    st.binary(),
    _timestamps,
    _durations,
    st.builds(Url, scheme=st.sampled_from(["http", "x"]), host=st.text(max_size=5), port=st.none()),
)


@given(_scalars)
def test_scalar_round_trip_through_json(value: object) -> None:
    text = json.dumps(to_plain(value), allow_nan=False)
    back = from_plain(json.loads(text), schema_for(value))
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-15T09:30:00+02:00", Timestamp(1768462200)),
        ("2026-01-15T07:30:00Z", Timestamp(1768462200)),
        ("2026-01-15T07:30:00.000Z", Timestamp(1768462200)),
        ("2026-01-15t01:00:00.5-06:30", Timestamp(1768462200, 500_000_000)),
        ("2026-01-15T07:30:00.123456789z", Timestamp(1768462200, 123456789)),
    ],
)
def test_timestamps_read_with_any_offset(text: str, expected: Timestamp) -> None:
    assert from_plain(text, TS) == expected
    assert from_plain(text, {"x-telo-type": "google.protobuf.Timestamp"}) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-15T07:30:00.1234567891Z",  # a tenth fractional digit is refused, never rounded
        "2026-01-15 07:30:00Z",
        "2026-01-15T07:30:00",
        "2026-02-30T00:00:00Z",
        "0001-01-01T00:00:00+00:01",
        "2026-01-15T24:00:00Z",
    ],
)
def test_timestamps_that_do_not_read(text: str) -> None:
    with pytest.raises(PlainValueInvalid, match="does not read as a timestamp"):
        from_plain(text, TS)


@pytest.mark.parametrize(
    ("value", "schema", "expected"),
    [
        (3, {"type": "integer"}, 3),
        (3.0, {"type": "integer"}, 3),
        (-0.0, {"type": "integer"}, 0),
        (3, {"type": "number"}, 3.0),
        (2**53 + 1, {"type": "number"}, float(2**53)),  # the nearest double, ties to even
        (3, {"type": ["integer", "number"]}, 3),
        (3.0, {"type": ["integer", "number"]}, 3.0),
        (3, {"type": ["string", "integer"]}, 3),
        (5, UINT, Uint(5)),
        (5.0, {"x-telo-type": "uint"}, Uint(5)),
        (UINT64_MAX, UINT, Uint(UINT64_MAX)),
        (7, {"x-telo-type": "double"}, 7.0),
        (7, {"x-telo-type": "int"}, 7),
        ("1h30m", DUR, Duration(5400)),
        ("-1.5s", {"x-telo-type": "google.protobuf.Duration"}, Duration(-1, -500_000_000)),
        ("-_8A", BYTES, bytes([251, 255, 0])),
        ("AA", {"x-telo-type": "bytes"}, b"\x00"),
        ("mailto:x@y", URL, Url(scheme="mailto", path="x@y")),
        ("POSTGRES://db", {"x-telo-type": "Telo.Url"}, Url(scheme="postgres", host="db")),
        ("plain", {"type": "string", "format": "email"}, "plain"),
        ("2026", {"type": "string"}, "2026"),
        (True, {"type": "boolean"}, True),
        (None, {"type": "integer"}, None),  # null is null whatever the slot declares
        (None, TS, None),
    ],
)
def test_read_scalar_by_schema(value: Any, schema: dict[str, Any], expected: object) -> None:
    got = from_plain(value, schema)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("value", "schema", "match"),
    [
        (3.5, {"type": "integer"}, "declares an integer"),
        (2**63, {"type": "integer"}, "outside the range"),
        (9.3e18, {"type": "integer"}, "outside the range"),
        (-1, UINT, "outside the range"),
        (2**64, UINT, "outside the range"),
        ("3", {"type": "integer"}, "declares"),
        (True, {"type": "integer"}, "declares"),
        (3, {"type": "string"}, "declares type 'string'"),
        ("x", {"type": "boolean"}, "declares type 'boolean'"),
        (math.nan, {"type": "number"}, "declares a number"),
        (math.inf, {}, "declares a number"),
        (10**400, {"type": "number"}, "beyond the range of a double"),
        ("1h30", DUR, "does not read as a duration"),
        ("AA==", BYTES, "does not read as bytes"),
        ("+/8A", BYTES, "does not read as bytes"),
        ("AB", BYTES, "does not read as bytes"),
        ("postgres://db#top", URL, "fragment"),
        ("http://h?a=1&a=2", URL, "repeats"),
        ("relative/path", URL, "absolute URL"),
        (5, {"x-telo-type": "Telo.Url"}, "declares an absolute URL"),
        (5, URL, "declares type 'string'"),
        ("\ud800", {"type": "string"}, "Unicode"),
        (2**63, None, "outside the range"),
        ((1, 2), None, "not a JSON value"),
        (1, False, "admits no value"),
    ],
)
def test_read_refusals(value: Any, schema: Any, match: str) -> None:
    with pytest.raises(PlainValueInvalid, match=match) as info:
        from_plain(value, schema)
    assert info.value.path == ""
    assert info.value.code == "ERR_PLAIN_VALUE_INVALID"


# --- reading structure -------------------------------------------------------------------------------------


def test_default_reading_without_a_schema() -> None:
    doc = json.loads('{"i": 1, "f": 1.0, "s": "2026-01-15T07:30:00Z", "l": [true, null, -5], "o": {}}')
    schemas: list[Any] = [None, True, {}]
    for schema in schemas:
        got = from_plain(doc, schema)
        assert got == {"i": 1, "f": 1.0, "s": "2026-01-15T07:30:00Z", "l": [True, None, -5], "o": {}}
        assert type(got["i"]) is int and type(got["f"]) is float and type(got["s"]) is str


ORDER_SCHEMA: dict[str, Any] = {
    "$defs": {
        "when": {"type": "string", "format": "date-time"},
        "line": {
            "type": "object",
            "properties": {
                "sku": {"type": "string"},
                "qty": {"type": "integer"},
                "price": {"type": "number"},
            },
        },
    },
    "definitions": {"id": {"x-telo-type": "uint"}},
    "type": "object",
    "properties": {
        "id": {"$ref": "#/definitions/id"},
        "at": {"$ref": "#/$defs/when", "description": "sibling keywords are kept"},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
        "pair": {"type": "array", "prefixItems": [DUR, BYTES], "items": {"type": "number"}},
        "legacy": {"type": "array", "items": [URL], "additionalItems": UINT},
        "tags": {"type": "object", "additionalProperties": DUR},
        "meta": {"type": "object", "patternProperties": {"^t_": TS}},
        "either": {"anyOf": [{"type": "integer"}, TS, {"type": "string"}]},
        "one": {"oneOf": [{"$ref": "#/$defs/when"}, {"type": "null"}]},
        "both": {"allOf": [{"$ref": "#/$defs/line"}, {"properties": {"extra": DUR}}]},
    },
}


def test_nested_object_and_array_schemas() -> None:
    doc = {
        "id": 7,
        "at": "2026-01-15T09:30:00+02:00",
        "lines": [{"sku": "A", "qty": 2.0, "price": 3}],
        "pair": ["1h", "AQ", 2],
        "legacy": ["http://h", 9, 10],
        "tags": {"ttl": "90s"},
        "meta": {"t_seen": "1970-01-01T00:00:00Z", "other": 4},
        "either": "2026-01-15T07:30:00Z",
        "one": None,
        "both": {"qty": 1, "extra": "1ms"},
        "undeclared": {"n": 1},
    }
    got = from_plain(doc, ORDER_SCHEMA)
    assert got == {
        "id": Uint(7),
        "at": Timestamp(1768462200),
        "lines": [{"sku": "A", "qty": 2, "price": 3.0}],
        "pair": [Duration(3600), b"\x01", 2.0],
        "legacy": [Url(scheme="http", host="h"), Uint(9), Uint(10)],
        "tags": {"ttl": Duration(90)},
        "meta": {"t_seen": Timestamp(0), "other": 4},
        "either": Timestamp(1768462200),
        "one": None,
        "both": {"qty": 1, "extra": Duration(0, 1_000_000)},
        "undeclared": {"n": 1},
    }
    assert type(got["id"]) is Uint and type(got["lines"][0]["qty"]) is int
    assert type(got["pair"][2]) is float and type(got["lines"][0]["price"]) is float


def test_any_of_takes_the_first_alternative_that_reads() -> None:
    schema = ORDER_SCHEMA["properties"]["either"]
    assert from_plain(3, schema) == 3
    assert from_plain("not a time", schema) == "not a time"
    with pytest.raises(PlainValueInvalid, match="none of the anyOf alternatives"):
        from_plain(1.5, schema)


def test_error_paths_point_at_the_node() -> None:
    cases = [
        ({"lines": [{"qty": 1}, {"qty": 1.5}]}, "/lines/1/qty"),
        ({"pair": ["1h", "AA=="]}, "/pair/1"),
        ({"legacy": ["http://h", -1]}, "/legacy/1"),
        ({"tags": {"a/b": "1d"}}, "/tags/a~1b"),
        ({"meta": {"t_x": "yesterday"}}, "/meta/t_x"),
        ({"at": 5}, "/at"),
    ]
    for doc, path in cases:
        with pytest.raises(PlainValueInvalid) as info:
            from_plain(doc, ORDER_SCHEMA)
        assert info.value.path == path, doc
        assert f"(at {path})" in str(info.value)


def test_reader_is_not_a_validator() -> None:
    schema = {
        "type": "object",
        "required": ["missing"],
        "additionalProperties": False,
        "properties": {"n": {"type": "integer", "minimum": 10}, "l": {"type": "array", "items": False}},
    }
    assert from_plain({"n": 1, "extra": 2.5, "l": [1]}, schema) == {"n": 1, "extra": 2.5, "l": [1]}


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        ({"$ref": "other.json#/x"}, "not local"),
        ({"$ref": "#/$defs/nope"}, "does not resolve"),
        ({"$ref": "#/$defs/loop", "$defs": {"loop": {"$ref": "#/$defs/loop"}}}, "circular"),
        ({"$ref": "#/$defs/x", "$defs": {"x": 3}}, "not a schema"),
    ],
)
def test_bad_refs(schema: dict[str, Any], match: str) -> None:
    with pytest.raises(PlainValueInvalid, match=match):
        from_plain(1, schema)


def test_recursive_schema_follows_the_value() -> None:
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"at": TS, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
        "$ref": "#/$defs/node",
    }
    doc = {"at": "1970-01-01T00:00:01Z", "kids": [{"at": "1970-01-01T00:00:02Z", "kids": []}]}
    assert from_plain(doc, tree) == {"at": Timestamp(1), "kids": [{"at": Timestamp(2), "kids": []}]}
    assert from_plain({"kids": [{"kids": [{"at": "1970-01-01T00:00:00Z"}]}]}, tree)["kids"][0]["kids"][0] == {
        "at": Timestamp(0)
    }


def test_ref_with_pointer_escapes() -> None:
    schema: dict[str, Any] = {
        "$defs": {"a/b": TS, "c~d": DUR},
        "type": "array",
        "prefixItems": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/c~0d"}],
    }
    assert from_plain(["1970-01-01T00:00:00Z", "1s"], schema) == [Timestamp(0), Duration(1)]


@given(
    st.recursive(
        _scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=8,
    )
)
def test_nested_round_trip_with_a_derived_schema(value: Any) -> None:
    def derive(v: Any) -> dict[str, Any]:
        if type(v) is list:
            return {"type": "array", "prefixItems": [derive(x) for x in v]}
        if type(v) is dict:
            return {"type": "object", "properties": {k: derive(x) for k, x in v.items()}}
        return schema_for(v)

    back = from_plain(json.loads(json.dumps(to_plain(value))), derive(value))
    assert back == value


def test_unknown_telo_type_is_read_structurally_and_bad_patterns_refused() -> None:
    assert from_plain("/tmp", {"type": "string", "x-telo-type": "Telo.HostPath"}) == "/tmp"
    with pytest.raises(PlainValueInvalid, match="not a regex") as info:
        from_plain({"a": 1}, {"patternProperties": {"(": {}}})
    assert info.value.path == "/a"
