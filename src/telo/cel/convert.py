"""Value conversion between the CEL value domain (spec §6, :mod:`telo.values.types`) and the CEL library.

Into the library (:func:`to_lib`), per exact Python type:

==================  ==========================================================================================
domain value        what the library is given, and why
==================  ==========================================================================================
None/bool/float/str as is (an ``int`` is range-checked: the library would read 2**63 as a uint)
str with a NUL      a ``google.protobuf.StringValue`` — trap (found here, not in cel-notes): a ``str`` is cut at
                    its first NUL character like ``bytes``; the wrapper message carries it whole
bytes               a ``bytearray`` copy — trap: ``bytes`` are cut at the first NUL byte
Uint                a ``google.protobuf.UInt64Value`` (a plain int would read as ``int``)
Timestamp/Duration  ``google.protobuf.Timestamp``/``Duration`` messages, nanoseconds exact — trap: the library
                    rejects ``datetime``/``timedelta`` in dyn positions
Url                 a ``Telo.Url`` message (:mod:`telo.cel.urltype`)
list                a list of converted elements
dict/CelMap         a dict of converted values; a uint key becomes a hashable stand-in of a ``UInt64Value``
                    (:class:`_KeyMessage`) — trap: protobuf messages are unhashable — a bool key in a map that
                    also has int keys a ``BoolValue`` stand-in, because Python merges ``True`` and ``1``, and a
                    key with a NUL a ``StringValue`` stand-in
==================  ==========================================================================================

Out of the library (:func:`from_value`), from the ``cel.Value`` tree (``Value.value()``: its lists and maps hold
item accessors, each with its own CEL type), not from ``plain_value()``, which reads a uint as an int:

* ``uint`` → :class:`Uint` (the accessor's type says so); ``bytes`` → ``bytes``;
* ``timestamp``/``duration`` — trap: the library hands out ``datetime``/``timedelta``, i.e. MICROseconds, at any
  depth. The value's own debug text (``str(value)``) carries every nanosecond, so the nanoseconds (and a
  duration whole) are read from it instead: exact;
* a map with a non-string key — traps: uint keys come out as plain ints, and ``true`` and ``1`` (or ``false``
  and ``0``) collapse into one Python dict entry. The keys are re-read from the map's debug text, which writes
  ``1u``, ``1`` and ``true`` apart (values are matched against their own debug text, so only keys are parsed).
  A map holding both ``true`` and ``1`` (or ``false`` and ``0``) has already lost an entry in that dict:
  :func:`from_value` raises :class:`KeyCollision`, and the caller re-reads the result with
  :func:`from_value_rereading`, which asks the library for each such map as a list of ``[key, value]`` pairs
  (a derived expression evaluated again: the program decides whether that is allowed, see
  :meth:`telo.cel.env.Program.evaluate`);
* a ``Telo.Url`` message → :class:`~telo.values.Url`;
* an optional, a type value (``type(x)``) or any other message is outside the domain: :class:`Unrepresentable`.

What is exact: every domain value, at any depth, both ways — int/uint/double/bool/null/bytes/string kept apart,
int64 and uint64 extremes, NaN and -0.0, NULs in bytes, strings and map keys, nanosecond timestamps and
durations, maps keyed by int, uint, bool and string together, ``Telo.Url`` with absent vs empty members (tested
by hypothesis round trips through ``x``, ``[x]`` and ``{'k': x}``). What is not: a result map holding ``true``
beside ``1`` (or ``false`` beside ``0``) from a NON-deterministic expression is refused (``ERR_CEL_EVAL``), as
re-reading it would evaluate the expression again; and what a Python-implemented catalog function receives
(see :mod:`telo.cel.catalog`: ``json()`` sees timestamps at microseconds).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any, Final

from telo.cel import _lib
from telo.cel.urltype import is_url_message, url_from_message, url_to_message
from telo.values.plain import parse_cel_duration
from telo.values.types import (
    INT64_MAX,
    INT64_MIN,
    CelMap,
    Duration,
    Timestamp,
    Uint,
    make_map,
)
from telo.values.url import Url

__all__ = [
    "EvalFailed",
    "KeyCollision",
    "NotCel",
    "Unrepresentable",
    "from_result",
    "from_value",
    "from_value_rereading",
    "pairs_expression",
    "to_lib",
]


class NotCel(Exception):
    """A value handed to CEL is outside the value domain; ``path`` lists the keys/indexes down to it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str | int] = []  # innermost last once unwound (each container inserts at 0)

    def where(self) -> str:
        """The path as CEL-ish text: ``steps.a.result[2]``, ``m[1u]``."""
        out = ""
        for seg in self.path:
            if type(seg) is str and seg.isidentifier():
                out += f".{seg}" if out else seg
            elif type(seg) is str:
                out += f"[{seg!r}]"
            else:
                out += f"[{_literal(seg)}]"
        return out or "the value"


