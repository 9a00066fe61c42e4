"""The reference typed-frame writer: one canonical text per CEL value (spec §6.1-§6.3).

The public writer, ``telo.values.encode_frame``, is :mod:`telo.values.fastwrite`, which hands a prepared
tree to json's C encoder and falls back to :func:`encode_frame` here for what that cannot write. This
module also holds what both writers share, so they check the domain identically: the refusal signals, the
map-key checks, the tagged-map ordering, the tagged scalars' payloads and the record-shape cache.

Dispatch is on the EXACT Python type (see :mod:`telo.values.types`): ``True`` is a bool, ``Uint(2)`` a uint,
and a subclass of ``dict``, ``list``, ``str``, ``int`` or ``float`` — or a tuple — is not a CEL value and is
refused, because it would read back as a different value (§6.1: "an instance of any other class"). A
:class:`~telo.values.types.CelMap` whose keys are all strings, none ``$telo``, is the same value as the dict
and is written as a JSON object like it (§6.2: the host's representation never reaches the text).

Paths of refusals are JSON Pointers inside the VALUE (§6.5): ``/<key>`` for a member of a map, ``/<index>``
for a list element. A map key that is not a string is written in the pointer as its text: decimal for an
int or uint (``/2``), ``true``/``false`` for a bool; a key of no CEL type as its ``repr``. Unpaired
surrogates in a key are written as U+FFFD (§6.2), so a pointer is always Unicode text. Members are checked
in insertion order and list elements in index order, so a refusal names the first offending node as the
value holds it; a value that contains itself is named where it recurs (``a = [a]`` refuses at ``/0``).

Performance: scalars inside containers are written inline (no call per node), strings are escaped by
CPython's C ``encode_basestring`` (exactly §6.2's escaping when ``ensure_ascii`` is off), the surrogate check
runs only on non-ASCII strings (``str.isascii`` is O(1)), record shapes are cached, and a refusal's path is
assembled only when something is refused, by each container appending its own segment while the exception
unwinds.
"""

from __future__ import annotations

import base64
import json.encoder
import re
from collections.abc import Callable
from operator import itemgetter
from typing import Any, Final, TypeVar

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

__all__ = ["MAX_DEPTH", "encode_frame", "pointer"]  # the rest is shared with telo.values.fastwrite only

#: The deepest container nesting of a frame this runtime reads and writes: a frame whose JSON containers
#: (arrays and objects, tags included) nest deeper than this is refused by the reader at the empty pointer.
#: Not a spec rule: it bounds recursion well inside CPython's default limit of 1000 frames. The writer
#: keeps every container one level shallower, so a tagged scalar inside the deepest container still fits
#: and everything written reads back.
MAX_DEPTH: Final = 500

# The C escaper when CPython has it (it always does; the pure-Python one escapes identically).
_esc: Final[Callable[[str], str]] = json.encoder.encode_basestring
surrogate: Final = re.compile("[\ud800-\udfff]").search
_float_repr: Final = float.__repr__
_int_repr: Final = int.__repr__  # never str(): Uint overrides __repr__, and str() would use it
_utf16: Final = "utf-16-be"  # big-endian UTF-16 bytes compare exactly as UTF-16 code units do

_DOUBLE_SPECIAL: Final = {
    "nan": '{"$telo":"double","value":"NaN"}',
    "inf": '{"$telo":"double","value":"Infinity"}',
    "-inf": '{"$telo":"double","value":"-Infinity"}',
}
NEGATIVE_ZERO: Final = '{"$telo":"double","value":"-0"}'
NOT_TEXT: Final = "a string that is not Unicode text (it has an unpaired UTF-16 surrogate)"


class Refusal(Exception):
    """A refusal on its way up; each enclosing container appends its segment (innermost first)."""

    def __init__(self, message: str, *segments: str | int) -> None:
        super().__init__(message)
        self.message = message
        self.segments: list[str | int] = list(segments)


class TooDeep(Exception):
    """Nesting beyond MAX_DEPTH: a cycle, or a value too deep to read back; diagnosed at the top."""


