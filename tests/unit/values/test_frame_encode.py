"""The typed-frame writer beyond the vectors: refusals and their paths (§6.1), canonical order (§6.2)."""

from __future__ import annotations

import enum
import math
from collections import OrderedDict
from typing import Any

import pytest

from telo.errors import TypedFrameUnencodable
from telo.values import CelMap, Duration, Timestamp, Uint, decode_frame, encode_frame, equal
from telo.values.canonical import MAX_DEPTH
from telo.values.numbers import double_text


def _refused_at(value: object) -> str:
    with pytest.raises(TypedFrameUnencodable) as info:
        encode_frame(value)
    assert info.value.code == "ERR_TYPED_FRAME_UNENCODABLE"
    assert info.value.data == {"path": info.value.path}
    return info.value.path


class _Float(float):
    pass


class _Int(int):
    pass


class _Str(str):
    __slots__ = ()


class _Dict(dict[str, Any]):
    pass


class _List(list[Any]):
    pass


class _Color(enum.IntEnum):
    RED = 1


class _WithJson:
    def toJSON(self) -> str:  # the JS conversion hook §6.1 names: no help in Python either
        return "x"


@pytest.mark.parametrize(
    "value",
    [
        object(),
        (1, 2),
        (),
        {1, 2},
        frozenset(),
        bytearray(b"x"),
        memoryview(b"x"),
        _Float(1.5),
        _Int(1),
        _Str("a"),
        _Dict(a=1),
        _List([1]),
        OrderedDict(a=1),
        _Color.RED,
        _WithJson(),
        len,
        lambda: None,
        1j,
        ...,
    ],
    ids=lambda v: type(v).__name__,
)
def test_a_value_of_no_cel_type_is_refused_at_the_root(value: object) -> None:
    assert _refused_at(value) == ""


def test_refusal_paths_point_inside_the_value() -> None:
    assert _refused_at([1.0, object()]) == "/1"
    assert _refused_at({"a": {"b~/c": [None, (1,)]}}) == "/a/b~0~1c/1"
    assert _refused_at({"z": 1.0, "a": [True, {"k": _Float(2)}]}) == "/a/1/k"
    assert _refused_at([[], [[], [object()]]]) == "/1/1/0"


def test_paths_inside_tagged_maps_use_the_key_text() -> None:
    assert _refused_at({2: [object()]}) == "/2/0"
    assert _refused_at({True: object()}) == "/true"
    assert _refused_at(CelMap([(Uint(7), {"$telo": object()})])) == "/7/$telo"
    assert _refused_at({"$telo": (1,)}) == "/$telo"


def test_an_int_outside_int64_is_refused() -> None:
    assert encode_frame(2**63 - 1) == '{"$telo":"int","value":"9223372036854775807"}'
    assert encode_frame(-(2**63)) == '{"$telo":"int","value":"-9223372036854775808"}'
    assert _refused_at(2**63) == ""
    assert _refused_at([-(2**63) - 1]) == "/0"
    assert _refused_at({2**64: "x"}) == "/18446744073709551616"


def test_a_map_key_of_no_key_type_is_refused() -> None:
    assert _refused_at({1.5: "x"}) == "/1.5"
    assert _refused_at({None: "x"}) == "/None"
    assert _refused_at({"a": {(1, 2): "x"}}) == "/a/(1, 2)"
    assert _refused_at({b"k": 1}) == "/b'k'"


def test_two_keys_of_one_cel_value_are_refused() -> None:
    # A dict cannot hold both (2 == Uint(2) in Python, so the second replaces the first's value)...
    merged = {2: "a", Uint(2): "b"}
    assert len(merged) == 1
    assert encode_frame(merged) == '{"$telo":"map","value":[[{"$telo":"int","value":"2"},"b"]]}'
    # ... and CelMap refuses to be built with both; a CelMap forced into holding both is refused on write.
    with pytest.raises(ValueError, match="repeated map key"):
        CelMap([(2, "a"), (Uint(2), "b")])
    forced = CelMap([(2, "a")])
    forced._items = {("num", 2): (2, "a"), ("forced", 2): (Uint(2), "b")}
    assert _refused_at({"m": forced}) == "/m/2"


def test_strings_that_are_not_unicode_text_are_refused() -> None:
    assert _refused_at("\ud800") == ""
    assert _refused_at(["ok", "a\udfffb"]) == "/1"
    assert _refused_at({"a\ud800": 1}) == "/a\ufffd"
    assert _refused_at({"x": {"\udc00/": 1}}) == "/x/\ufffd~1"
    assert _refused_at({1: "x", "\ud83d": 2}) == "/\ufffd"
    assert _refused_at("\ud83d\ude00") == ""  # two surrogate code points are not the astral character
    assert encode_frame("\U0001f600") == '"\U0001f600"'


def test_a_value_that_contains_itself_is_refused_where_it_recurs() -> None:
    a: list[Any] = []
    a.append(a)
    assert _refused_at(a) == "/0"
    d: dict[str, Any] = {"x": 1.0}
    d["self"] = d
    assert _refused_at(d) == "/self"
    outer: list[Any] = [1.0, {"k": []}]
    outer[1]["k"].append(outer)
    assert _refused_at(outer) == "/1/k/0"
    m: dict[Any, Any] = {}
    m[3] = [m]
    assert _refused_at(m) == "/3/0"


def test_a_shared_subvalue_is_not_a_cycle() -> None:
    shared = [1.0, "x"]
    assert encode_frame([shared, {"a": shared}]) == '[[1,"x"],{"a":[1,"x"]}]'


