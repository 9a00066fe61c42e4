"""The typed-frame writer's fast path: CPython's C JSON encoder writes the canonical text (spec §6.2).

A journal write is the codec's hot path, and a pure-Python writer spends most of its time building small
strings. This module instead PREPARES the value — checks it against the domain exactly as
:mod:`telo.values.canonical` does, and turns every node the C encoder would write differently into one it
writes canonically — then hands the prepared tree to ``json``'s C encoder (compact separators, keys sorted,
``ensure_ascii`` off). Unchanged containers are not copied.

Why the C encoder's text is the canonical one here:

* strings: its escaping with ``ensure_ascii`` off is exactly §6.2's;
* object members: it sorts by Python's code point order, which is UTF-16 code unit order for ASCII keys
  and for any key set whose two orders agree (decided once per key set, see ``canonical.learn_shape``);
* numbers: it writes ``repr(float)``, which is ECMAScript ``Number::toString`` for a non-integral double in
  ``1e-4 <= |x| < 1e16``; an integral double is handed over as the ``int`` of its ECMAScript text, which the
  encoder writes digit for digit; everything always tagged (int, uint, bytes, timestamps, durations,
  Telo.Url, NaN, ±Infinity, -0, tagged maps) becomes the tag's ``{"$telo", "value"}`` dict, whose two
  members sort as §6.2 orders them.

What the C encoder cannot write — a double whose ECMAScript text is in exponent form (``1e-7``, ``1e+21``)
or in ``1e-6 <= |x| < 1e-4``, or a dict whose two key orders disagree — sends the whole value to the
reference writer, :func:`telo.values.canonical.encode_frame`. So do cycles and over-deep values, which the
reference writer diagnoses. Refusals are the reference writer's, with the same paths: both walk maps in
insertion order and lists in index order, and share every domain check.
"""

from __future__ import annotations

import json.encoder
import math
from typing import Any, Final

from telo.errors import TypedFrameUnencodable
from telo.values import canonical
from telo.values.canonical import (
    MAX_DEPTH,
    NOT_TEXT,
    SHAPES,
    TAGGED_SCALARS,
    Refusal,
    TooDeep,
    check_map_keys,
    learn_shape,
    pointer,
    surrogate,
    tagged_entries,
)
from telo.values.numbers import double_text
from telo.values.types import INT64_MAX, INT64_MIN, CelMap, Uint

__all__ = ["check_frame", "encode_frame"]


class _Fallback(Exception):
    """The C encoder cannot write this value canonically; the reference writer will."""


def _unexpected(obj: object) -> Any:
    raise TypeError(f"unprepared {type(obj).__name__} reached the C encoder")  # a bug in _prepare


_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_c_encode: Final = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(None, _unexpected, json.encoder.encode_basestring, None, ":", ",", True, False, False)
)

# Integral doubles below 2**53 are exactly their int; above it the int of the ECMAScript text.
_EXACT: Final = 2.0**53
_INT_RANGE: Final = "an int outside int64"  # canonical._int_payload's refusal
_NEG_ZERO: Final = {"$telo": "double", "value": "-0"}
_NAN: Final = {"$telo": "double", "value": "NaN"}
_INF: Final = {"$telo": "double", "value": "Infinity"}
_NEG_INF: Final = {"$telo": "double", "value": "-Infinity"}


def encode_frame(value: object) -> str:
    """Write ``value`` as its canonical typed-frame text (§6.1, §6.2); see the module docstring.

    Raises :class:`~telo.errors.TypedFrameUnencodable` exactly as the reference writer does.
    """
    if _c_encode is None:  # an interpreter without the C accelerator
        return canonical.encode_frame(value)
    try:
        prepared = _prepare(value, 0)
        return "".join(_c_encode(prepared, 0))
    except Refusal as refusal:
        raise TypedFrameUnencodable(refusal.message, path=pointer(refusal.segments)) from None
    except (_Fallback, TooDeep, RecursionError):
        pass  # outside the except block: the reference writer starts on an unwound stack
    return canonical.encode_frame(value)


def check_frame(value: object) -> None:
    """Raise exactly what :func:`encode_frame` would raise for ``value``, without writing the text.

    For a caller that only needs to know the value is in the domain (a Python step's result is checked as it
    returns): preparing the tree is the whole check, so the C encoder's pass is skipped.
    """
    if _c_encode is None:
        canonical.encode_frame(value)
        return
    try:
        _prepare(value, 0)
        return
    except Refusal as refusal:
        raise TypedFrameUnencodable(refusal.message, path=pointer(refusal.segments)) from None
    except (_Fallback, TooDeep, RecursionError):
        pass  # as in encode_frame: the reference writer decides, on an unwound stack
    canonical.encode_frame(value)


