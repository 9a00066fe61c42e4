"""The strict typed-frame reader beyond the vectors: refusal order, payload grammar, versions (§6.2, §6.3)."""

from __future__ import annotations

import math

import pytest

from telo.errors import TypedFrameUndecodable
from telo.values import CelMap, Timestamp, Uint, decode_frame, encode_frame, equal
from telo.values.canonical import MAX_DEPTH


def _refused_at(text: str, *, version: int = 2) -> str:
    with pytest.raises(TypedFrameUndecodable) as info:
        decode_frame(text, version=version)
    return info.value.path


def _tag(tag: str, payload: str) -> str:
    return f'{{"$telo":"{tag}","value":{payload}}}'


@pytest.mark.parametrize(
    "text",
    ["", " ", "NaN", "[Infinity]", '{"a":-Infinity}', "[1,]", "{'a':1}", "01", "1.", ".5", "+1", "[1] x",
     '"\x01"', '"\\x"', "\ufeff1", "tru", "[1 2]", '{"a" 1}', '"\\ud800', "1e", "--1", "0x10"],
)
def test_text_that_is_not_json_is_refused_at_the_empty_pointer(text: str) -> None:
    assert _refused_at(text) == ""


def test_json_whitespace_and_member_order_are_free() -> None:
    assert decode_frame(' \t\r\n{ "value" : "7" ,\n "$telo" : "int" } ') == 7
    assert equal(decode_frame('[ 1 , { "b" : null , "a" : true } ]'), [1.0, {"a": True, "b": None}])


def test_every_json_number_reads_as_the_nearest_double() -> None:
    for text, expected in [
        ("1", 1.0), ("-0", -0.0), ("-0.0", -0.0), ("1E2", 100.0), ("1e-7", 1e-7), ("0.0000001", 1e-7),
        ("9007199254740993", 9007199254740992.0),  # halfway: ties to even
        ("1" + "0" * 400 + "e-400", 1.0),
        ("2.4703282292062328e-324", 5e-324), ("2.4703282292062327e-324", 0.0),
    ]:
        value = decode_frame(text)
        assert type(value) is float
        assert equal(value, expected), text
    assert math.copysign(1.0, decode_frame("-0")) < 0


def test_a_number_beyond_a_double_is_refused_at_its_pointer() -> None:
    assert _refused_at("1e400") == ""
    assert _refused_at("[0, -1e309]") == "/1"
    assert _refused_at('{"a":{"b":[' + "9" * 400 + "]}}") == "/a/b/0"
    assert _refused_at("1" + "0" * 5000) == ""  # beyond CPython's int-text limit: still just too large
    assert decode_frame("1.7976931348623157e308") == 1.7976931348623157e308


def test_the_first_repeated_member_in_text_order_comes_before_any_value() -> None:
    # a value refusal earlier in the text loses to a repeat later in it
    assert _refused_at('[{"$telo":"bad","value":1},{"a":1,"a":2}]') == "/1/a"
    assert _refused_at('["\\ud800",{"a":1,"a":2}]') == "/1/a"
    assert _refused_at('[1e999,{"a":1,"a":2}]') == "/1/a"
    # text order: the inner repeat is written before the outer one
    assert _refused_at('{"a":{"x":1,"x":2},"a":3}') == "/a/x"
    assert _refused_at('{"a":1,"a":{"x":1,"x":2}}') == "/a"
    assert _refused_at('{"b":[{"c":1,"c":1}],"b":2}') == "/b/0/c"
    # repeats inside a tag's payload and a repeated key with a surrogate
    assert _refused_at(_tag("map", '[[{"k":1,"k":2},1]]')) == "/value/0/0/k"
    assert _refused_at('{"\\ud800":1,"\\ud800":2}') == "/\ufffd"
    assert _refused_at('{"~/":1,"~/":2}') == "/~0~1"


