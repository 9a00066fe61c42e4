"""The catalog functions (telo-reference §2), their determinism flags and call detection (§12)."""

from __future__ import annotations

import re
import uuid

import pytest

from telo.cel import FUNCTIONS, CelEnvironment, CelEvalError
from telo.clock import FakeClock
from telo.values import Timestamp, Uint, Url

from .support import ENV, ev

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def clock() -> FakeClock:
    clock = FakeClock(start_ms=1_767_225_600_000)  # 2026-01-01T00:00:00Z
    clock.advance(ms=1234)
    return clock


def test_time_functions_read_the_injected_clock(clock: FakeClock) -> None:
    assert ev("nowMillis()", clock) == 1_767_225_601_234
    assert type(ev("nowMillis()", clock)) is int
    assert ev("nowSeconds()", clock) == 1_767_225_601
    assert ev("now()", clock) == Timestamp(1_767_225_601, 234_000_000)
    assert ev("nowIso()", clock) == "2026-01-01T00:00:01.234Z"
    assert ev("nowIso('UTC')", clock) == "2026-01-01T00:00:01.234Z"
    assert ev("nowIso('Europe/Paris')", clock) == "2026-01-01T01:00:01.234+01:00"
    assert ev("today()", clock) == "2026-01-01"
    assert ev("today('America/New_York')", clock) == "2025-12-31"
    clock.advance(ms=60_000)
    assert ev("nowMillis()", clock) == 1_767_225_661_234


def test_now_keeps_nanoseconds() -> None:
    clock = FakeClock(start_ms=0)
    clock.advance(seconds=1e-9 * 7)
    assert ev("now()", clock) == Timestamp(0, 7)
    assert ev("string(now())", clock) == "1970-01-01T00:00:00.000000007Z"
    assert ev("now() - x > duration('0s')", clock, x=Timestamp(0, 0)) is True


def test_unknown_time_zone_fails(clock: FakeClock) -> None:
    with pytest.raises(CelEvalError, match="unknown time zone 'Mars/Base'"):
        ev("today('Mars/Base')", clock)