class Unrepresentable(Exception):
    """A CEL result has no exact value in the domain (an optional, a type value, a message of another type)."""


class KeyCollision(Unrepresentable):
    """A result map holds ``true`` and ``1`` (or ``false`` and ``0``): the binding's dict lost one entry."""


# --- into the library ----------------------------------------------------------------------------------------


class _KeyMessage:
    """A hashable stand-in for a wrapper message, usable as a Python dict key.

    The library recognises a message by duck typing: it reads ``DESCRIPTOR`` and calls
    ``SerializePartialToString()`` (verified for cel-expr-python 0.1.3, see the trap tests). Real protobuf
    messages are unhashable, so they cannot be dict keys; this object carries the serialized wrapper and
    hashes by (kind, number), so ``True``, ``1`` and ``1u`` stay three keys of one dict.
    """

    __slots__ = ("DESCRIPTOR", "_identity", "_payload")

    def __init__(self, descriptor: Any, payload: bytes, identity: tuple[str, int | str]) -> None:
        self.DESCRIPTOR = descriptor
        self._payload = payload
        self._identity = identity

    def SerializePartialToString(self, **_: Any) -> bytes:
        return self._payload

    SerializeToString = SerializePartialToString

    def __hash__(self) -> int:
        return hash(self._identity)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _KeyMessage) and other._identity == self._identity

    def __repr__(self) -> str:
        kind, key = self._identity
        return f"{key}u" if kind == "uint" else repr(key) if kind == "str" else repr(bool(key))


def _uint_key(n: int) -> _KeyMessage:
    return _KeyMessage(_lib.UINT64_DESCRIPTOR, _lib.UInt64Value(value=n).SerializeToString(), ("uint", n))


def _string_key(s: str) -> _KeyMessage:
    return _KeyMessage(_lib.STRING_DESCRIPTOR, _lib.StringValue(value=s).SerializeToString(), ("str", s))


def _bool_key(b: bool) -> _KeyMessage:
    return _KeyMessage(_lib.BOOL_DESCRIPTOR, _lib.BoolValue(value=b).SerializeToString(), ("bool", int(b)))


def to_lib(value: Any) -> Any:
    """The library's form of a domain value; raises :class:`NotCel` for anything outside the domain."""
    t = type(value)
    if t is str:
        if not value.isascii():
            _check_text(value)
        if "\x00" in value:
            return _lib.StringValue(value=value)
        return value
    if t is bool or t is float or value is None:
        return value
    if t is int:
        if not INT64_MIN <= value <= INT64_MAX:
            raise NotCel(f"an int outside int64: {value}")
        return value
    if t is dict:
        out: dict[Any, Any] = {}
        for k, v in value.items():
            if type(k) is not str or not k.isascii() or "\x00" in k:  # checked (and stood in for) the slow way
                return _map_to_lib(list(value.items()))
            try:
                out[k] = to_lib(v)
            except NotCel as e:
                e.path.insert(0, k)
                raise
        return out
    if t is list:
        items: list[Any] = []
        for i, v in enumerate(value):
            try:
                items.append(to_lib(v))
            except NotCel as e:
                e.path.insert(0, i)
                raise
        return items
    convert = _SCALARS.get(t)
    if convert is not None:
        return convert(value)
    if t is CelMap:
        return _map_to_lib(value.pairs())
    raise NotCel(f"a value of type {t.__name__}, which is not a CEL value")