def test_nesting_is_bounded_and_everything_written_reads_back() -> None:
    deepest: Any = 1.0
    for _ in range(MAX_DEPTH - 1):
        deepest = [deepest]
    assert equal(decode_frame(encode_frame(deepest)), deepest)
    # a tagged scalar inside the deepest container still fits
    assert decode_frame(encode_frame(_nest([Uint(1)], MAX_DEPTH - 2)))
    with pytest.raises(TypedFrameUnencodable, match="deeper"):
        encode_frame([deepest])
    with pytest.raises(TypedFrameUnencodable, match="deeper"):
        encode_frame(_nest({}, 10_000))


def _nest(value: Any, levels: int) -> Any:
    for _ in range(levels):
        value = [value]
    return value


def test_forced_out_of_range_timestamps_and_durations_are_refused() -> None:
    ts = Timestamp(0)
    object.__setattr__(ts, "seconds", 253402300800)
    assert _refused_at({"t": ts}) == "/t"
    du = Duration(1)
    object.__setattr__(du, "nanos", -1)
    assert _refused_at([du]) == "/0"


def test_exact_types_decide_the_tag() -> None:
    assert encode_frame(True) == "true"
    assert encode_frame(1) == '{"$telo":"int","value":"1"}'
    assert encode_frame(Uint(1)) == '{"$telo":"uint","value":"1"}'
    assert encode_frame(1.0) == "1"
    assert encode_frame([True, 1, Uint(1), 1.0]) == (
        '[true,{"$telo":"int","value":"1"},{"$telo":"uint","value":"1"},1]'
    )


def test_object_members_are_ordered_by_utf16_code_units() -> None:
    # By code point U+1F600 sorts after U+E000 and U+FF5A; by UTF-16 code unit its high surrogate 0xD83D
    # sorts before both. The spec orders by code units.
    value = {"\uff5a": 1.0, "\U0001f600": 2.0, "\ue000": 3.0, "a": 4.0}
    assert encode_frame(value) == '{"a":4,"\U0001f600":2,"\ue000":3,"\uff5a":1}'
    assert list(decode_frame(encode_frame(value))) == ["a", "\U0001f600", "\ue000", "\uff5a"]


def test_tagged_map_pairs_are_ordered_by_the_text_of_each_key_frame() -> None:
    value = CelMap(
        [(Uint(1), "u"), (-5, "i"), (False, "f"), ("\U0001f600", "astral"), ("\uff5a", "bmp"), ("$telo", "t")]
    )
    assert encode_frame(value) == (
        '{"$telo":"map","value":[["$telo","t"],["\U0001f600","astral"],["\uff5a","bmp"],[false,"f"],'
        '[{"$telo":"int","value":"-5"},"i"],[{"$telo":"uint","value":"1"},"u"]]}'
    )


def test_insertion_order_and_representation_do_not_reach_the_text() -> None:
    a = {"b": 1.0, "a": [2, 3]}
    b = {"a": [2, 3], "b": 1.0}
    assert encode_frame(a) == encode_frame(b) == encode_frame(CelMap(b.items()))
    assert encode_frame(Duration.from_nanos(-1_500_000_000)) == encode_frame(Duration(-1, -500_000_000))
    # a CelMap of string keys is the same value as the dict: a JSON object, never a tagged map
    assert encode_frame(CelMap([("x", 1.0)])) == '{"x":1}'
    assert encode_frame(CelMap()) == encode_frame({}) == "{}"


def test_bytes_are_base64url_without_padding() -> None:
    assert encode_frame(b"") == '{"$telo":"bytes","value":""}'
    assert encode_frame(b"\x00") == '{"$telo":"bytes","value":"AA"}'
    assert encode_frame(b"\xfb\xff") == '{"$telo":"bytes","value":"-_8"}'


@pytest.mark.parametrize(
    "x,text",
    [
        (0.0, "0"),
        (-0.0, "0"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e16, "10000000000000000"),
        (123e18, "123000000000000000000"),
        (1.5e-7, "1.5e-7"),
        (1e-6, "0.000001"),
        (1.2e-5, "0.000012"),
        (0.0001, "0.0001"),
        (-2.5e-300, "-2.5e-300"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (5e-324, "5e-324"),
        (2.0**53, "9007199254740992"),
        (0.1 + 0.2, "0.30000000000000004"),
        (-1234.5, "-1234.5"),
    ],
)
def test_double_text_is_ecmascript_number_to_string(x: float, text: str) -> None:
    assert double_text(x) == text
    if not (x == 0 and math.copysign(1, x) < 0):
        assert encode_frame(x) == text


class _Key(enum.StrEnum):
    a = "a"


def test_a_key_equal_to_a_known_key_but_not_a_str_is_still_refused() -> None:
    # The writers remember the shapes of dicts they have written; a key that merely EQUALS a remembered one
    # (a str subclass, a StrEnum member) must not pass for it.
    assert encode_frame({"a": 1.0}) == '{"a":1}'
    assert _refused_at({_Str("a"): 1.0}) == "/a"
    assert _refused_at([{_Key.a: 1.0}]) == "/0/a"


def test_writing_never_changes_the_value() -> None:
    value = {"n": 2, "x": 2.0, "items": [1, 2.5, {"u": Uint(3)}], "m": {1: [1.0]}}
    before = repr(value)
    assert encode_frame(value) == (
        '{"items":[{"$telo":"int","value":"1"},2.5,{"u":{"$telo":"uint","value":"3"}}],'
        '"m":{"$telo":"map","value":[[{"$telo":"int","value":"1"},[1]]]},"n":{"$telo":"int","value":"2"},"x":2}'
    )
    assert repr(value) == before
    assert type(value["x"]) is float
