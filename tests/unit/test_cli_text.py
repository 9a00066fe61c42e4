"""The two helpers every human printer of the ``telo`` command uses (docs/cli.md "Output"): one escape for
text that is not printable, one form for times."""

from __future__ import annotations

import pytest

from telo.cli.common import printable, time_text
from telo.values import Timestamp


@pytest.mark.parametrize(("text", "shown"), [
    ("flow:a-1 ü 😀", "flow:a-1 ü 😀"),  # printable text, any script, is left alone
    ("a\nb\r\tc", "a\\nb\\r\\tc"),
    ("\x1b[2J\x07\x7f\x9b", "\\x1b[2J\\x07\\x7f\\x9b"),  # ESC, BEL, DEL and the 8-bit CSI
    ("a\u202eb\u2028c\u200b", "a\\u202eb\\u2028c\\u200b"),  # a bidi override, a line separator, zero width
    ("back\\slash", "back\\slash"),  # left as is: a JSON cell escapes its own backslashes
])
def test_printable_escapes_what_a_terminal_would_act_on(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_time_text_is_rfc3339_with_three_fractional_digits() -> None:
    assert time_text(0) == "1970-01-01T00:00:00.000Z"
    assert time_text(1_795_995_127_500) == "2026-11-29T23:32:07.500Z"
    assert time_text(Timestamp(1_795_995_127, 123_999_999)) == "2026-11-29T23:32:07.123Z"  # cut, not rounded
    assert time_text("2026-11-29T23:32:07.5Z") == "2026-11-29T23:32:07.500Z"  # recorded text, one form too
    assert time_text("2026-11-30T00:32:07.5+01:00") == "2026-11-29T23:32:07.500Z"
    assert time_text(-62_135_596_800_000) == "0001-01-01T00:00:00.000Z"
    assert time_text(None) == "—"
    assert time_text("soon\n") == "soon\\n"  # not a time: shown as the (escaped) text it is
    assert time_text(10**20).startswith("<not a time")
