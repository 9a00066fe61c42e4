"""The exact rewrite of default()/coalesce() (telo.cel.rewrite) and the AST reading it relies on."""

from __future__ import annotations

import pytest

from telo.cel.rewrite import exact_text
from telo.values import Duration, Timestamp, Uint

from .support import ENV, ev


def rewritten(text: str) -> str:
    program = ENV.compile(text)
    return program._compiled.eval_text


def test_texts_without_the_functions_are_untouched() -> None:
    assert rewritten("inputs.a + 'default(x, y)'") == "inputs.a + 'default(x, y)'"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("default(x, 'a, b)')", "q"),
        ('default(x, "(")', "q"),
        ("default(x, '''multi\n(line, ''')", "q"),
        ("default(x, r'\\(,')", "q"),
        ("default(x, string(b'(,'))", "q"),
        ("default (x, 1)", "q"),
        ("default(\n  x, // a comment (with, commas)\n  1)", "q"),
        ("default(x, [1, {'a': (2)}])", "q"),
        ("default(default(null, x), 0)", "q"),
        ("[default(x, 1), default(y, 2)]", ["q", 2]),
        ("default(null, default(null, x))", "q"),
    ],
)
def test_call_sites_are_delimited_by_a_cel_lexer(text: str, expected: object) -> None:
    assert rewritten(text) != text  # the exact form is what runs
    assert ev(text, x="q", y=None) == expected


def test_rewritten_forms_stay_exact() -> None:
    assert type(ev("default(x, 0)", x=Uint(9))) is Uint
    assert ev("coalesce([null, x, 1])", x=Duration(0, 1)) == Duration(0, 1)
    assert ev("[coalesce(x), default(null, y)]", x=[None, Timestamp(0, 1)], y=Timestamp(2, 3)) == [
        Timestamp(0, 1),
        Timestamp(2, 3),
    ]
    assert ev("default(x, 1)", x={"a": Uint(1)}) == {"a": Uint(1)}


def test_errors_report_the_authors_text() -> None:
    from telo.cel import CelEvalError

    with pytest.raises(CelEvalError) as info:
        ev("default(x.missing, 1)", x={})
    assert info.value.data["expression"] == "default(x.missing, 1)"


def test_a_rewrite_that_does_not_line_up_keeps_the_original() -> None:
    # A compile function that refuses everything: the original text is evaluated (by the Python functions).
    def refuse(text: str) -> object:
        raise RuntimeError("no")

    assert exact_text("default(x, 1)", frozenset({"default"}), refuse) == "default(x, 1)"


def test_rewrite_inside_a_comprehension() -> None:
    assert ev("[1, null, x].map(e, default(e, 0))", x=Uint(2)) == [1, 0, Uint(2)]
    assert ev("x.map(l, coalesce(l))", x=[[None, 1], [], [None, None, "z"]]) == [1, None, "z"]
