"""The typed frame (spec §6.1-§6.3): :func:`encode_frame` writes it, :func:`decode_frame` reads it strictly.

The writer is :mod:`telo.values.fastwrite` (CPython's C encoder over a prepared tree), backed by the reference
writer :mod:`telo.values.canonical` for what the C encoder cannot write; this module is the reader and the
public entry point for both directions.

Reading (§6.2), in the order the spec fixes:

1. text that is not JSON is refused at the empty pointer (``NaN``/``Infinity`` literals included, which
   Python's own ``json`` would accept);
2. then the FIRST repeated member name in text order, at its pointer;
3. then the values, in text order (pre-order): tags, payloads, keys, strings and numbers.

Any JSON number, integral or not, reads as the nearest double (``float(text)`` rounds correctly, half to
even); one whose nearest double is not finite (``1e400``) is refused. A member name in a pointer has each
unpaired surrogate replaced by U+FFFD. A frame whose containers nest deeper than
:data:`~telo.values.canonical.MAX_DEPTH` is refused at the empty pointer before everything but (1): that is
this runtime's limit, not a spec rule, and it keeps the reader inside CPython's recursion limit. Every
refusal is a :class:`~telo.errors.TypedFrameUndecodable`; nothing else escapes for any input ``str``.

How it stays fast: the C ``json`` scanner parses, objects kept as tuples of pairs
(``object_pairs_hook=tuple``, a C call) so repeats stay visible; one walk then turns objects into dicts,
reads tags, and checks strings and numbers, raising at the first problem. Only when something is refused
does a second, exact scan establish which refusal comes first in the spec's order and build its pointer.
(Parsing into plain dicts and ruling repeats out by counting ``":`` in the text instead was measured: the
text scans cost what the tuples save.)
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable
from typing import Any, Final

from telo.errors import TypedFrameUndecodable
from telo.values.canonical import MAX_DEPTH, pointer
from telo.values.fastwrite import encode_frame
from telo.values.numbers import read_int_payload, read_uint_payload
from telo.values.types import Duration, Uint, key_identity, make_map, parse_canonical_timestamp
from telo.values.url import Url

__all__ = ["MAX_DEPTH", "decode_frame", "encode_frame"]

_surrogate: Final = re.compile("[\ud800-\udfff]").search
_NOT_TEXT: Final = "a string that is not Unicode text (it has an unpaired UTF-16 surrogate)"
_BEYOND_DOUBLE: Final = "a number whose nearest double is not finite (an infinity is tagged double)"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder, built once (json.loads(..., hooks) would build a new one per call). parse_int=float reads
# every integer as the nearest double and never meets CPython's 4300-digit int conversion limit.
_parse: Final = json.JSONDecoder(parse_int=float, parse_constant=_no_constant, object_pairs_hook=tuple).decode


class _Refuse(Exception):
    """A refusal on its way up; each enclosing container appends its segment (innermost first)."""

    def __init__(self, message: str, *segments: str | int) -> None:
        super().__init__(message)
        self.message = message
        self.segments: list[str | int] = list(segments)


class _Repeat(Exception):
    pass


class _TooDeep(Exception):
    pass


_Readers = dict[str, Callable[[Any, int, Any], Any]]


def decode_frame(text: str, *, version: int = 2) -> Any:
    """Read a typed frame (§6.2) back into the value it was written from, CEL type included.

    ``version`` is the codec version the frame was recorded under (spec §5.2): 2 reads the trimmed
    nanosecond timestamps of §6.3; 1 reads codec v1's timestamps of exactly three fractional digits; every
    other tag is read the same way by both. Raises :class:`~telo.errors.TypedFrameUndecodable` with the JSON
    Pointer of the offending node inside the frame.
    """
    if version == 2:
        readers = _READERS_V2
    elif version == 1:
        readers = _READERS_V1
    else:
        raise ValueError(f"typed-frame codec version {version!r} is not one this runtime reads (1 or 2)")
    if type(text) is not str:
        raise TypeError(f"a typed frame is read from a str, not {type(text).__name__}")
    try:
        tree = _parse(text)
    except RecursionError:
        raise TypedFrameUndecodable(f"a frame nested deeper than {MAX_DEPTH} levels", path="") from None
    except Exception as err:  # JSONDecodeError, a NaN/Infinity literal, anything the scanner refuses
        raise TypedFrameUndecodable(f"text that is not JSON: {err}", path="") from None
    try:
        return _node(tree, 1, readers)
    except (_Refuse, _Repeat, _TooDeep, RecursionError) as err:
        failure: BaseException = err
    # Something is refused: find which refusal comes first in the spec's order.
    too_deep, repeat = _scan(tree)
    if too_deep:
        raise TypedFrameUndecodable(f"a frame nested deeper than {MAX_DEPTH} levels", path="")
    if repeat is not None:
        raise TypedFrameUndecodable(
            "a member name an earlier member of the same object already carries", path=pointer(repeat)
        )
    if isinstance(failure, _Refuse):
        raise TypedFrameUndecodable(failure.message, path=pointer(failure.segments))
    # A RecursionError with the nesting inside MAX_DEPTH: the caller's own stack was already deep.
    raise TypedFrameUndecodable("a frame nested too deeply for the reader's remaining stack", path="")


# --- the walk -------------------------------------------------------------------------------------------
# `depth` is the nesting of the container being read (the root container is 1), counted over the frame's
# JSON arrays and objects, tags included, exactly as _scan counts it.


def _node(x: Any, depth: int, readers: _Readers) -> Any:
    t = type(x)
    if t is tuple:
        return _object(x, depth, readers)
    if t is list:
        _list(x, depth, readers)
    elif t is str:
        if not x.isascii() and _surrogate(x):
            raise _Refuse(_NOT_TEXT)
    elif t is float and x - x != 0.0:  # inf - inf is NaN; JSON cannot write NaN itself
        raise _Refuse(_BEYOND_DOUBLE)
    return x


def _list(items: list[Any], depth: int, readers: _Readers) -> None:
    """Check and convert a JSON array IN PLACE (the tree is the reader's own)."""
    if depth > MAX_DEPTH:
        raise _TooDeep
    inner = depth + 1
    i = 0
    try:
        for i, x in enumerate(items):
            t = type(x)
            if t is str:
                if not x.isascii() and _surrogate(x):
                    raise _Refuse(_NOT_TEXT)
            elif t is float:
                if x - x != 0.0:
                    raise _Refuse(_BEYOND_DOUBLE)
            elif t is tuple:
                items[i] = _object(x, inner, readers)
            elif t is list:
                _list(x, inner, readers)
    except _Refuse as refusal:
        refusal.segments.append(i)
        raise


def _object(pairs: tuple[tuple[str, Any], ...], depth: int, readers: _Readers) -> Any:
    if depth > MAX_DEPTH:
        raise _TooDeep
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _Repeat
    if "$telo" in d:
        return _tag(d, depth, readers)
    inner = depth + 1
    k = ""
    try:
        for k, x in pairs:
            if not k.isascii() and _surrogate(k):
                raise _Refuse("a member name that is not Unicode text (an unpaired UTF-16 surrogate)")
            t = type(x)
            if t is str:
                if not x.isascii() and _surrogate(x):
                    raise _Refuse(_NOT_TEXT)
            elif t is float:
                if x - x != 0.0:
                    raise _Refuse(_BEYOND_DOUBLE)
            elif t is tuple:
                d[k] = _object(x, inner, readers)
            elif t is list:
                _list(x, inner, readers)
    except _Refuse as refusal:
        refusal.segments.append(k)
        raise
    return d


def _tag(d: dict[str, Any], depth: int, readers: _Readers) -> Any:
    """An object with a ``$telo`` member is always a tag (§6.1)."""
    tag = d["$telo"]
    if type(tag) is not str:
        raise _Refuse(f"a tag ($telo) that is not a string: {_show(tag)}")
    if len(d) != 2 or "value" not in d:
        raise _Refuse(f"a tagged object carries exactly the members $telo and value, not {_show(list(d))}")
    reader = readers.get(tag)
    if reader is None:
        raise _Refuse(f"a tag outside the vocabulary of §6.3: {_show(tag)}", "$telo")
    try:
        return reader(d["value"], depth, readers)
    except _Refuse as refusal:
        refusal.segments.append("value")
        raise


def _show(x: object) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


# --- tag payloads (§6.3) ----------------------------------------------------------------------------------


def _text_payload(what: str, parse: Callable[[str], Any]) -> Callable[[Any, int, Any], Any]:
    """A reader of a payload that is canonical text; ``parse`` raises for anything else."""

    def read(payload: Any, depth: int, readers: Any) -> Any:
        if type(payload) is not str:
            raise _Refuse(f"a {what} payload that is not a string: {_show(payload)}")
        try:
            return parse(payload)
        except Exception as err:  # the payload parsers raise ValueError; nothing else may escape the reader
            raise _Refuse(f"a {what} payload not in its canonical form: {err}") from None

    return read


_DOUBLES: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf, "-0": -0.0}