def _double(x: float) -> Any:
    """A double the C encoder writes canonically, or its tag (called for every float not left as is)."""
    if x.is_integer():
        if x == 0.0 and math.copysign(1.0, x) < 0:
            return _NEG_ZERO
        if -_EXACT < x < _EXACT:
            return int(x)
        if -1e21 < x < 1e21:
            return int(double_text(x))  # ECMAScript writes these as digits: the shortest, zero-padded
        raise _Fallback
    if x != x:
        return _NAN
    if x == math.inf:
        return _INF
    if x == -math.inf:
        return _NEG_INF
    raise _Fallback  # |x| < 1e-4: repr writes an exponent where ECMAScript may not, and its layout differs


def _prepare(v: Any, depth: int) -> Any:
    t = type(v)
    if t is str:
        if not v.isascii() and surrogate(v):
            raise Refusal(NOT_TEXT)
        return v
    if t is float:
        return v if (1e-4 <= v < 1e16 or -1e16 < v <= -1e-4) and not v.is_integer() else _double(v)
    if t is dict:
        return _dict(v, depth + 1)
    if t is list:
        return _list(v, depth + 1)
    if v is None or t is bool:
        return v
    tagged = TAGGED_SCALARS.get(t)
    if tagged is not None:
        return {"$telo": tagged[0], "value": tagged[1](v)}
    if t is CelMap:
        return _map(v.pairs(), depth + 1)
    raise Refusal(f"a value of no CEL type: {t.__module__}.{t.__qualname__}")


def _list(items: list[Any], depth: int) -> list[Any]:
    if depth >= MAX_DEPTH:
        raise TooDeep
    inner = depth + 1
    copy: list[Any] | None = None
    i = 0
    try:
        for i, x in enumerate(items):
            t = type(x)
            if t is str:
                if not x.isascii() and surrogate(x):
                    raise Refusal(NOT_TEXT)
                continue
            if t is float:
                if (1e-4 <= x < 1e16 or -1e16 < x <= -1e-4) and not x.is_integer():
                    continue
                new = _double(x)
            elif x is None or t is bool:
                continue
            elif t is int:  # the commonest tagged scalar, inline (as _prepare would tag it)
                if not INT64_MIN <= x <= INT64_MAX:
                    raise Refusal(_INT_RANGE)
                new = {"$telo": "int", "value": int.__repr__(x)}
            elif t is dict:
                new = _dict(x, inner)
                if new is x:
                    continue
            elif t is list:
                new = _list(x, inner)
                if new is x:
                    continue
            else:
                new = _prepare(x, depth)
            if copy is None:
                copy = list(items)
            copy[i] = new
    except Refusal as refusal:
        refusal.segments.append(i)
        raise
    return items if copy is None else copy


def _dict(d: dict[Any, Any], depth: int) -> Any:
    if depth >= MAX_DEPTH:
        raise TooDeep
    keys = tuple(d)
    shape = SHAPES.get(keys)
    if shape is None:
        shape = learn_shape(keys, d)
        if shape is None:
            return _map(list(d.items()), depth)
    if not shape[2]:
        raise _Fallback  # code point order is not this key set's canonical order
    inner = depth + 1
    copy: dict[str, Any] | None = None
    k = ""
    try:
        for k, x in d.items():
            if type(k) is not str:  # a key merely EQUAL to a cached str (a str subclass): not this shape
                break
            t = type(x)
            if t is str:
                if not x.isascii() and surrogate(x):
                    raise Refusal(NOT_TEXT)
                continue
            if t is float:
                if (1e-4 <= x < 1e16 or -1e16 < x <= -1e-4) and not x.is_integer():
                    continue
                new = _double(x)
            elif x is None or t is bool:
                continue
            elif t is int:  # the commonest tagged scalar, inline (as _prepare would tag it)
                if not INT64_MIN <= x <= INT64_MAX:
                    raise Refusal(_INT_RANGE)
                new = {"$telo": "int", "value": int.__repr__(x)}
            elif t is dict:
                new = _dict(x, inner)
                if new is x:
                    continue
            elif t is list:
                new = _list(x, inner)
                if new is x:
                    continue
            else:
                new = _prepare(x, depth)
            if copy is None:
                copy = dict(d)
            copy[k] = new
        else:
            return d if copy is None else copy
    except Refusal as refusal:
        refusal.segments.append(k)
        raise
    return _map(list(d.items()), depth)  # outside the try: its refusals carry their own key segments


def _map(pairs: list[tuple[Any, Any]], depth: int) -> Any:
    if check_map_keys(pairs):
        return _dict(dict(pairs), depth)
    if depth + 2 >= MAX_DEPTH:
        raise TooDeep
    entries = tagged_entries(pairs, lambda x: _prepare(x, depth + 2))
    return {"$telo": "map", "value": [[_key(k), v] for _, k, v in entries]}


def _key(k: Any) -> Any:
    t = type(k)
    if t is int:
        return {"$telo": "int", "value": int.__repr__(k)}
    if t is Uint:
        return {"$telo": "uint", "value": int.__repr__(k)}
    return k  # str or bool: written as themselves
