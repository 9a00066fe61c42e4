"""One test per known trap of cel-expr-python 0.1.3 (cel-notes.md, plus the ones found while wrapping it).

Each test first pins the RAW library behaviour (through ``telo.cel._lib``, the package's one import of the
library), so a library upgrade that fixes a trap shows up here, then checks telo's wrapper.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from telo.cel import CelCompileError, CelEnvironment, CelEvalError, _lib
from telo.cel.convert import to_lib
from telo.cel.urltype import POOL
from telo.values import CelMap, Duration, Timestamp, Uint

from .support import ENV, ev

RAW = _lib.new_env({"x": _lib.DYN}, _lib.standard_extensions(), POOL)


def raw(text: str, **data: Any) -> _lib.CelValue:
    return RAW.compile(text).eval(data=data)


def test_trap_bytes_cut_at_nul() -> None:
    assert raw("size(x)", x=b"a\x00b").value() == 1  # the library reads bytes up to the first NUL
    assert raw("size(x)", x=bytearray(b"a\x00b")).value() == 3  # a bytearray is read whole
    assert ev("size(x)", x=b"a\x00b") == 3
    assert ev("x", x=b"\x00\x00") == b"\x00\x00"


def test_trap_strings_cut_at_nul() -> None:
    # Not in cel-notes: a str is cut at its first NUL too, as a value and as a map key.
    assert raw("size(x)", x="a\x00b").value() == 1
    assert raw("x.map(k, size(k))", x={"k\x00z": 1}).value()[0].value() == 1
    assert ev("size(x)", x="a\x00b") == 3  # passed as a google.protobuf.StringValue
    assert ev("x", x={"k\x00z": "v\x00w"}) == {"k\x00z": "v\x00w"}
    assert ev("x['k\\x00z']", x={"k\x00z": 1}) == 1  # a NUL in a selected key: the variable is passed whole


def test_trap_errors_returned_as_values() -> None:
    result = raw("1 / 0")
    assert result.type() == _lib.ERROR and result.value() == "INVALID_ARGUMENT: divide by zero"
    with pytest.raises(CelEvalError, match="divide by zero") as info:
        ev("1 / 0")
    assert info.value.code == "ERR_CEL_EVAL"
    assert ev("'INVALID_ARGUMENT: x'") == "INVALID_ARGUMENT: x"  # a string result is not mistaken for an error


def test_trap_dyn_parameter_functions_only_via_cel_extension() -> None:
    # A dyn-parameter function declared through NewEnv(functions=...) type-checks but never dispatches; ours are
    # declared through cel.CelExtension and dispatch on any argument type.
    assert ev("default(x, 1)", x=None) == 1
    assert ev("json(x)", x={"a": [1, "b"]}) == '{"a":[1,"b"]}'
    assert ev("coalesce([null, x])", x=2.5) == 2.5


def test_trap_wkt_inputs_datetime_rejected() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    assert raw("x", x=now).type() == _lib.ERROR  # "Non-CEL value type ... datetime"
    assert raw("x", x=datetime.timedelta(seconds=1)).type() == _lib.ERROR
    assert ev("x", x=Timestamp(1_767_225_600, 1)) == Timestamp(1_767_225_600, 1)  # protobuf Timestamp, exact
    assert ev("x", x=Duration(-1, -1)) == Duration(-1, -1)
    with pytest.raises(CelEvalError, match="datetime"):
        ev("x", x=now)  # a datetime is not a domain value either


def test_trap_uint_map_keys() -> None:
    # A protobuf message is unhashable, so it cannot be a dict key; uint keys come out as plain ints.
    with pytest.raises(TypeError):
        {_lib.UInt64Value(value=1): "a"}
    assert type(next(iter(raw("{1u: 'a'}").value()))) is int
    assert ev("x.map(k, type(k) == uint)", x={Uint(1): "a"}) == [True]  # in: a hashable stand-in message
    out = ev("{1u: 'a', 2: 'b'}")
    assert out == {Uint(1): "a", 2: "b"} and {type(k) for k in out} == {Uint, int}  # out: exact
    assert ev("x", x={Uint(2**64 - 1): 1}) == {Uint(2**64 - 1): 1}  # printed -1u by the library


def test_trap_true_and_one_keys_collapse() -> None:
    # CEL keeps true and 1 apart; Python's dict does not, in both directions.
    assert len(raw("{1: 'a', true: 'b'}").value()) == 1
    both = CelMap([(1, "a"), (True, "b")])
    assert ev("size(x) == 2 && x[1] == 'a' && x[true] == 'b'", x=both) is True
    assert ev("x", x=both) == both  # re-read as [key, value] pairs (a deterministic expression)
    assert ev("{0: 'a', false: {1: 1, true: 2}}") == CelMap([(0, "a"), (False, CelMap([(1, 1), (True, 2)]))])
    with pytest.raises(CelEvalError, match="not deterministic"):
        ev("[nowMillis(), {1: 'a', true: 'b'}]")  # a second evaluation would read another clock


def test_trap_nested_timestamps_at_microseconds() -> None:
    nested = raw("[timestamp('2026-01-01T00:00:00.123456789Z')]").value()[0].value()
    assert nested.microsecond == 123456  # datetime: the nanoseconds are gone
    assert ev("[timestamp('2026-01-01T00:00:00.123456789Z')]") == [Timestamp(1_767_225_600, 123_456_789)]
    assert ev("{'d': [duration('0.000000001s')]}") == {"d": [Duration(0, 1)]}


def test_trap_opaque_map_type_string() -> None:
    opaque = _lib.new_env({"m": _lib.message_type("map(string, dyn)")}, [], POOL)  # cel.Type('map(string, dyn)')
    with pytest.raises(RuntimeError, match="cannot be the operand of a select"):
        opaque.compile("m.a")
    assert CelEnvironment({"m": "map"}).compile("m.a").evaluate({"m": {"a": 1}}) == 1  # built with Type.Map


def test_trap_parser_limit_32_operators() -> None:
    ok = " + ".join(["'a'"] * 32)
    assert ev(ok) == "a" * 32
    with pytest.raises(CelCompileError, match="Exceeded max recursion depth of 32") as info:
        ENV.compile(" + ".join(["'a'"] * 33), source="m.yaml", line=4, column=7)
    assert info.value.hint is not None and "join('')" in info.value.hint
    assert (info.value.data["line"], info.value.data["column"]) == (4, 7)  # no position: the expression's start
    assert ev("[" + ", ".join(["'a'"] * 40) + "].join('')") == "a" * 40  # the documented alternative


def test_trap_nesting_beyond_32_fails() -> None:
    with pytest.raises((CelCompileError, CelEvalError), match="recursion"):
        ev("(" * 40 + "1" + ")" * 40)


def test_trap_parse_error_text_to_line_column() -> None:
    with pytest.raises(RuntimeError, match=r"<input>:2:10: Syntax error"):
        RAW.compile("x.\n  nosuch(")
    with pytest.raises(CelCompileError) as info:
        ENV.compile("x.\n  nosuch(", source="m.yaml", line=10, column=5)
    assert info.value.data["file"] == "m.yaml"
    assert (info.value.data["line"], info.value.data["column"]) == (11, 10)  # a later line: its own column
    assert info.value.data["errors"][0]["at"] == [2, 10]


def test_trap_function_arguments_are_lossy() -> None:
    # A Python function receives uint as int and timestamps as microsecond datetimes, and may not return a
    # datetime; json() documents the microseconds, default()/coalesce() are rewritten to stay in CEL.
    assert ev("json(x)", x=Timestamp(0, 123_456_789)) == '"1970-01-01T00:00:00.123456Z"'
    assert ev("default(null, x)", x=Timestamp(0, 123_456_789)) == Timestamp(0, 123_456_789)
    assert type(ev("coalesce([null, x])", x=Uint(3))) is Uint


def test_trap_function_exceptions_reported_as_out_of_range() -> None:
    with pytest.raises(CelEvalError, match=r"url\(\): 'nope' is not an absolute URL") as info:
        ev("url('nope')")
    assert info.value.code == "ERR_CEL_EVAL"  # not ERR_CEL_OVERFLOW despite the library's OUT_OF_RANGE


def test_trap_int_beyond_int64_read_as_uint() -> None:
    assert raw("type(x) == uint", x=2**63).value() is True
    with pytest.raises(CelEvalError, match="outside int64"):
        ev("x", x=2**63)
    assert to_lib(Uint(2**63)) is not None


def test_trap_optional_result_unreadable() -> None:
    with pytest.raises(TypeError):
        raw("optional.of(1)").value()
    with pytest.raises(CelEvalError, match="optional"):
        ev("optional.of(1)")
    assert ev("x.?a.orValue(7)", x={}) == 7