def test_uuids(clock: FakeClock) -> None:
    for version in (1, 4, 6, 7):
        text = ev(f"uuidv{version}()", clock)
        assert UUID_RE.fullmatch(text) and uuid.UUID(text).version == version
    assert ev("uuidv4()") != ev("uuidv4()")
    v7 = uuid.UUID(ev("uuidv7()", clock))
    assert v7.int >> 80 == clock.now_ms()  # the 48-bit millisecond prefix
    v1 = uuid.UUID(ev("uuidv1()", clock))
    assert v1.time == clock.now_ns() // 100 + 0x01B21DD213814000
    v6 = uuid.UUID(ev("uuidv6()", clock))
    assert (v6.int >> 64) >> 16 == (clock.now_ns() // 100 + 0x01B21DD213814000) >> 12


def test_name_based_uuids_are_deterministic() -> None:
    dns = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
    assert ev(f"uuidv5('{dns}', 'telo.dev')") == str(uuid.uuid5(uuid.NAMESPACE_DNS, "telo.dev"))
    assert ev(f"uuidv3('{dns}', 'telo.dev')") == str(uuid.uuid3(uuid.NAMESPACE_DNS, "telo.dev"))
    with pytest.raises(CelEvalError, match="not a UUID"):
        ev("uuidv5('dns', 'x')")


def test_json_is_canonical_plain_encoding() -> None:
    expected = '{"a":"é\\n","b":[1,2,1.5,1e+21,true,null]}'
    assert ev("json({'b': [1, 2u, 1.5, 1e21, true, null], 'a': 'é\\n'})") == expected
    assert ev("json(x)", x={"t": Timestamp(0, 5_000), "b": b"\x00\xff", "u": Url.parse("HTTPS://a.b")}) == (
        '{"b":"AP8","t":"1970-01-01T00:00:00.000005Z","u":"https://a.b"}'
    )
    assert ev("json(duration('90m'))") == '"5400s"'
    assert ev("json({2: 'two', true: 'yes'})") == '{"2":"two","true":"yes"}'
    with pytest.raises(CelEvalError, match=r"json\(\)"):
        ev("json(double('nan'))")


def test_parse_json() -> None:
    expected = {"a": [1, 1.0, -0.0, "s", None, True, {}]}
    assert ev("parseJson('{\"a\": [1, 1.0, -0.0, \"s\", null, true, {}]}')") == expected
    assert type(ev("parseJson('1')")) is int and type(ev("parseJson('1.0')")) is float
    assert ev("parseJson('99999999999999999999')") == 1e20
    assert ev("parseJson(json(x)) == x", x={"k": [1, "v"]}) is True
    for bad in ("NaN", "{", "1e400"):
        with pytest.raises(CelEvalError, match=r"parseJson\(\)"):
            ev("parseJson(x)", x=bad)


def test_coalesce() -> None:
    assert ev("coalesce([null, null, 3, 4])") == 3
    assert ev("coalesce([])") is None
    assert ev("coalesce([null])") is None
    assert ev("coalesce(x)", x=[None, Uint(5)]) == Uint(5) and type(ev("coalesce(x)", x=[None, Uint(5)])) is Uint
    assert ev("coalesce([null, x])", x=Timestamp(1, 999_999_999)) == Timestamp(1, 999_999_999)
    assert ev("coalesce([false, null])") is False  # only null is skipped
    with pytest.raises(CelEvalError, match="coalesce"):
        ev("coalesce(x)", x={"a": 1})  # a map is not a list, even though CEL could iterate its keys


def test_default() -> None:
    assert ev("default(x, 'fallback')", x=None) == "fallback"
    assert ev("default(x, 'fallback')", x="") == ""  # only null is replaced
    assert ev("default(x, 1)", x=Uint(2)) == Uint(2)
    assert ev("default(null, x)", x=Timestamp(0, 1)) == Timestamp(0, 1)
    assert ev("default(x, 1/0)", x=7) == 7  # the fallback is evaluated only when needed
    assert ev("default(default(null, null), default(null, 'deep'))") == "deep"
    with pytest.raises(CelEvalError) as info:
        ev("default(x.missing, 'x')", x={})  # no function sees a failed argument
    assert info.value.code == "ERR_CEL_NO_SUCH_KEY"
    assert ev("x.?missing.orValue('x')", x={}) == "x"  # the documented alternative


def test_url_constructor_and_string() -> None:
    assert ev("url('postgres://app:p%40ss@db:5432/x?b=2&a=1')") == Url.parse("postgres://app:p%40ss@db:5432/x?a=1&b=2")
    assert ev("url('https://a.b:8080/p').port == 8080") is True
    assert ev("url('https://a.b/p').user") == ""  # absent members read as the proto default
    assert ev("string(url('HTTPS://a.b'))") == "https://a.b"


def test_standard_string_and_int_of_timestamps() -> None:
    assert ev("string(timestamp('2026-01-15T07:30:00.000000001Z'))") == "2026-01-15T07:30:00.000000001Z"
    assert ev("string(x)", x=Timestamp(1_768_462_200, 0)) == "2026-01-15T07:30:00Z"
    assert ev("int(timestamp('2026-01-15T07:30:00.9Z'))") == 1_768_462_200
    assert ev("string(1)") == "1"


def test_standard_extensions_are_available() -> None:
    assert ev("'a,b'.split(',').join('-') + ' X '.trim().lowerAscii()") == "a-bx"
    assert ev("math.greatest(1, 5, 3) + math.least([4, 2])") == 7
    assert ev("base64.encode(b'hi') + string(base64.decode('aGk='))") == "aGk=hi"
    assert ev("cel.bind(v, 3, v * v)") == 9
    assert ev("x.?a.?b.orValue('none')", x={"a": {}}) == "none"
    assert ev("optional.of(2).value()") == 2


@pytest.mark.parametrize(
    ("name", "deterministic"),
    [
        ("nowMillis", False),
        ("nowSeconds", False),
        ("now", False),
        ("nowIso", False),
        ("today", False),
        ("uuidv1", False),
        ("uuidv4", False),
        ("uuidv6", False),
        ("uuidv7", False),
        ("uuidv3", True),
        ("uuidv5", True),
        ("json", True),
        ("parseJson", True),
        ("coalesce", True),
        ("default", True),
        ("url", True),
        ("string", True),
    ],
)
def test_catalog_flags(name: str, deterministic: bool) -> None:
    info = FUNCTIONS[name]
    assert info.name == name and info.deterministic is deterministic and info.signatures and info.doc


def test_calls_are_found_by_parsing() -> None:
    program = ENV.compile("'nowMillis()' + string(size(x)) + x.nowMillis")
    assert program.calls == frozenset({"string", "size"}) and program.deterministic
    program = ENV.compile("string(1)")
    assert program.calls == frozenset({"string"}) and program.deterministic
    program = ENV.compile("[1, 2].map(i, i + nowMillis())[0] > 0 ? uuidv4() : json(x)")
    assert program.calls == frozenset({"nowMillis", "uuidv4", "json"})
    assert not program.deterministic
    program = ENV.compile("cel.bind(t, now(), t)")
    assert program.calls == frozenset({"now"}) and not program.deterministic
    program = ENV.compile("x.contains('a') && math.greatest(1, 2) == 2 && has(x.b)")
    assert program.calls == frozenset({"contains"})  # operators, has() and the math macro are not calls
    assert ENV.compile("default(x, uuidv4())").calls == frozenset({"default", "uuidv4"})


def test_program_reports_variables_and_type() -> None:
    program = ENV.compile("steps.a.result + inputs.b + (has(steps.c) ? 1 : 0)")
    assert dict(program.variables) == {"steps": frozenset({"a", "c"}), "inputs": frozenset({"b"})}
    assert ENV.compile("steps.map(k, k)").variables["steps"] is None
    assert ENV.compile("1 == 1").result_type == "BOOL"
    assert ENV.compile("x").result_type == "DYN"


def test_environment_declares_extra_names() -> None:
    env = CelEnvironment({"order": "dyn", "limit": "int"})
    assert env.compile("order.id + limit").evaluate({"order": {"id": 1}, "limit": 2}) == 3
    assert set(env.variables) >= {"inputs", "steps", "error", "item", "order", "limit"}
    with pytest.raises(ValueError, match="unknown CEL type"):
        CelEnvironment({"x": "map(string, dyn)"})
    with pytest.raises(ValueError, match="identifier"):
        CelEnvironment({"a-b": "dyn"})
