"""Property tests of the typed frame: one-to-one round trips (§6.1) and a reader that only ever refuses (§6.2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from telo.errors import TypedFrameUndecodable, TypedFrameUnencodable
from telo.values import CelMap, Uint, canonical, decode_frame, encode_frame, equal, fastwrite

from .conftest import json_values, to_notation, values, values_and_junk

# Modest budgets: the whole module runs in a few seconds. The recursive strategy's repr grows with its depth,
# which hypothesis warns about; it costs nothing here.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_FEWER = settings(_SETTINGS, max_examples=200)


@_SETTINGS
@given(values)
@example({"$telo": "x", "a": [1, Uint(1), True, 1.0, -0.0, float("nan")]})
@example(CelMap([(1, "int"), (True, "bool"), ("1", "str")]))
def test_every_value_round_trips_exactly(value: Any) -> None:
    frame = encode_frame(value)
    back = decode_frame(frame)
    assert equal(back, value), (to_notation(back), to_notation(value))
    assert encode_frame(back) == frame


@_FEWER
@given(values, values)
def test_different_values_never_share_a_frame(a: Any, b: Any) -> None:
    assert (encode_frame(a) == encode_frame(b)) == equal(a, b)


def _read_or_refuse(text: str) -> None:
    """The reader's contract on any text: a value whose canonical frame reads back the same, or a refusal."""
    try:
        value = decode_frame(text)
    except TypedFrameUndecodable as err:
        assert isinstance(err.path, str)
        assert err.path == "" or err.path.startswith("/")
        return
    canonical = encode_frame(value)
    again = decode_frame(canonical)
    assert equal(again, value)
    assert encode_frame(again) == canonical


@_SETTINGS
@given(st.text())
@example("[" * 5000)
@example('{"$telo":"map","value":[[{"$telo":"map","value":[]},1]]}')
def test_random_text_is_read_or_refused(text: str) -> None:
    _read_or_refuse(text)


@_SETTINGS
@given(json_values, st.booleans())
def test_random_json_with_tags_is_read_or_refused(value: Any, ascii_only: bool) -> None:
    _read_or_refuse(json.dumps(value, ensure_ascii=ascii_only))


_surrogates = st.integers(0xD800, 0xDFFF).map(chr)


@_SETTINGS
@given(st.lists(st.one_of(st.text(max_size=3), _surrogates), max_size=4), st.booleans())
def test_json_with_unpaired_surrogates_is_read_or_refused(parts: list[str], as_key: bool) -> None:
    s = "".join(parts)
    obj: Any = {s: 1} if as_key else [s]
    _read_or_refuse(json.dumps(obj))  # escaped: "\ud800"
    _read_or_refuse(json.dumps(obj, ensure_ascii=False))  # literal surrogate code points


@_FEWER
@given(values, st.data())
def test_damaged_frames_are_read_or_refused(value: Any, data: st.DataObject) -> None:
    frame = encode_frame(value)
    i = data.draw(st.integers(0, len(frame)))
    j = data.draw(st.integers(i, min(len(frame), i + 3)))
    filler = data.draw(st.sampled_from(["", '"', "{", "}", "[", "]", ",", ":", "0", "\\u", "$telo", "e9"]))
    _read_or_refuse(frame[:i] + filler + frame[j:])


def _outcome(write: Any, value: Any) -> tuple[str, str]:
    try:
        return "frame", write(value)
    except TypedFrameUnencodable as err:
        return "refused " + err.path, err.message


@_FEWER
@given(values_and_junk)
@example([1e-5, 1e-7, 1e21, 1e20, 2.0**60, -0.0, float("inf")])  # the fast path's fallbacks and tags
@example({"\U0001f600": 1.0, "\uff5a": 2.0})  # code point order is not UTF-16 order: fallback
@example({"a": [object()], "b": 1e-7})
def test_the_fast_writer_writes_and_refuses_exactly_as_the_reference_writer(value: Any) -> None:
    assert _outcome(fastwrite.encode_frame, value) == _outcome(canonical.encode_frame, value)


def _checked(value: Any) -> str:
    fastwrite.check_frame(value)
    return "ok"


@_FEWER
@given(values_and_junk)
@example([1e-5, 1e-7, 1e21, 1e20, 2.0**60, -0.0, float("inf")])
@example({"\U0001f600": 1.0, "\uff5a": 2.0})
@example({"a": [object()], "b": 1e-7})
def test_check_frame_refuses_exactly_what_the_writer_refuses(value: Any) -> None:
    checked, written = _outcome(_checked, value), _outcome(fastwrite.encode_frame, value)
    assert checked == written or (checked == ("frame", "ok") and written[0] == "frame")