def is_plain_key(key: str) -> bool:
    """Whether the library reads this map key as it is: Unicode text with no NUL (see :func:`to_lib`)."""
    if "\x00" in key:
        return False
    if key.isascii():
        return True
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_text(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise NotCel("a string that is not Unicode text (an unpaired surrogate)") from None


def _map_to_lib(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    kinds = {type(k) for k, _ in pairs}
    # Python merges True with 1 (and False with 0); CEL keeps them apart. Stand-ins only when both kinds occur.
    bools_apart = bool in kinds and (int in kinds or Uint in kinds)
    out: dict[Any, Any] = {}
    for k, v in pairs:
        tk = type(k)
        key: Any
        if tk is str:
            if not k.isascii():
                _check_text(k)
            key = _string_key(k) if "\x00" in k else k
        elif tk is bool:
            key = _bool_key(k) if bools_apart else k
        elif tk is int:
            if not INT64_MIN <= k <= INT64_MAX:
                raise NotCel(f"an int map key outside int64: {k}")
            key = k
        elif tk is Uint:
            key = _uint_key(int(k))
        else:
            raise NotCel(f"a map key of type {tk.__name__}; CEL map keys are int, uint, bool or string")
        if key in out:
            raise NotCel(f"the map key {k!r} twice (CEL makes an int and a uint of one number one key)")
        try:
            out[key] = to_lib(v)
        except NotCel as e:
            e.path.insert(0, k)
            raise
    return out


def _timestamp_to_lib(ts: Timestamp) -> Any:
    return _lib.Timestamp(seconds=ts.seconds, nanos=ts.nanos)


def _duration_to_lib(d: Duration) -> Any:
    return _lib.Duration(seconds=d.seconds, nanos=d.nanos)


_SCALARS: Final[dict[type, Callable[[Any], Any]]] = {
    bytes: bytearray,  # trap: bytes are cut at the first NUL byte; a bytearray is read whole
    Uint: lambda u: _lib.UInt64Value(value=int(u)),
    Timestamp: _timestamp_to_lib,
    Duration: _duration_to_lib,
    Url: url_to_message,
}


# --- out of the library ---------------------------------------------------------------------------------------


class EvalFailed(Exception):
    """The result is an ERROR value: the evaluation failed; ``args[0]`` is the library's text."""


def from_result(v: _lib.CelValue) -> Any:
    """The domain value of an evaluation result; raises :class:`EvalFailed` for an ERROR value (runtime errors
    are RETURNED as values by the library, not raised — trap) and :class:`Unrepresentable`."""
    try:
        py = v.value()
    except TypeError:  # the binding cannot hand out an optional (or another kind it does not know)
        raise Unrepresentable(f"an {_kind(v)} value, which is not in the value domain") from None
    if type(py) is str:  # an ERROR value reads as its text: only a string result needs the type check
        if v.type() == _lib.ERROR:
            raise EvalFailed(py)
        return py
    return _from_py(v, py)


def from_value(v: _lib.CelValue) -> Any:
    """The domain value of an item accessor (never an ERROR: errors do not nest); raises
    :class:`Unrepresentable`."""
    try:
        py = v.value()
    except TypeError:  # the binding cannot hand out an optional (or another kind it does not know)
        raise Unrepresentable(f"an {_kind(v)} value, which is not in the value domain") from None
    return _from_py(v, py)


def _from_py(v: _lib.CelValue, py: Any) -> Any:
    t = type(py)
    if t is str or t is bool or t is float or py is None:
        return py
    if t is int:
        return Uint(py) if v.type() == _lib.UINT else py
    if t is list:
        return [from_value(item) for item in py]
    if t is dict:
        for k in py:
            if type(k) is not str:
                return _exact_map(v, py)
        return {k: from_value(item) for k, item in py.items()}
    if t is bytearray or t is bytes:
        return bytes(py)
    if t is datetime.datetime:
        return _timestamp(py, v)
    if t is datetime.timedelta:
        return parse_cel_duration(str(v))
    if is_url_message(py):
        try:
            return url_from_message(py)
        except (TypeError, ValueError) as e:
            raise Unrepresentable(f"a Telo.Url whose members make no URL: {e}") from None
    if t is _lib.TYPE_CLASS:
        raise Unrepresentable(f"a type ({py!s}), which is not in the value domain")
    raise Unrepresentable(f"a {_kind(v)} value, which is not in the value domain")


def _kind(v: _lib.CelValue) -> str:
    try:
        name = v.type().name()
    except Exception:
        return "unknown"
    return "optional" if name == "ERROR" else name


_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_SECOND: Final = datetime.timedelta(seconds=1)


def _timestamp(py: datetime.datetime, v: _lib.CelValue) -> Timestamp:
    """Whole seconds from the ``datetime`` (exact, floor for instants before 1970), nanoseconds from the value's
    text, which carries all nine digits (``1-01-01T00:00:00.000000001Z``: the year is not even zero-padded)."""
    seconds = (py - _EPOCH) // _SECOND
    text = str(v)
    dot = text.rfind(".")
    return Timestamp(seconds, int(text[dot + 1 : -1].ljust(9, "0")) if dot >= 0 else 0)


# Key tokens in a map's debug text: a quoted string (either quote, backslash escapes), true/false, or an integer
# with an optional `u` (uint; printed signed by the library, see _read_key).
_BOOL_OR_NUMBER_KEY: Final = re.compile(r"true|false|-?\d+u?")


def _exact_map(v: _lib.CelValue, items: dict[Any, _lib.CelValue]) -> dict[Any, Any] | CelMap:
    """Read a map with a non-string key exactly, its key types taken from the map's debug text.

    The debug text is ``{k1: v1, k2: v2}`` in the same order as the dict the binding built. Each value's text
    is the item accessor's own ``str()``, so values are skipped by matching that text, and only keys are
    tokenised. Any disagreement means the dict lost an entry (``true`` beside ``1``): refuse.
    """
    text = str(v)
    pos = 1 if text.startswith("{") else -1
    pairs: list[tuple[Any, Any]] = []
    for k, item in items.items():
        if pos < 0:
            break
        key, pos = _read_key(text, pos, k)
        if pos < 0 or not text.startswith(": ", pos):
            pos = -1
            break
        pos += 2
        value_text = str(item)
        if not text.startswith(value_text, pos):
            pos = -1
            break
        pos += len(value_text)
        if text.startswith(", ", pos):
            pos += 2
        pairs.append((key, from_value(item)))
    if pos != len(text) - 1 or not text.endswith("}"):
        raise KeyCollision(
            "a map with both true and 1 (or false and 0) as keys: the CEL library returns such a map with one "
            "of the two entries lost"
        )
    return make_map(pairs)


def _read_key(text: str, pos: int, expected: Any) -> tuple[Any, int]:
    """The key at ``pos`` (typed from its text) and the position after it; ``-1`` if it is not ``expected``."""
    if type(expected) is str:
        quote = text[pos : pos + 1]
        if quote not in ("'", '"'):
            return None, -1
        i = pos + 1
        while i < len(text):
            c = text[i]
            if c == "\\":
                i += 2
                continue
            if c == quote:
                return expected, i + 1
            i += 1
        return None, -1
    m = _BOOL_OR_NUMBER_KEY.match(text, pos)
    if not m:
        return None, -1
    token = m.group()
    if token in ("true", "false"):
        key: Any = token == "true"
        ok = type(expected) is bool and expected is key
    else:
        number = int(token.rstrip("u"))
        if token.endswith("u"):
            # The library prints a uint of 2**63 or more as its int64 bit pattern (-1u for 2**64-1).
            ok = type(expected) is int and expected in (number, number + 2**64)
            key = Uint(expected) if ok else None
        else:
            ok = type(expected) is int and expected == number
            key = number
    return (key, m.end()) if ok else (None, -1)


# --- the slow path: maps re-read as pairs ---------------------------------------------------------------------

#: The variable a derived expression binds the original result to (never a declared name: ``__`` + ``telo``).
RESULT_VAR: Final = "__telo_r"


def pairs_expression(expression: str, path: str) -> str:
    """The derived expression that yields the map at ``path`` (rooted at :data:`RESULT_VAR`) as pairs.

    The original text is parenthesised on lines of its own, so a trailing ``//`` comment cannot swallow the
    closing parenthesis.
    """
    return (
        f"cel.bind({RESULT_VAR}, (\n{expression}\n), "
        f"{path}.map(__telo_k, [__telo_k, {path}[__telo_k]]))"
    )


def from_value_rereading(v: _lib.CelValue, reread: Callable[[str], _lib.CelValue]) -> Any:
    """Like :func:`from_value`, but every map with a non-string key is read through ``reread(path)``, which
    evaluates :func:`pairs_expression` for the CEL path of that map (``dyn(__telo_r)[0]['a']``)."""
    return _rereading(v, f"dyn({RESULT_VAR})", reread)


def _rereading(v: _lib.CelValue, path: str, reread: Callable[[str], _lib.CelValue]) -> Any:
    try:
        py = v.value()
    except TypeError:
        return from_value(v)  # raises Unrepresentable with the usual wording
    if type(py) is list:
        return [_rereading(item, f"{path}[{i}]", reread) for i, item in enumerate(py)]
    if type(py) is not dict:
        return from_value(v)
    if all(type(k) is str for k in py):
        return {k: _rereading(item, f"{path}[{_literal(k)}]", reread) for k, item in py.items()}
    listed = reread(path)
    pairs: list[tuple[Any, Any]] = []
    for pair in listed.value():
        key_item, value_item = pair.value()
        key = from_value(key_item)
        pairs.append((key, _rereading(value_item, f"{path}[{_literal(key)}]", reread)))
    return make_map(pairs)


def _literal(key: Any) -> str:
    """The CEL literal of a map key."""
    t = type(key)
    if t is bool:
        return "true" if key else "false"
    if t is Uint:
        return f"{int(key)}u"
    if t is int:
        return str(key)
    return '"' + "".join(c if " " <= c <= "~" and c not in '"\\' else f"\\U{ord(c):08x}" for c in key) + '"'