def pointer(segments: list[str | int]) -> str:
    """The JSON Pointer (RFC 6901) of innermost-first ``segments``; unpaired surrogates become U+FFFD."""
    out = []
    for seg in reversed(segments):
        text = str(seg) if type(seg) is int else _replacesurrogates(str(seg))
        out.append("/" + text.replace("~", "~0").replace("/", "~1"))
    return "".join(out)


def _replacesurrogates(text: str) -> str:
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
    except Refusal as refusal:
        raise TypedFrameUnencodable(refusal.message, path=pointer(refusal.segments)) from None
    except (TooDeep, RecursionError):
        pass  # diagnosed below, outside the except block, with the stack unwound
    cycle = _find_cycle(value)
    if cycle is not None:
        raise TypedFrameUnencodable("a value that contains itself", path=pointer(cycle))
    # the writer refuses a container at frame depth MAX_DEPTH: a value nests at most MAX_DEPTH - 1 containers
    raise TypedFrameUnencodable(f"a value nested deeper than {MAX_DEPTH - 1} levels", path="")


# --- containers ------------------------------------------------------------------------------------------
# `depth` is the frame depth of the container being written (the root container is 1); _value takes the
# depth of the container ENCLOSING the value.


def _list(items: list[Any], depth: int) -> str:
    if depth >= MAX_DEPTH:
        raise TooDeep
    out: list[str] = []
    app = out.append
    inner = depth + 1
    try:
        for x in items:
            t = type(x)
            if t is str:
                if not x.isascii() and surrogate(x):
                    raise Refusal(NOT_TEXT)
                app(_esc(x))
            elif t is float:
                r = _float_repr(x)  # inline _double: floats are most of a document's numbers
                if r[-2:] == ".0":
                    app(r[:-2] if r != "-0.0" else NEGATIVE_ZERO)
                elif "e" in r or "n" in r:
                    app(_double(x))
                else:
                    app(r)
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
    except Refusal as refusal:
        refusal.segments.append(len(out))  # every element before the failing one appended exactly once
        raise
    return "[" + ",".join(out) + "]"


# The shape of a JSON-object dict: its keys' '"key":' prefixes in insertion order, the canonical order of its
# members as indices into that, and whether that order is also Python's (code point) order, which the fast
# path's C encoder sorts by. Documents repeat their record shapes, so the key checks, the escaping and the
# sort are done once per shape instead of once per dict. Bounded: cleared when full.
Shape = tuple[tuple[str, ...], list[int], bool]
SHAPES: dict[tuple[Any, ...], Shape] = {}
_SHAPE_CACHE_SIZE: Final = 1024
_SHAPE_MAX_KEYS: Final = 64
_SHAPE_MAX_CHARS: Final = 4096


def learn_shape(keys: tuple[Any, ...], d: dict[Any, Any]) -> Shape | None:
    """The shape of ``d`` if it is a JSON object (every key an exact str, none ``$telo``), else None."""
    all_ascii = True
    for k in keys:
        if type(k) is not str:
            return None
        if not k.isascii():
            if surrogate(k):
                raise Refusal("a map key that is not Unicode text (an unpaired surrogate)", k)
            all_ascii = False
    if "$telo" in d:
        return None
    by_code_point = sorted(range(len(keys)), key=keys.__getitem__)
    if all_ascii:  # ASCII: code point order is UTF-16 code unit order
        order, same = by_code_point, True
    else:
        order = sorted(range(len(keys)), key=lambda i: keys[i].encode(_utf16))
        same = order == by_code_point
    shape = (tuple([_esc(k) + ":" for k in keys]), order, same)
    if len(keys) <= _SHAPE_MAX_KEYS and sum(map(len, keys)) <= _SHAPE_MAX_CHARS:
        if len(SHAPES) >= _SHAPE_CACHE_SIZE:
            SHAPES.clear()
        SHAPES[keys] = shape
    return shape