def _parse_double(text: str) -> float:
    value = _DOUBLES.get(text)
    if value is None:
        raise ValueError(f"{_show(text)}: a finite double is a JSON number, not a tag")
    return value


_BASE64URL: Final = re.compile(r"[A-Za-z0-9_-]*")


def _parse_bytes(text: str) -> bytes:
    if not _BASE64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError(f"{_show(text)} is not base64url without padding")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii") != text:
        raise ValueError(f"{_show(text)} has unused trailing bits that are not zero")
    return data


def _read_map(payload: Any, depth: int, readers: _Readers) -> Any:
    """A list of [key, value] frames; keys int, uint, bool or string, each CEL value once (§6.1, §6.3)."""
    if type(payload) is not list:
        raise _Refuse("a map payload that is not a list of [key, value] pairs")
    if depth + 1 > MAX_DEPTH:
        raise _TooDeep
    pair_depth = depth + 2
    pairs: list[tuple[Any, Any]] = []
    seen: set[tuple[str, object]] = set()
    plain_keys = True  # every key a string and none of them $telo: the frame should have been an object
    i = 0
    try:
        for i, entry in enumerate(payload):  # noqa: B007 - `i` is read by the except clause
            te = type(entry)
            if (te is list or te is tuple) and pair_depth > MAX_DEPTH:
                raise _TooDeep
            if te is not list or len(entry) != 2:
                raise _Refuse("a map entry that is not a [key, value] pair")
            try:
                key = _node(entry[0], pair_depth + 1, readers)
            except _Refuse as refusal:
                refusal.segments.append(0)
                raise
            tk = type(key)
            if tk is str:
                if key == "$telo":
                    plain_keys = False
            elif tk is int or tk is Uint or tk is bool:
                plain_keys = False
            else:
                raise _Refuse(f"a map key that is not an int, uint, bool or string: {_show(key)}", 0)
            ident = key_identity(key)
            if ident in seen:  # int 2 and uint 2 are one CEL key
                raise _Refuse(f"a repeated map key: {_show(key)}", 0)
            seen.add(ident)
            try:
                value = _node(entry[1], pair_depth + 1, readers)
            except _Refuse as refusal:
                refusal.segments.append(1)
                raise
            pairs.append((key, value))
    except _Refuse as refusal:
        refusal.segments.append(i)
        raise
    if plain_keys:
        raise _Refuse("a tagged map whose keys are all strings other than $telo (its frame is a JSON object)")
    return make_map(pairs)