def test_tag_shape_refusals() -> None:
    assert _refused_at('{"$telo":null,"value":"1"}') == ""
    assert _refused_at('[{"$telo":["int"],"value":"1"}]') == "/0"
    assert _refused_at('{"$telo":"int","valu":"1"}') == ""
    assert _refused_at('{"$telo":"int"}') == ""
    assert _refused_at('{"$telo":"Int","value":"1"}') == "/$telo"
    assert _refused_at('{"x":{"$telo":"\\ud800","value":"1"}}') == "/x/$telo"
    assert _refused_at('{"$telo":"map","value":[],"extra":1}') == ""


@pytest.mark.parametrize(
    "tag,payload",
    [
        ("int", '"+1"'), ("int", '" 1"'), ("int", '"1.0"'), ("int", '"1e3"'), ("int", '"٣"'), ("int", '""'),
        ("int", '"-9223372036854775809"'), ("int", '"0x1"'), ("int", "null"),
        ("uint", '"00"'), ("uint", '"-0"'), ("uint", '"1u"'), ("uint", "1"), ("uint", '"' + "9" * 5000 + '"'),
        ("double", '"nan"'), ("double", '"inf"'), ("double", '"0"'), ("double", '"-0.0"'), ("double", "1.5"),
        ("double", '"+Infinity"'),
        ("bytes", '"A"'), ("bytes", '"AR"'), ("bytes", '"AAA="'), ("bytes", '"A A"'), ("bytes", "[]"),
        ("google.protobuf.Timestamp", '"2026-01-15T07:30:00"'),
        ("google.protobuf.Timestamp", '"2026-01-15t07:30:00Z"'),
        ("google.protobuf.Timestamp", '"2026-02-30T07:30:00Z"'),
        ("google.protobuf.Timestamp", '"2026-01-15T24:00:00Z"'),
        ("google.protobuf.Timestamp", '"2026-01-15T07:30:00.Z"'),
        ("google.protobuf.Timestamp", '"10000-01-01T00:00:00Z"'),
        ("google.protobuf.Timestamp", "0"),
        ("google.protobuf.Duration", '"-0s"'), ("google.protobuf.Duration", '"01s"'),
        ("google.protobuf.Duration", '"1.0000000001s"'), ("google.protobuf.Duration", '"1"'),
        ("google.protobuf.Duration", '"-315576000001s"'), ("google.protobuf.Duration", '".5s"'),
        ("Telo.Url", '"postgres://db:05432"'), ("Telo.Url", '"db.internal"'), ("Telo.Url", "null"),
        ("map", '"[]"'), ("map", "null"),
    ],
)
def test_a_payload_not_in_its_canonical_form_is_refused_at_value(tag: str, payload: str) -> None:
    assert _refused_at(_tag(tag, payload)) == "/value"
    assert _refused_at(f'{{"w":[{_tag(tag, payload)}]}}') == "/w/0/value"


def test_canonical_payload_edges_read() -> None:
    assert decode_frame(_tag("bytes", '"AA"')) == b"\x00"
    assert decode_frame(_tag("bytes", '"AQ"')) == b"\x01"
    assert decode_frame(_tag("bytes", '"AAE"')) == b"\x00\x01"
    assert decode_frame(_tag("int", '"-1"')) == -1
    assert type(decode_frame(_tag("uint", '"0"'))) is Uint
    assert math.isnan(decode_frame(_tag("double", '"NaN"')))


def test_map_refusals_and_their_paths() -> None:
    int2 = _tag("int", '"2"')
    assert _refused_at(_tag("map", "[]")) == "/value"  # the empty map's frame is {}
    assert _refused_at(_tag("map", '[["$telo",1],["a",{"$telo":"int","value":"01"}]]')) == "/value/1/1/value"
    assert _refused_at(_tag("map", "[[1,2,3]]")) == "/value/0"
    assert _refused_at(_tag("map", '[{"k":1}]')) == "/value/0"
    assert _refused_at(_tag("map", "[[null,1]]")) == "/value/0/0"
    assert _refused_at(_tag("map", '[[{"a":1},1]]')) == "/value/0/0"
    assert _refused_at(_tag("map", '[[{"$telo":"double","value":"NaN"},1]]')) == "/value/0/0"
    assert _refused_at(_tag("map", f'[[{_tag("map", f"[[{int2},1]]")},1]]')) == "/value/0/0"
    assert _refused_at(_tag("map", '[[{"$telo":"int","value":"01"},1]]')) == "/value/0/0/value"
    assert _refused_at(_tag("map", f'[[{int2},1],[true,[1e999]]]')) == "/value/1/1/0"
    assert _refused_at(_tag("map", f'[[{int2},1],["\\ud800",1]]')) == "/value/1/0"
    assert _refused_at(_tag("map", f'[[{int2},1],[2,1]]')) == "/value/1/0"  # 2 is a double
    assert _refused_at(_tag("map", '[["$telo",1],["$telo",2]]')) == "/value/1/0"


