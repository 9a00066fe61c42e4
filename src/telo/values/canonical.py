"""The typed-frame writer: one canonical text per CEL value (spec §6.1-§6.3).

:func:`encode_frame` is the public entry point (re-exported by :mod:`telo.values.frame`). Dispatch is on the
EXACT Python type (see :mod:`telo.values.types`): ``True`` is a bool, ``Uint(2)`` a uint, and a subclass of
``dict``, ``list``, ``str`` or ``float`` — or a tuple — is not a CEL value and is refused, because it would
read back as a different value (§6.1: "an instance of any other class").

Paths of refusals are JSON Pointers inside the VALUE (§6.5): ``/<key>`` for a member of a map, ``/<index>``
for a list element. A map key that is not a string is written in the pointer as its text: decimal for an
int or uint (``/2``), ``true``/``false`` for a bool; a key of no CEL type as its ``repr``. Unpaired
surrogates in a key are written as U+FFFD (§6.2), so a pointer is always Unicode text.

Performance: this is the journal's hot path. Scalars inside containers are written inline (no call per
node), the string escaping is CPython's C ``encode_basestring`` (which escapes exactly as §6.2 asks when
``ensure_ascii`` is off), the surrogate check runs only on non-ASCII strings (``str.isascii`` is O(1)), and
a refusal's path is assembled only when something is refused, by each container appending its own
segment while the exception unwinds.
"""

from __future__ import annotations

import base64
import json.encoder
import re
from collections.abc import Callable
from typing import Any, Final

from telo.errors import TypedFrameUnencodable
from telo.values.numbers import relayout_exponent_form
from telo.values.types import (
    INT64_MAX,
    INT64_MIN,
    NANOS_PER_SECOND,
    TIMESTAMP_MAX_SECONDS,
    TIMESTAMP_MIN_SECONDS,
    CelMap,
    Duration,
    Timestamp,
    Uint,
    key_identity,
)
from telo.values.url import Url

__all__ = ["MAX_DEPTH", "encode_frame", "pointer"]

#: The deepest container nesting of a frame this runtime reads and writes: a frame whose JSON containers
#: (arrays and objects, tags included) nest deeper than this is refused by the reader at the empty pointer.
#: Not a spec rule: it bounds recursion well inside CPython's default limit of 1000 frames. The writer
#: keeps every container one level shallower, so a tagged scalar inside the deepest container still fits
#: and everything written reads back.
MAX_DEPTH: Final = 500

# The C escaper when CPython has it (it always does; the pure-Python one escapes identically).
_esc: Final[Callable[[str], str]] = json.encoder.encode_basestring
_surrogate: Final = re.compile("[\ud800-\udfff]").search
_float_repr: Final = float.__repr__
_int_repr: Final = int.__repr__  # never str(): Uint overrides __repr__, and str() would use it
_utf16: Final = "utf-16-be"  # big-endian UTF-16 bytes compare exactly as UTF-16 code units do

_DOUBLE_SPECIAL: Final = {
    "nan": '{"$telo":"double","value":"NaN"}',
    "inf": '{"$telo":"double","value":"Infinity"}',
    "-inf": '{"$telo":"double","value":"-Infinity"}',
}
_NEGATIVE_ZERO: Final = '{"$telo":"double","value":"-0"}'
_NOT_TEXT: Final = "a string that is not Unicode text (it has an unpaired UTF-16 surrogate)"


class _Refuse(Exception):
    """A refusal on its way up; each enclosing container appends its segment (innermost first)."""

    def __init__(self, message: str, *segments: str | int) -> None:
        super().__init__(message)
        self.message = message
        self.segments: list[str | int] = list(segments)


class _TooDeep(Exception):
    """Nesting beyond MAX_DEPTH: a cycle, or a value too deep to read back; diagnosed at the top."""


def pointer(segments: list[str | int]) -> str:
    """The JSON Pointer (RFC 6901) of innermost-first ``segments``; unpaired surrogates become U+FFFD."""
    out = []
    for seg in reversed(segments):
        text = str(seg) if type(seg) is int else _replace_surrogates(str(seg))
        out.append("/" + text.replace("~", "~0").replace("/", "~1"))
    return "".join(out)


def _replace_surrogates(text: str) -> str:
    return text if text.isascii() else re.sub("[\ud800-\udfff]", "\ufffd", text)


def encode_frame(value: object) -> str:
    """Write ``value`` as its canonical typed-frame text (§6.1, §6.2).

    Raises :class:`~telo.errors.TypedFrameUnencodable` with the JSON Pointer of the offending node inside
    the value for anything outside the CEL value domain (§6.1): another class (tuples and subclasses
    included), an int outside int64, a map key that is not int/uint/bool/string, two keys of one CEL value,
    a string with an unpaired surrogate, a value that contains itself — and, as this runtime's limit, a
    value nested deeper than :data:`MAX_DEPTH` frame levels.
    """
    try:
        return _value(value, 0)
    except _Refuse as refusal:
        raise TypedFrameUnencodable(refusal.message, path=pointer(refusal.segments)) from None
    except (_TooDeep, RecursionError):
        pass  # diagnosed below, outside the except block, with the stack unwound
    cycle = _find_cycle(value)
    if cycle is not None:
        raise TypedFrameUnencodable("a value that contains itself", path=pointer(cycle))
    raise TypedFrameUnencodable(f"a value nested deeper than {MAX_DEPTH} levels", path="")


