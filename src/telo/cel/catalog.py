"""The Telo catalog functions (telo-reference §2) and their determinism flags (§12, spec §4).

Every function here is declared through one ``cel.CelExtension`` (trap: a ``dyn``-parameter function declared
any other way never dispatches). Time functions read the :class:`~telo.clock.Clock` the caller of
:meth:`telo.cel.Program.evaluate` injects (a context variable set around the evaluation), never the system
clock directly.

What reaches a Python-implemented function is the library's plain conversion of its arguments, which is lossy
(cel-notes): a uint arrives as an int, a timestamp/duration as ``datetime``/``timedelta`` (microseconds), a map
holding ``true`` and ``1`` with one entry merged. Hence:

* ``json(v)`` writes timestamps and durations inside ``v`` at microsecond precision (``string(t)`` first keeps
  nanoseconds); uints are unaffected (the plain encoding writes an int and a uint alike);
* ``default(v, fallback)`` and ``coalesce(list)`` would return their argument through that conversion, so a
  program calling them is evaluated in an equivalent rewritten form instead, exact
  (:mod:`telo.cel.rewrite`); the Python implementations below only serve where the rewrite does not apply.
* ``default(v, fallback)`` replaces a NULL ``v`` only: no CEL function sees an argument that failed
  (``default(inputs.missing, 'x')`` still fails with ``ERR_CEL_NO_SUCH_KEY``); write
  ``inputs.?missing.orValue('x')`` or ``has(inputs.missing) ? inputs.missing : 'x'`` for absent keys.
"""

from __future__ import annotations

import datetime
import json as _json
import math
import uuid
import zoneinfo
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from telo.cel import _lib
from telo.cel.errors import FUNCTION_FAILURE_MARK
from telo.cel.urltype import URL_CEL_TYPE, is_url_message, url_from_message, url_to_message
from telo.clock import SYSTEM_CLOCK, Clock, random_bits, uuid4, uuid7
from telo.values.numbers import double_text
from telo.values.plain import to_plain
from telo.values.types import INT64_MAX, INT64_MIN, CelMap, Duration, Timestamp
from telo.values.url import Url

__all__ = ["CLOCK", "FUNCTIONS", "FunctionInfo", "canonical_json", "extension"]

#: The clock the time functions read; :meth:`telo.cel.Program.evaluate` sets it for the evaluation.
CLOCK: ContextVar[Clock] = ContextVar("telo_cel_clock", default=SYSTEM_CLOCK)


@dataclass(frozen=True, slots=True)
class FunctionInfo:
    """A catalog entry: ``deterministic=False`` makes ``DURABLE_NONDETERMINISM`` fire inside an idempotent
    region (telo-reference §12); ``signatures`` are for documentation and diagnostics."""

    name: str
    deterministic: bool
    signatures: tuple[str, ...]
    doc: str


# --- implementations -------------------------------------------------------------------------------------------


def _now_ns() -> int:
    return CLOCK.get().now_ns()


def _now_timestamp() -> Any:
    s, n = divmod(_now_ns(), 1_000_000_000)
    return _lib.Timestamp(seconds=s, nanos=n)


def _zone(name: str | None) -> datetime.tzinfo:
    if name is None or name in ("UTC", "Z"):
        return datetime.UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (use an IANA name such as 'Europe/Paris')") from None