def _dict(d: dict[Any, Any], depth: int) -> str:
    if depth >= MAX_DEPTH:
        raise TooDeep
    keys = tuple(d)
    shape = SHAPES.get(keys)
    if shape is None:
        shape = learn_shape(keys, d)
        if shape is None:
            return _map(list(d.items()), depth)
    prefixes, order, _ = shape
    out: list[str] = []
    app = out.append
    inner = depth + 1
    k = ""
    try:
        # Members are written in insertion order (so a refusal names the first offending member as given)
        # and joined in canonical order.
        for (k, x), p in zip(d.items(), prefixes, strict=True):
            if type(k) is not str:  # a key merely EQUAL to a cached str (a str subclass): not this shape
                break
            t = type(x)
            if t is str:
                if not x.isascii() and surrogate(x):
                    raise Refusal(NOT_TEXT)
                app(p + _esc(x))
            elif t is float:
                r = _float_repr(x)
                if r[-2:] == ".0":
                    app(p + (r[:-2] if r != "-0.0" else NEGATIVE_ZERO))
                elif "e" in r or "n" in r:
                    app(p + _double(x))
                else:
                    app(p + r)
            elif t is dict:
                app(p + _dict(x, inner))
            elif t is bool:
                app(p + ("true" if x else "false"))
            elif x is None:
                app(p + "null")
            elif t is list:
                app(p + _list(x, inner))
            else:
                app(p + _value(x, depth))
        else:
            return "{" + ",".join([out[i] for i in order]) + "}"
    except Refusal as refusal:
        refusal.segments.append(k)
        raise
    return _map(list(d.items()), depth)  # outside the try: its refusals carry their own key segments


def check_map_keys(pairs: list[tuple[Any, Any]]) -> bool:
    """Check every key of a map (§6.1); True when the map is written as a JSON object (every key a string,
    none of them ``$telo``), False when it is tagged ``map``."""
    all_text = True
    for k, _ in pairs:
        t = type(k)
        if t is str:
            if not k.isascii() and surrogate(k):
                raise Refusal("a map key that is not Unicode text (an unpaired surrogate)", k)
        elif t is int:
            if not INT64_MIN <= k <= INT64_MAX:
                raise Refusal("an int map key outside int64", key_segment(k))
            all_text = False
        elif t is Uint or t is bool:
            all_text = False
        else:
            raise Refusal(f"a map key must be an int, uint, bool or string, not {t.__name__}", key_segment(k))
    return all_text and not any(k == "$telo" for k, _ in pairs)


_T = TypeVar("_T")


def tagged_entries(pairs: list[tuple[Any, Any]], write: Callable[[Any], _T]) -> list[tuple[str, Any, _T]]:
    """The pairs of a tagged map as ``(key frame text, key, written value)`` in canonical order (§6.2):
    by the canonical text of each key's frame, as UTF-16 code units. Refuses two keys of one CEL value."""
    seen: set[tuple[str, object]] = set()
    entries: list[tuple[str, Any, _T]] = []
    for k, x in pairs:
        ident = key_identity(k)
        if ident in seen:
            raise Refusal("two keys of one CEL value (an int and a uint of one number)", key_segment(k))
        seen.add(ident)
        try:
            entries.append((key_frame(k), k, write(x)))
        except Refusal as refusal:
            refusal.segments.append(key_segment(k))
            raise
    # Key frames of distinct keys are distinct, so the order is total.
    if all(e[0].isascii() for e in entries):
        entries.sort(key=itemgetter(0))
    else:
        entries.sort(key=lambda e: e[0].encode(_utf16))
    return entries


def _map(pairs: list[tuple[Any, Any]], depth: int) -> str:
    """Any map (§6.1): a JSON object when every key is a string and none is ``$telo``, else tagged ``map``."""
    if check_map_keys(pairs):
        return _dict(dict(pairs), depth)  # e.g. a CelMap of string keys: the same value as the dict
    # Tagged: the map object at `depth`, its payload list at depth+1, each pair at depth+2.
    if depth + 2 >= MAX_DEPTH:
        raise TooDeep
    entries = tagged_entries(pairs, lambda x: _value(x, depth + 2))
    body = ",".join([f"[{kt},{vt}]" for kt, _, vt in entries])
    return f'{{"$telo":"map","value":[{body}]}}'


