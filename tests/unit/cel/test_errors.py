"""Compile errors at load time with manifest positions; evaluation errors with codes (telo.cel.errors)."""

from __future__ import annotations

import pytest

from telo.cel import CelCompileError, CelEnvironment, CelEvalError
from telo.errors import TeloError

from .support import ENV, ev


def compile_error(text: str, **pos: object) -> CelCompileError:
    with pytest.raises(CelCompileError) as info:
        ENV.compile(text, **pos)  # type: ignore[arg-type]
    return info.value


def test_compile_error_quotes_the_expression_and_maps_the_position() -> None:
    err = compile_error("1 + 'a'", source="orders.yaml", line=12, column=9)
    assert isinstance(err, TeloError) and err.code == "ERR_CEL_COMPILE"
    assert "\"1 + 'a'\"" in err.message and "orders.yaml:12:11" in err.message
    assert err.data["expression"] == "1 + 'a'"
    assert (err.data["file"], err.data["line"], err.data["column"]) == ("orders.yaml", 12, 11)
    assert "no matching overload" in err.data["errors"][0]["message"]
    assert str(err).startswith("ERR_CEL_COMPILE: ")


def test_compile_error_columns_count_code_points() -> None:
    err = compile_error("'é😀' + 1", line=1, column=1)
    assert (err.data["line"], err.data["column"]) == (1, 6)


def test_compile_error_on_a_later_line() -> None:
    err = compile_error("inputs.a +\n  1 +\n  'b'", source="m.yaml", line=3, column=15)
    assert (err.data["line"], err.data["column"]) == (4, 5)  # the second `+`: line 2 of the text, its own column
    assert err.data["errors"][0]["at"] == [2, 5]
    err = compile_error("inputs.a &&\n   (1 +)", line=3, column=15)
    assert err.data["line"] == 4 and err.data["errors"][0]["at"][0] == 2


def test_compile_error_without_a_manifest_position() -> None:
    err = compile_error("1 +")
    assert (err.data["line"], err.data["column"]) == (1, 4) and "file" not in err.data
    assert "<expression>:1:4" in err.message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("1 + 'a'", "no matching overload"),
        ("steps + 1", "no matching overload"),
        ("undeclared.x", "undeclared reference to 'undeclared.x'"),
        ("nowMillis(1)", "undeclared reference to 'nowMillis'"),
        ("url(1)", "no matching overload"),
        ("url('x').nosuch", "undefined field 'nosuch'"),
        ("true ? 1 : 'a'", "no matching overload"),
        ("1 == 1u", "no matching overload"),
        ("[1, 2].sortBy(e, e)", "undeclared reference"),
    ],
)
def test_type_errors_are_compile_errors(text: str, fragment: str) -> None:
    assert fragment in compile_error(text).message


def test_every_problem_is_listed() -> None:
    err = compile_error("a + b")
    assert [p["message"] for p in err.data["errors"]] == [
        "undeclared reference to 'a' (in container '')",
        "undeclared reference to 'b' (in container '')",
    ]
    assert "(and 1 more)" in err.message


def test_compile_errors_are_cached_but_positions_are_per_call() -> None:
    a = compile_error("1 +", source="a.yaml", line=1, column=1)
    b = compile_error("1 +", source="b.yaml", line=5, column=3)
    assert (a.data["file"], a.data["line"]) == ("a.yaml", 1)
    assert (b.data["file"], b.data["line"], b.data["column"]) == ("b.yaml", 5, 6)


def test_programs_are_cached_per_environment_and_text() -> None:
    a = ENV.compile("inputs.x", source="a.yaml", line=1, column=1)
    b = CelEnvironment({"x": "dyn", "y": "dyn"}).compile("inputs.x", source="b.yaml", line=2, column=2)
    assert a._compiled is b._compiled  # one compilation (same declarations, same text)
    assert a.source_pos != b.source_pos


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("9223372036854775807 + 1", "ERR_CEL_OVERFLOW"),
        ("-9223372036854775808 - 1", "ERR_CEL_OVERFLOW"),
        ("-(-9223372036854775807 - 1)", "ERR_CEL_OVERFLOW"),
        ("9223372036854775807 * 2", "ERR_CEL_OVERFLOW"),
        ("18446744073709551615u + 1u", "ERR_CEL_OVERFLOW"),
        ("0u - 1u", "ERR_CEL_OVERFLOW"),
        ("int(1e100)", "ERR_CEL_OVERFLOW"),
        ("uint(-1)", "ERR_CEL_OVERFLOW"),
        ("timestamp('9999-12-31T23:59:59Z') + duration('1s')", "ERR_CEL_OVERFLOW"),
        ("{'a': 1}.b", "ERR_CEL_NO_SUCH_KEY"),
        ("{'a': 1}['b']", "ERR_CEL_NO_SUCH_KEY"),
        ("x.missing", "ERR_CEL_NO_SUCH_KEY"),
        ("1 / 0", "ERR_CEL_EVAL"),
        ("1 % 0", "ERR_CEL_EVAL"),
        ("[1][3]", "ERR_CEL_EVAL"),
        ("int('x')", "ERR_CEL_EVAL"),
        ("timestamp('bad')", "ERR_CEL_EVAL"),
        ("x + 1", "ERR_CEL_EVAL"),
        ("error.code", "ERR_CEL_EVAL"),  # declared, but not set in this scope
    ],
)
def test_evaluation_error_codes(text: str, code: str) -> None:
    with pytest.raises(CelEvalError) as info:
        ev(text, x={"a": 1})
    err = info.value
    assert err.code == code, err.message
    assert err.data["expression"] == text
    assert repr(text) in err.message or f'"{text}"' in err.message
    assert err.data["reason"]


def test_evaluation_error_names_the_manifest_position() -> None:
    program = ENV.compile("inputs.order.id", source="orders.yaml", line=7, column=13)
    with pytest.raises(CelEvalError) as info:
        program.evaluate({"inputs": {}})
    assert "orders.yaml:7:13" in info.value.message
    assert (info.value.data["file"], info.value.data["line"], info.value.data["column"]) == ("orders.yaml", 7, 13)


def test_map_typed_variable_given_a_non_map() -> None:
    with pytest.raises(CelEvalError, match="Unexpected value type for 'steps'"):
        ENV.compile("steps.a").evaluate({"steps": [1]})


def test_short_circuit_absorbs_errors_as_cel_specifies() -> None:
    assert ev("false && x.missing", x={}) is False
    assert ev("x.missing || true", x={}) is True