# --- containers ------------------------------------------------------------------------------------------
# `depth` is the frame depth of the container being written (the root container is 1); _value takes the
# depth of the container ENCLOSING the value.


def _list(items: list[Any], depth: int) -> str:
    if depth >= MAX_DEPTH:
        raise _TooDeep
    out: list[str] = []
    app = out.append
    inner = depth + 1
    try:
        for x in items:
            t = type(x)
            if t is str:
                if not x.isascii() and _surrogate(x):
                    raise _Refuse(_NOT_TEXT)
                app(_esc(x))
            elif t is float:
                app(_double(x))
            elif t is dict:
                app(_dict(x, inner))
            elif t is bool:
                app("true" if x else "false")
            elif x is None:
                app("null")
            elif t is list:
                app(_list(x, inner))
            else:
                app(_value(x, depth))
    except _Refuse as refusal:
        refusal.segments.append(len(out))  # every element before the failing one appended exactly once
        raise
    return "[" + ",".join(out) + "]"


def _dict(d: dict[Any, Any], depth: int) -> str:
    for k in d:
        if type(k) is not str or not k.isascii():
            return _map(list(d.items()), depth)
    if "$telo" in d:
        return _map(list(d.items()), depth)
    # All keys ASCII: code point order is UTF-16 code unit order, so Python's own sort is the canonical one.
    return _object(sorted(d.items()), depth)


def _object(items: list[tuple[str, Any]], depth: int) -> str:
    """A JSON object of members already in canonical order (keys checked by the caller)."""
    if depth >= MAX_DEPTH:
        raise _TooDeep
    out: list[str] = []
    app = out.append
    inner = depth + 1
    k = ""
    try:
        for k, x in items:
            t = type(x)
            if t is str:
                if not x.isascii() and _surrogate(x):
                    raise _Refuse(_NOT_TEXT)
                app(f"{_esc(k)}:{_esc(x)}")
            elif t is float:
                app(f"{_esc(k)}:{_double(x)}")
            elif t is dict:
                app(f"{_esc(k)}:{_dict(x, inner)}")
            elif t is bool:
                app(f"{_esc(k)}:{'true' if x else 'false'}")
            elif x is None:
                app(f"{_esc(k)}:null")
            elif t is list:
                app(f"{_esc(k)}:{_list(x, inner)}")
            else:
                app(f"{_esc(k)}:{_value(x, depth)}")
    except _Refuse as refusal:
        refusal.segments.append(k)
        raise
    return "{" + ",".join(out) + "}"


def _map(pairs: list[tuple[Any, Any]], depth: int) -> str:
    """Any map (§6.1): a JSON object when every key is a string and none is ``$telo``, else tagged ``map``."""
    all_text = True
    all_ascii = True
    for k, _ in pairs:
        t = type(k)
        if t is str:
            if not k.isascii():
                if _surrogate(k):
                    raise _Refuse("a map key that is not Unicode text (an unpaired surrogate)", k)
                all_ascii = False
        elif t is int:
            if not INT64_MIN <= k <= INT64_MAX:
                raise _Refuse("an int map key outside int64", _key_segment(k))
            all_text = False
        elif t is Uint or t is bool:
            all_text = False
        else:
            message = f"a map key must be an int, uint, bool or string, not {t.__name__}"
            raise _Refuse(message, _key_segment(k))
    if all_text and not any(k == "$telo" for k, _ in pairs):
        if all_ascii:
            return _object(sorted(pairs), depth)
        return _object(sorted(pairs, key=lambda kv: kv[0].encode(_utf16)), depth)
    # Tagged: the map object at `depth`, its payload list at depth+1, each pair at depth+2.
    if depth + 2 >= MAX_DEPTH:
        raise _TooDeep
    seen: set[tuple[str, object]] = set()
    entries: list[tuple[str, str]] = []
    for k, x in pairs:
        ident = key_identity(k)
        if ident in seen:
            raise _Refuse("two keys of one CEL value (an int and a uint of one number)", _key_segment(k))
        seen.add(ident)
        try:
            entries.append((_key_frame(k), _value(x, depth + 2)))
        except _Refuse as refusal:
            refusal.segments.append(_key_segment(k))
            raise
    # §6.2: pairs ordered by the canonical text of each key's frame, as UTF-16 code units. Key frames of
    # distinct keys are distinct, so the sort never looks at the values.
    if all(kt.isascii() for kt, _ in entries):
        entries.sort()
    else:
        entries.sort(key=lambda e: e[0].encode(_utf16))
    body = ",".join(f"[{kt},{vt}]" for kt, vt in entries)
    return f'{{"$telo":"map","value":[{body}]}}'