def key_frame(k: Any) -> str:
    t = type(k)
    if t is str:
        return _esc(k)
    if t is bool:
        return "true" if k else "false"
    if t is Uint:
        return f'{{"$telo":"uint","value":"{_int_repr(k)}"}}'
    return f'{{"$telo":"int","value":"{_int_repr(k)}"}}'


def key_segment(k: Any) -> str:
    """A map key as a pointer segment: its text (a str subclass too), decimal digits, true/false, or repr."""
    if isinstance(k, str):
        return str.__str__(k)
    if type(k) is bool:
        return "true" if k else "false"
    if isinstance(k, int):
        return _int_repr(k)
    try:
        return repr(k)
    except Exception:  # a key of no CEL type may have a repr that fails; the path must still be built
        return f"<{type(k).__name__}>"


# --- scalars ---------------------------------------------------------------------------------------------


def _double(x: float) -> str:
    r = _float_repr(x)
    if "e" in r:
        return relayout_exponent_form(r)
    if r[-2:] == ".0":  # an integral double: ECMAScript writes no fraction
        r = r[:-2]
        return NEGATIVE_ZERO if r == "-0" else r
    special = _DOUBLE_SPECIAL.get(r)  # "nan", "inf", "-inf": no JSON number, so tagged (§6.1)
    return r if special is None else special


def _int_payload(v: int) -> str:
    if not INT64_MIN <= v <= INT64_MAX:
        raise Refusal("an int outside int64")  # (fastwrite tags ints inline, with this same refusal)
    return _int_repr(v)


def _bytes_payload(v: bytes) -> str:
    return base64.urlsafe_b64encode(v).rstrip(b"=").decode("ascii")


def _timestamp_payload(v: Timestamp) -> str:
    # The constructor validates; checked again because a frozen dataclass can still be forced.
    if not (TIMESTAMP_MIN_SECONDS <= v.seconds <= TIMESTAMP_MAX_SECONDS and 0 <= v.nanos < NANOS_PER_SECOND):
        raise Refusal("a timestamp outside 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999999Z")
    return v.to_text()


def _duration_payload(v: Duration) -> str:
    try:
        Duration(v.seconds, v.nanos)  # re-validate (range, sign of nanos), for the same reason
    except (TypeError, ValueError) as err:
        raise Refusal(f"a duration outside the CEL range: {err}") from None
    return v.to_text()


#: The scalars that are always tagged (§6.1, §6.3): exact type -> (tag, payload text). Telo.Url is a value
#: type declaring members, so it carries its own CEL type as its tag, its payload its plain encoding.
TAGGED_SCALARS: Final[dict[type, tuple[str, Callable[[Any], str]]]] = {
    int: ("int", _int_payload),
    Uint: ("uint", _int_repr),
    bytes: ("bytes", _bytes_payload),
    Timestamp: ("google.protobuf.Timestamp", _timestamp_payload),
    Duration: ("google.protobuf.Duration", _duration_payload),
    Url: ("Telo.Url", Url.to_text),
}


def _value(v: Any, depth: int) -> str:
    t = type(v)
    if t is str:
        if not v.isascii() and surrogate(v):
            raise Refusal(NOT_TEXT)
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
    tagged = TAGGED_SCALARS.get(t)
    if tagged is not None:
        return f'{{"$telo":"{tagged[0]}","value":{_esc(tagged[1](v))}}}'
    if t is CelMap:
        return _map(v.pairs(), depth + 1)
    raise Refusal(f"a value of no CEL type: {t.__module__}.{t.__qualname__}")


# --- diagnosis of a refusal for depth --------------------------------------------------------------------


def _children(node: Any) -> list[tuple[str | int, object]] | None:
    t = type(node)
    if t is list:
        return list(enumerate(node))
    if t is dict:
        return [(key_segment(k), v) for k, v in node.items()]
    if t is CelMap:
        return [(key_segment(k), v) for k, v in node.pairs()]
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
