"""The plain encoding: the one JSON form of a CEL value at a boundary whose reader is not Telo (spec §6.4).

Writing (:func:`to_plain`) is keyed on the value's exact Python type (see :mod:`telo.values.types`);
reading (:func:`from_plain`) is keyed on the slot's declared JSON schema. ``$telo`` never appears: a value
that needs its CEL type to survive a round trip without a schema belongs in a typed frame (§6.1) instead.

Writing:

=====================  ================================================================================
value                  plain JSON
=====================  ================================================================================
None, bool, str        as is
int, Uint              a Python ``int`` (exact digits, a JSON number); an int outside int64 is refused
float                  as is, ``-0.0`` included; NaN and ±Infinity have no JSON number and are REFUSED
bytes                  base64url without padding (RFC 4648 §5)
Timestamp, Duration    the canonical payload text of §6.3
Url                    its canonical url-text (§6.3)
list                   a list
dict, CelMap           an object; an int/uint key is written as its decimal text, a bool as true/false
=====================  ================================================================================

A value outside the domain (another type, a tuple, a non-finite float, a string with an unpaired surrogate, a
map key no CEL map has, two keys with one text, a value containing itself) raises
:class:`~telo.errors.TypedFrameUnencodable` with the JSON Pointer of the node, as the frame writer does: it is
the same domain check, so a caller re-raises it in its own terms (§6.1) once, whichever encoding refused.

Reading decides the CEL type of each node from its schema; it is a reader, not a validator (``required``,
``minimum``, ``enum``… are jsonschema's business elsewhere). See :func:`from_plain`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any, Final

from telo.errors import TypedFrameUnencodable
from telo.values.types import (
    INT64_MAX,
    INT64_MIN,
    CelMap,
    Duration,
    Timestamp,
    Uint,
)
from telo.values.url import Url

from .depth import MAX_PLAIN_DEPTH, too_deep_error
from .plain_read import from_plain
from .texts import decode_base64url, encode_base64url, json_pointer, parse_cel_duration

__all__ = [
    "decode_base64url",
    "encode_base64url",
    "from_plain",
    "json_pointer",
    "parse_cel_duration",
    "to_plain",
]

# --- writing ----------------------------------------------------------------------------------------------

_HINT: Final = (
    "the plain encoding carries CEL values only: null, bool, int, uint, finite double, string, bytes, "
    "timestamp, duration, Telo.Url, list and map"
)


def to_plain(value: object) -> Any:
    """The plain JSON form (§6.4) of a CEL value, as JSON-compatible Python objects.

    Raises :class:`~telo.errors.TypedFrameUnencodable` with the JSON Pointer of a node outside the domain.
    """
    return _write(value, "", set())


def _text(value: str, path: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise TypedFrameUnencodable(
            "a string that is not Unicode text (unpaired surrogate)", path=path, hint=_HINT
        ) from None
    return value


def _key_text(key: object, path: str) -> str:
    if type(key) is str:
        return _text(key, path)
    if type(key) is bool:
        return "true" if key else "false"
    if type(key) is int or type(key) is Uint:
        return str(_int(key, path))
    raise TypedFrameUnencodable(
        f"a map key of type {type(key).__name__}; CEL map keys are int, uint, bool or string",
        path=path,
        hint=_HINT,
    )


def _int(value: int, path: str) -> int:
    if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
        raise TypedFrameUnencodable(f"an int outside int64: {value}", path=path, hint=_HINT)
    return int(value)  # a Uint is written as the plain int of its digits


def _scalar(value: object, path: str) -> Any:
    # Dispatch is on the EXACT type (types.py): True is not an int, an int subclass is not a CEL value.
    if value is None or type(value) is bool:
        return value
    if type(value) is str:
        return _text(value, path)
    if type(value) is int or type(value) is Uint:
        return _int(value, path)
    if type(value) is float:
        if not math.isfinite(value):
            raise TypedFrameUnencodable(
                f"the double {value!r} has no plain JSON form",
                path=path,
                hint="JSON has no NaN or Infinity; carry it in a typed frame, or as a string of your own",
            )
        return value
    if type(value) is bytes:
        return encode_base64url(value)
    if type(value) is Timestamp or type(value) is Duration or type(value) is Url:
        return value.to_text()
    raise TypedFrameUnencodable(
        f"a value of type {type(value).__name__}, which is not a CEL value", path=path, hint=_HINT
    )


def _open(value: object, path: str) -> tuple[Any, Iterator[tuple[Any, object, str]]] | None:
    """For a container: its empty plain form and its members as ``(slot, value, pointer)``; else None."""
    if type(value) is list:
        return [], ((i, v, json_pointer(path, i)) for i, v in enumerate(value))
    if type(value) is CelMap:
        return {}, _members(value.pairs(), path)
    if type(value) is dict:
        return {}, _members(value.items(), path)
    return None


def _members(pairs: Iterable[tuple[Any, Any]], path: str) -> Iterator[tuple[str, object, str]]:
    for k, v in pairs:
        key = _key_text(k, json_pointer(path, str(k)))
        yield key, v, json_pointer(path, key)


def _write(value: object, path: str, active: set[int]) -> Any:
    """Iterative, with an explicit stack: a value may nest MAX_PLAIN_DEPTH levels (telo.values.depth), and a
    recursion of two or three frames a level would overflow CPython's 1000-frame stack well before that."""
    opened = _open(value, path)
    if opened is None:
        return _scalar(value, path)
    top, members = opened
    active.add(id(value))
    stack: list[tuple[object, Any, Iterator[tuple[Any, object, str]]]] = [(value, top, members)]
    while stack:
        node, out, it = stack[-1]
        step = next(it, None)
        if step is None:
            stack.pop()
            active.discard(id(node))
            continue
        slot, child, child_path = step
        if type(out) is dict and slot in out:  # 1 and "1", or True and "true": one JSON member name
            raise TypedFrameUnencodable(
                f"two map keys write as the same text {slot!r}",
                path=child_path,
                hint="the plain encoding writes every map key as text",
            )
        opened = _open(child, child_path)
        if opened is None:
            converted = _scalar(child, child_path)
        else:
            if id(child) in active:
                raise TypedFrameUnencodable("a value that contains itself", path=child_path, hint=_HINT)
            if len(stack) >= MAX_PLAIN_DEPTH:
                raise too_deep_error("a value", MAX_PLAIN_DEPTH)
            converted, members = opened
            active.add(id(child))
            stack.append((child, converted, members))
        if type(out) is list:
            out.append(converted)
        else:
            out[slot] = converted
    return top