def _key_frame(k: Any) -> str:
    t = type(k)
    if t is str:
        return _esc(k)
    if t is bool:
        return "true" if k else "false"
    if t is Uint:
        return f'{{"$telo":"uint","value":"{_int_repr(k)}"}}'
    return f'{{"$telo":"int","value":"{_int_repr(k)}"}}'


def _key_segment(k: Any) -> str:
    t = type(k)
    if t is str:
        return str(k)
    if t is bool:
        return "true" if k else "false"
    if t is int or t is Uint:
        return _int_repr(k)
    try:
        return repr(k)
    except Exception:  # a key of no CEL type may have a repr that fails; the path must still be built
        return f"<{t.__name__}>"


# --- scalars ---------------------------------------------------------------------------------------------


def _double(x: float) -> str:
    r = _float_repr(x)
    if "e" in r:
        return relayout_exponent_form(r)
    if r[-2:] == ".0":  # an integral double: ECMAScript writes no fraction
        r = r[:-2]
        return _NEGATIVE_ZERO if r == "-0" else r
    special = _DOUBLE_SPECIAL.get(r)  # "nan", "inf", "-inf": no JSON number, so tagged (§6.1)
    return r if special is None else special


def _int(v: int) -> str:
    if not INT64_MIN <= v <= INT64_MAX:
        raise _Refuse("an int outside int64")
    return f'{{"$telo":"int","value":"{_int_repr(v)}"}}'


def _uint(v: Uint) -> str:
    return f'{{"$telo":"uint","value":"{_int_repr(v)}"}}'


def _bytes(v: bytes) -> str:
    text = base64.urlsafe_b64encode(v).rstrip(b"=").decode("ascii")
    return f'{{"$telo":"bytes","value":"{text}"}}'


def _timestamp(v: Timestamp) -> str:
    # The constructor validates; checked again because a frozen dataclass can still be forced.
    if not (TIMESTAMP_MIN_SECONDS <= v.seconds <= TIMESTAMP_MAX_SECONDS and 0 <= v.nanos < NANOS_PER_SECOND):
        raise _Refuse("a timestamp outside 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999999Z")
    return f'{{"$telo":"google.protobuf.Timestamp","value":"{v.to_text()}"}}'


def _duration(v: Duration) -> str:
    try:
        Duration(v.seconds, v.nanos)  # re-validate (range, sign of nanos), for the same reason
    except (TypeError, ValueError) as err:
        raise _Refuse(f"a duration outside the CEL range: {err}") from None
    return f'{{"$telo":"google.protobuf.Duration","value":"{v.to_text()}"}}'


def _url(v: Url) -> str:
    # A value type declaring members carries its own CEL type: tagged, payload its plain encoding (§6.1).
    return f'{{"$telo":"Telo.Url","value":{_esc(v.to_text())}}}'


_SCALARS: Final[dict[type, Callable[[Any], str]]] = {
    int: _int,
    Uint: _uint,
    bytes: _bytes,
    Timestamp: _timestamp,
    Duration: _duration,
    Url: _url,
}


def _value(v: Any, depth: int) -> str:
    t = type(v)
    if t is str:
        if not v.isascii() and _surrogate(v):
            raise _Refuse(_NOT_TEXT)
        return _esc(v)
    if t is float:
        return _double(v)
    if t is dict:
        return _dict(v, depth + 1)
    if t is list:
        return _list(v, depth + 1)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    writer = _SCALARS.get(t)
    if writer is not None:
        return writer(v)
    if t is CelMap:
        return _map(v.pairs(), depth + 1)
    raise _Refuse(f"a value of no CEL type: {t.__module__}.{t.__qualname__}")


# --- diagnosis of a refusal for depth --------------------------------------------------------------------


def _children(node: Any) -> list[tuple[str | int, object]] | None:
    t = type(node)
    if t is list:
        return list(enumerate(node))
    if t is dict:
        return [(_key_segment(k), v) for k, v in node.items()]
    if t is CelMap:
        return [(_key_segment(k), v) for k, v in node.pairs()]
    return None


def _find_cycle(root: object) -> list[str | int] | None:
    """Innermost-first segments of the first container found inside itself, or None (iterative DFS)."""
    kids = _children(root)
    if kids is None:
        return None
    on_path = [id(root)]
    active = {id(root)}
    done: set[int] = set()  # fully explored containers: no cycle runs through them (white/grey/black DFS)
    segs: list[str | int] = []
    stack = [iter(kids)]
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            finished = on_path.pop()
            active.discard(finished)
            done.add(finished)
            if segs:
                segs.pop()
            continue
        seg, child = step
        grandkids = _children(child)
        if grandkids is None or id(child) in done:
            continue
        if id(child) in active:
            return list(reversed([*segs, seg]))
        on_path.append(id(child))
        active.add(id(child))
        segs.append(seg)
        stack.append(iter(grandkids))
    return None