def _readers(timestamp: Callable[[str], Any]) -> _Readers:
    return {
        "int": _text_payload("int", read_int_payload),
        "uint": _text_payload("uint", read_uint_payload),
        "double": _text_payload("double", _parse_double),
        "bytes": _text_payload("bytes", _parse_bytes),
        "google.protobuf.Timestamp": _text_payload("google.protobuf.Timestamp", timestamp),
        "google.protobuf.Duration": _text_payload("google.protobuf.Duration", Duration.from_text),
        "map": _read_map,
        "Telo.Url": _text_payload("Telo.Url", Url.from_canonical_text),
    }


_READERS_V2: Final = _readers(lambda text: parse_canonical_timestamp(text, version=2))
_READERS_V1: Final = _readers(lambda text: parse_canonical_timestamp(text, version=1))


# --- the exact scan, run only once something is refused ---------------------------------------------------


def _scan(tree: Any) -> tuple[bool, list[str | int] | None]:
    """Over the raw (partly converted) tree: is any container deeper than MAX_DEPTH, and where is the
    first repeated member name in text order (innermost-first segments)?

    Iterative, so it cannot itself overflow the stack. A pre-order walk that checks each member's name
    just before descending into its value visits names in text order. Converted nodes (dicts and domain
    values) are leaves here: the walk only converted subtrees it had fully accepted.
    """
    repeat: list[str | int] | None = None
    if type(tree) is not tuple and type(tree) is not list:
        return False, None
    segs: list[str | int] = []
    stack: list[tuple[Any, set[str] | None, int]] = [(_members(tree), _names(tree), 1)]
    while stack:
        it, seen, depth = stack[-1]
        step = next(it, None)
        if step is None:
            stack.pop()
            if segs:
                segs.pop()
            continue
        seg, child = step
        if seen is not None:
            if repeat is None and seg in seen:
                repeat = [seg, *reversed(segs)]  # innermost first, like _Refuse.segments
            seen.add(seg)
        tc = type(child)
        if tc is tuple or tc is list:
            if depth + 1 > MAX_DEPTH:
                return True, None
            segs.append(seg)
            stack.append((_members(child), _names(child), depth + 1))
    return False, repeat


def _members(node: Any) -> Any:
    return iter(node) if type(node) is tuple else enumerate(node)


def _names(node: Any) -> set[str] | None:
    return set() if type(node) is tuple else None