def test_maps_read_as_dict_unless_their_keys_collide_in_python() -> None:
    int1, uint1 = _tag("int", '"1"'), _tag("uint", '"1"')
    value = decode_frame(_tag("map", f'[[true,"t"],[{int1},"i"]]'))
    assert type(value) is CelMap
    assert value[True] == "t" and value[1] == "i"
    value = decode_frame(_tag("map", f'[["$telo","x"],[{uint1},"u"]]'))
    assert type(value) is dict
    assert value == {"$telo": "x", Uint(1): "u"}


def test_unpaired_surrogates_are_refused_where_they_occur() -> None:
    assert _refused_at('["a","b\\udc00"]') == "/1"
    assert _refused_at('{"k":{"x\\ud83d":0}}') == "/k/x\ufffd"
    assert _refused_at('"\\udc00\\ud800"') == ""  # a low then a high surrogate is no pair
    assert _refused_at('["\ud800"]') == "/0"  # a literal surrogate code point in the str, too
    assert decode_frame('"\\ud83d\\ude00"') == "\U0001f600"


def test_codec_version_1_reads_millisecond_timestamps() -> None:
    v1 = _tag("google.protobuf.Timestamp", '"2026-01-15T07:30:00.000Z"')
    assert decode_frame(v1, version=1) == Timestamp(1768462200)
    assert _refused_at(v1) == "/value"
    assert decode_frame(_tag("google.protobuf.Timestamp", '"2026-01-15T07:30:00.250Z"'), version=1) == Timestamp(
        1768462200, 250_000_000
    )
    assert _refused_at(_tag("google.protobuf.Timestamp", '"2026-01-15T07:30:00Z"'), version=1) == "/value"
    assert _refused_at(_tag("google.protobuf.Timestamp", '"2026-01-15T07:30:00.25Z"'), version=1) == "/value"
    # other tags read the same under both versions
    assert decode_frame(_tag("google.protobuf.Duration", '"1.5s"'), version=1) == decode_frame(
        _tag("google.protobuf.Duration", '"1.5s"')
    )
    with pytest.raises(ValueError, match="version"):
        decode_frame("1", version=3)


def test_nesting_deeper_than_the_limit_is_refused_at_the_empty_pointer() -> None:
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert decode_frame(ok) is not None
    assert _refused_at("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)) == ""
    assert _refused_at('{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1)) == ""
    assert _refused_at("[" * 100_000 + "]" * 100_000) == ""
    assert _refused_at("[" * 100_000) == ""
    # depth counts tags: a tagged int inside the deepest array is one level too many
    assert _refused_at("[" * MAX_DEPTH + _tag("int", '"1"') + "]" * MAX_DEPTH) == ""
    # the depth refusal comes before a repeat, which comes before values
    deep_after_repeat = '[{"a":1,"a":2},' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "]"
    assert _refused_at(deep_after_repeat) == ""


def test_a_non_str_frame_is_a_programming_error() -> None:
    with pytest.raises(TypeError):
        decode_frame(b"1")  # type: ignore[arg-type]


def test_every_canonical_frame_is_read_then_written_back_identically() -> None:
    for text in ['{"$telo":"map","value":[["$telo",{"$telo":"map","value":[[false,[]]]}]]}', '{"":{"":""}}']:
        assert encode_frame(decode_frame(text)) == text