_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _now_in(tz: str | None) -> datetime.datetime:
    return (_EPOCH + datetime.timedelta(microseconds=_now_ns() // 1000)).astimezone(_zone(tz))


def _now_iso(tz: str | None = None) -> str:
    """``2026-01-15T07:30:00.000Z`` (UTC) or ``2026-01-15T08:30:00.000+01:00`` — milliseconds, as JavaScript's
    ``Date.toISOString()`` writes them (the upstream runtime's form)."""
    moment = _now_in(tz)
    text = moment.isoformat(timespec="milliseconds")
    return text[:-6] + "Z" if text.endswith("+00:00") and (tz is None or tz in ("UTC", "Z")) else text


def _today(tz: str | None = None) -> str:
    return _now_in(tz).date().isoformat()


_UUID_EPOCH_OFFSET: Final = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 to 1970-01-01 (RFC 9562)


def _gregorian_100ns() -> int:
    return (_now_ns() // 100 + _UUID_EPOCH_OFFSET) & ((1 << 60) - 1)


def _uuidv1() -> str:
    ts = _gregorian_100ns()
    clock_seq = random_bits(14)
    node = random_bits(48) | (1 << 40)  # a random node id has the multicast bit set (RFC 9562 §6.10)
    fields = (ts & 0xFFFFFFFF, (ts >> 32) & 0xFFFF, (ts >> 48) | 0x1000, 0x80 | clock_seq >> 8, clock_seq & 0xFF, node)
    return str(uuid.UUID(fields=fields))


def _uuidv6() -> str:
    ts = _gregorian_100ns()
    rand = random_bits(62)
    value = (ts >> 12) << 80 | 0x6 << 76 | (ts & 0xFFF) << 64 | 0b10 << 62 | rand
    return str(uuid.UUID(int=value))


def _namespace(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise ValueError(f"the namespace {text!r} is not a UUID") from None


def _plain_domain(x: Any) -> Any:
    """The library's plain conversion of an argument back to a domain value, as well as it can be:
    ``datetime``/``timedelta`` are microseconds, a uint already reads as an int."""
    t = type(x)
    if t is bytearray:
        return bytes(x)
    if t is list:
        return [_plain_domain(e) for e in x]
    if t is dict:
        return CelMap((_plain_domain(k), _plain_domain(v)) for k, v in x.items())
    if t is datetime.datetime:
        delta = x - _EPOCH
        return Timestamp.from_epoch_nanos((delta // datetime.timedelta(microseconds=1)) * 1000)
    if t is datetime.timedelta:
        return Duration.from_nanos((x // datetime.timedelta(microseconds=1)) * 1000)
    if is_url_message(x):
        return url_from_message(x)
    return x


def _plain_lib(x: Any) -> Any:
    """What a function may hand back to the library: ``datetime``/``timedelta`` are refused there."""
    t = type(x)
    if t is list:
        return [_plain_lib(e) for e in x]
    if t is dict:
        return {k: _plain_lib(v) for k, v in x.items()}
    if t is datetime.datetime or t is datetime.timedelta:
        value = _plain_domain(x)
        if t is datetime.datetime:
            return _lib.Timestamp(seconds=value.seconds, nanos=value.nanos)
        return _lib.Duration(seconds=value.seconds, nanos=value.nanos)
    return x


def canonical_json(plain: Any) -> str:
    """RFC 8785-style canonical text of a plain JSON value (spec §6.2 rules: no whitespace, keys by UTF-16)."""
    t = type(plain)
    if plain is None:
        return "null"
    if t is bool:
        return "true" if plain else "false"
    if t is int:
        return str(plain)
    if t is float:
        return double_text(plain)
    if t is str:
        return _json.encoder.encode_basestring(plain)  # escapes exactly as §6.2 asks (ensure_ascii off)
    if t is list:
        return "[" + ",".join(canonical_json(e) for e in plain) + "]"
    items = sorted(plain.items(), key=lambda kv: kv[0].encode("utf-16-be", "surrogatepass"))
    return "{" + ",".join(f"{canonical_json(k)}:{canonical_json(v)}" for k, v in items) + "}"


def _json_of(value: Any) -> str:
    return canonical_json(to_plain(_plain_domain(value)))


def _read_json_number(text: str) -> int | float:
    n = int(text)
    # JSON has one number type; an integer beyond int64 reads as the double nearest it, as JSON.parse does.
    return n if INT64_MIN <= n <= INT64_MAX else float(n)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_json(text: str) -> Any:
    value = _json.loads(text, parse_int=_read_json_number, parse_constant=_refuse_constant)
    return _finite(value)


def _finite(x: Any) -> Any:
    if type(x) is float and not math.isfinite(x):
        raise ValueError("a JSON number beyond the double range")
    if type(x) is list:
        return [_finite(e) for e in x]
    if type(x) is dict:
        return {k: _finite(v) for k, v in x.items()}
    return x


def _coalesce(items: list[Any]) -> Any:
    return _plain_lib(next((x for x in items if x is not None), None))


def _default(value: Any, fallback: Any) -> Any:
    return _plain_lib(fallback if value is None else value)


def _url(text: str) -> Any:
    return url_to_message(Url.parse(text))


def _url_text(message: Any) -> str:
    return url_from_message(message).to_text()


# --- the catalog ---------------------------------------------------------------------------------------------------

_S, _I, _D, _T = _lib.STRING, _lib.INT, _lib.DYN, _lib.TIMESTAMP

# name -> (deterministic, doc, overloads (id, result, params, impl))
_SPEC: Final[dict[str, tuple[bool, str, list[tuple[str, Any, list[Any], Callable[..., Any]]]]]] = {
    "nowMillis": (False, "epoch milliseconds (int)", [("nowMillis", _I, [], lambda: _now_ns() // 1_000_000)]),
    "nowSeconds": (False, "epoch seconds (int)", [("nowSeconds", _I, [], lambda: _now_ns() // 1_000_000_000)]),
    "now": (False, "the current instant (timestamp, nanoseconds)", [("now", _T, [], _now_timestamp)]),
    "nowIso": (
        False,
        "the current instant as ISO 8601 text, milliseconds; UTC (Z) or the given IANA zone's offset",
        [("nowIso", _S, [], _now_iso), ("nowIso_string", _S, [_S], _now_iso)],
    ),
    "today": (
        False,
        "today's date YYYY-MM-DD in UTC or the given IANA zone",
        [("today", _S, [], _today), ("today_string", _S, [_S], _today)],
    ),
    "uuidv1": (False, "a time-based UUID (random node)", [("uuidv1", _S, [], _uuidv1)]),
    "uuidv4": (False, "a random UUID", [("uuidv4", _S, [], uuid4)]),
    "uuidv6": (False, "a time-ordered UUID (RFC 9562 v6)", [("uuidv6", _S, [], _uuidv6)]),
    "uuidv7": (False, "a time-ordered UUID (RFC 9562 v7)", [("uuidv7", _S, [], lambda: uuid7(CLOCK.get()))]),
    "uuidv3": (
        True,
        "the name-based MD5 UUID of (namespace UUID, name)",
        [("uuidv3_string_string", _S, [_S, _S], lambda ns, name: str(uuid.uuid3(_namespace(ns), name)))],
    ),
    "uuidv5": (
        True,
        "the name-based SHA-1 UUID of (namespace UUID, name)",
        [("uuidv5_string_string", _S, [_S, _S], lambda ns, name: str(uuid.uuid5(_namespace(ns), name)))],
    ),
    "json": (
        True,
        "the canonical JSON text of the value's plain encoding (spec §6.4; timestamps at microseconds)",
        [("json_dyn", _S, [_D], _json_of)],
    ),
    "parseJson": (
        True,
        "the value of a JSON text (integers as int, beyond int64 as double)",
        [("parseJson_string", _D, [_S], _parse_json)],
    ),
    "coalesce": (
        True,
        "the first non-null element of a list, or null",
        [("coalesce_list", _D, [_lib.LIST_DYN], _coalesce)],
    ),
    "default": (
        True,
        "the value, or the fallback when the value is null (a failed value still fails)",
        [("default_dyn_dyn", _D, [_D, _D], _default)],
    ),
    "url": (True, "the Telo.Url of a URL text", [("url_string", URL_CEL_TYPE, [_S], _url)]),
    "string": (
        True,
        "standard string(); plus the url-text of a Telo.Url",
        [("string_telo_url", _S, [URL_CEL_TYPE], _url_text)],
    ),
}


def _guard(name: str, impl: Callable[..., Any]) -> Callable[..., Any]:
    """Mark what a catalog function raises: the library reports any Python exception as OUT_OF_RANGE."""

    def call(*args: Any) -> Any:
        try:
            return impl(*args)
        except Exception as e:  # every failure becomes a CEL error value, named
            raise RuntimeError(f"{FUNCTION_FAILURE_MARK}{name}(): {e}") from e

    call.__name__ = name
    return call


def _signature(params: list[Any], result: Any) -> str:
    return f"({', '.join(p.name().lower() for p in params)}) -> {result.name().lower()}"


FUNCTIONS: Final[Mapping[str, FunctionInfo]] = MappingProxyType(
    {
        name: FunctionInfo(name, det, tuple(f"{name}{_signature(p, r)}" for _, r, p, _ in overloads), doc)
        for name, (det, doc, overloads) in _SPEC.items()
    }
)


def extension() -> Any:
    """The ``cel.CelExtension`` declaring every catalog function (build once; environments share it)."""
    return _lib.telo_extension(
        [
            _lib.function_decl(name, [(oid, r, p, _guard(name, impl)) for oid, r, p, impl in overloads])
            for name, (_, _, overloads) in _SPEC.items()
        ]
    )
