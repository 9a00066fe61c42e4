"""The CEL value domain as Python values (spec §6.1, §6.3).

Python representation of each CEL type:

=====================  =====================================================================================
CEL type               Python value (dispatch is on the EXACT type: ``True`` is no int, ``Uint(2)`` no ``2``)
=====================  =====================================================================================
null                   ``None``
bool                   ``bool``
int                    ``int`` (exactly ``int``; must fit int64)
uint                   :class:`Uint` (an ``int`` subclass, 0 .. 2**64-1)
double                 ``float``
string                 ``str`` (Unicode text: no unpaired surrogates)
bytes                  ``bytes``
timestamp              :class:`Timestamp` (epoch seconds + nanos, 0001-01-01..9999-12-31T23:59:59.999999999Z)
duration               :class:`Duration` (seconds + nanos carrying the sign of seconds, ±315,576,000,000 s)
list                   ``list``
map                    ``dict`` — or :class:`CelMap` when its keys cannot live in one ``dict``
Telo.Url               :class:`telo.values.url.Url`
=====================  =====================================================================================

Why :class:`CelMap`: Python's ``dict`` merges keys that compare equal, and ``1 == True == Uint(1)`` in
Python, while CEL keeps ``1`` and ``true`` as different keys (and makes ``1`` and ``1u`` the same key, which
a map may therefore not carry twice). A ``dict`` is used whenever the keys coexist in it unchanged; otherwise
the decoder returns a :class:`CelMap`, an immutable mapping keyed by ``(kind, value)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
UINT64_MAX: Final = 2**64 - 1

TIMESTAMP_MIN_SECONDS: Final = -62135596800  # 0001-01-01T00:00:00Z
TIMESTAMP_MAX_SECONDS: Final = 253402300799  # 9999-12-31T23:59:59Z
DURATION_MAX_SECONDS: Final = 315576000000
NANOS_PER_SECOND: Final = 1_000_000_000


class Uint(int):
    """CEL ``uint``: an unsigned 64-bit integer, distinct from ``int`` of the same number."""

    __slots__ = ()

    def __new__(cls, value: int = 0) -> Uint:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"Uint needs an int, got {type(value).__name__}")
        if not 0 <= value <= UINT64_MAX:
            raise OverflowError(f"uint out of range 0..2**64-1: {value}")
        return super().__new__(cls, value)

    def __repr__(self) -> str:
        return f"Uint({int(self)})"

    # Uint(2) == 2 stays true (int semantics, needed by arithmetic code); the codec and domain equality
    # (`telo.values.equal`) dispatch on the exact type instead.
    __hash__ = int.__hash__


@dataclass(frozen=True, slots=True, order=True)
class Timestamp:
    """A CEL ``google.protobuf.Timestamp``: ``seconds`` since the Unix epoch plus ``nanos`` (0..999999999)."""

    seconds: int
    nanos: int = 0

    def __post_init__(self) -> None:
        if type(self.seconds) is not int or type(self.nanos) is not int:
            raise TypeError("Timestamp seconds and nanos must be int")
        if not 0 <= self.nanos < NANOS_PER_SECOND:
            raise ValueError(f"Timestamp nanos out of range 0..999999999: {self.nanos}")
        if not TIMESTAMP_MIN_SECONDS <= self.seconds <= TIMESTAMP_MAX_SECONDS:
            raise ValueError(
                f"Timestamp out of range 0001-01-01T00:00:00Z..9999-12-31T23:59:59.999999999Z: "
                f"seconds={self.seconds}"
            )

    @classmethod
    def from_epoch_nanos(cls, total: int) -> Timestamp:
        s, n = divmod(total, NANOS_PER_SECOND)
        return cls(s, n)

    @classmethod
    def from_epoch_millis(cls, millis: int) -> Timestamp:
        return cls.from_epoch_nanos(millis * 1_000_000)

    def epoch_nanos(self) -> int:
        return self.seconds * NANOS_PER_SECOND + self.nanos

    def epoch_millis(self) -> int:
        return self.epoch_nanos() // 1_000_000

    def to_text(self) -> str:
        """The canonical RFC 3339 text of §6.3 (UTC, ``Z``, fraction trimmed, absent when whole)."""
        return format_timestamp(self.seconds, self.nanos)

    @classmethod
    def from_text(cls, text: str, *, version: int = 2) -> Timestamp:
        """Read the canonical payload of §6.3 (``version=1``: exactly three fractional digits).

        Raises ``ValueError`` for anything that is not exactly the canonical form.
        """
        return parse_canonical_timestamp(text, version=version)

    def __str__(self) -> str:
        return self.to_text()


@dataclass(frozen=True, slots=True, order=True)
class Duration:
    """A CEL ``google.protobuf.Duration``: ``seconds`` plus ``nanos``, nanos carrying the sign of seconds."""

    seconds: int
    nanos: int = 0

    def __post_init__(self) -> None:
        if type(self.seconds) is not int or type(self.nanos) is not int:
            raise TypeError("Duration seconds and nanos must be int")
        if not -NANOS_PER_SECOND < self.nanos < NANOS_PER_SECOND:
            raise ValueError(f"Duration nanos out of range: {self.nanos}")
        if (self.seconds > 0 and self.nanos < 0) or (self.seconds < 0 and self.nanos > 0):
            raise ValueError("Duration nanos must carry the sign of seconds")
        if abs(self.seconds) > DURATION_MAX_SECONDS:
            raise ValueError(f"Duration beyond ±{DURATION_MAX_SECONDS} seconds: {self.seconds}")

    @classmethod
    def from_nanos(cls, total: int) -> Duration:
        sign = -1 if total < 0 else 1
        s, n = divmod(abs(total), NANOS_PER_SECOND)
        return cls(sign * s, sign * n)

    @classmethod
    def from_millis(cls, millis: int) -> Duration:
        return cls.from_nanos(millis * 1_000_000)

    def total_nanos(self) -> int:
        return self.seconds * NANOS_PER_SECOND + self.nanos

    def total_seconds(self) -> float:
        return self.total_nanos() / NANOS_PER_SECOND

    def to_text(self) -> str:
        """The canonical text of §6.3: ``5400s``, ``-1.5s``, ``0.000000001s``."""
        total = self.total_nanos()
        sign = "-" if total < 0 else ""
        s, n = divmod(abs(total), NANOS_PER_SECOND)
        if n == 0:
            return f"{sign}{s}s"
        return f"{sign}{s}.{f'{n:09d}'.rstrip('0')}s"

    @classmethod
    def from_text(cls, text: str) -> Duration:
        """Read the canonical payload of §6.3; raises ``ValueError`` for any other form."""
        m = _DURATION_CANONICAL.fullmatch(text)
        if not m:
            raise ValueError(f"not a canonical duration: {text!r}")
        if len(m.group(2)) > len(str(DURATION_MAX_SECONDS)):  # before int(): no 4300-digit conversion error
            raise ValueError(f"duration beyond ±{DURATION_MAX_SECONDS} seconds: {text[:40]!r}")
        neg, whole, frac = m.group(1), int(m.group(2)), m.group(3) or ""
        if frac and frac.endswith("0"):
            raise ValueError(f"duration fraction has a trailing zero: {text!r}")
        if whole > DURATION_MAX_SECONDS:
            raise ValueError(f"duration beyond ±{DURATION_MAX_SECONDS} seconds: {text!r}")
        total = whole * NANOS_PER_SECOND + (int(frac.ljust(9, "0")) if frac else 0)
        if neg and total == 0:
            raise ValueError(f"negative zero duration is not canonical: {text!r}")
        return cls.from_nanos(-total if neg else total)

    def __str__(self) -> str:
        return self.to_text()


_DURATION_CANONICAL = re.compile(r"(-)?(0|[1-9][0-9]*)(?:\.([0-9]{1,9}))?s")

# --- timestamp text -------------------------------------------------------------------------------------


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm)."""
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


def _days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 28
    return 30 if m in (4, 6, 9, 11) else 31


def format_timestamp(seconds: int, nanos: int) -> str:
    days, rem = divmod(seconds, 86400)
    y, mo, d = _civil_from_days(days)
    hh, rem = divmod(rem, 3600)
    mm, ss = divmod(rem, 60)
    base = f"{y:04d}-{mo:02d}-{d:02d}T{hh:02d}:{mm:02d}:{ss:02d}"
    if nanos:
        return f"{base}.{f'{nanos:09d}'.rstrip('0')}Z"
    return base + "Z"


_TS = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?Z")
_TS_ANY_OFFSET = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))"
)


def timestamp_from_fields(
    y: int, mo: int, d: int, hh: int, mm: int, ss: int, nanos: int, offset_seconds: int = 0
) -> Timestamp:
    """Build a timestamp from calendar fields, validating every field; raises ``ValueError``."""
    if not 1 <= mo <= 12 or not 1 <= d <= _days_in_month(y, mo):
        raise ValueError("date out of range")
    if hh > 23 or mm > 59 or ss > 59:
        raise ValueError("time of day out of range")
    secs = _days_from_civil(y, mo, d) * 86400 + hh * 3600 + mm * 60 + ss - offset_seconds
    return Timestamp(secs, nanos)


def parse_canonical_timestamp(text: str, *, version: int = 2) -> Timestamp:
    m = _TS.fullmatch(text)
    if not m:
        raise ValueError(f"not an RFC 3339 UTC timestamp ending in Z: {text!r}")
    frac = m.group(7)
    if version == 1:
        if frac is None or len(frac) != 3:
            raise ValueError(f"codec v1 timestamps carry exactly three fractional digits: {text!r}")
    elif frac is not None and (len(frac) > 9 or frac.endswith("0")):
        raise ValueError(f"timestamp fraction must be 1..9 digits with no trailing zero: {text!r}")
    y, mo, d, hh, mm, ss = (int(m.group(i)) for i in range(1, 7))
    if y == 0:
        raise ValueError(f"year 0000 is outside the timestamp range: {text!r}")
    nanos = int(frac.ljust(9, "0")) if frac else 0
    return timestamp_from_fields(y, mo, d, hh, mm, ss, nanos)


def parse_rfc3339(text: str) -> Timestamp:
    """The lenient plain-encoding reader of §6.4: any offset, one to nine fractional digits."""
    m = _TS_ANY_OFFSET.fullmatch(text)
    if not m:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    frac = m.group(7)
    if frac is not None and len(frac) > 9:
        raise ValueError(f"timestamp fraction beyond the nanosecond: {text!r}")
    y, mo, d, hh, mm, ss = (int(m.group(i)) for i in range(1, 7))
    if y == 0:
        raise ValueError(f"year 0000 is outside the timestamp range: {text!r}")
    offset = 0
    if m.group(9):
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            raise ValueError(f"timestamp offset out of range: {text!r}")
        offset = (oh * 3600 + om * 60) * (1 if m.group(9) == "+" else -1)
    nanos = int(frac.ljust(9, "0")) if frac else 0
    return timestamp_from_fields(y, mo, d, hh, mm, ss, nanos, offset)


# --- maps whose keys cannot share a dict ------------------------------------------------------------------


def key_identity(key: object) -> tuple[str, object]:
    """The CEL identity of a map key: int and uint of one number are ONE key; bool is never an int."""
    t = type(key)
    if t is bool:
        return ("bool", key)
    if t is int or t is Uint:
        return ("num", int(key))  # type: ignore[call-overload]
    if t is str:
        return ("str", key)
    raise TypeError(f"a CEL map key must be int, uint, bool or string, not {t.__name__}")


class CelMap(Mapping[Any, Any]):
    """An immutable CEL map whose keys need not coexist in a Python ``dict`` (``1`` beside ``True``).

    Lookups use CEL key identity (:func:`key_identity`): ``m[True]`` and ``m[1]`` are different entries,
    ``m[1]`` and ``m[Uint(1)]`` the same one. Iteration yields the original key objects in insertion order.
    """

    __slots__ = ("_items",)

    def __init__(self, pairs: Iterable[tuple[Any, Any]] = ()) -> None:
        items: dict[tuple[str, object], tuple[Any, Any]] = {}
        for k, v in pairs:
            ident = key_identity(k)
            if ident in items:
                raise ValueError(f"repeated map key {k!r}")
            items[ident] = (k, v)
        self._items = items

    def __getitem__(self, key: Any) -> Any:
        try:
            return self._items[key_identity(key)][1]
        except TypeError:
            raise KeyError(key) from None

    def __contains__(self, key: object) -> bool:
        try:
            return key_identity(key) in self._items
        except TypeError:
            return False

    def __iter__(self) -> Iterator[Any]:
        return (k for k, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def pairs(self) -> list[tuple[Any, Any]]:
        return list(self._items.values())

    def __repr__(self) -> str:
        return f"CelMap({self.pairs()!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CelMap):
            return self._items.keys() == other._items.keys() and all(
                self._items[i][1] == other._items[i][1] for i in self._items
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def make_map(pairs: Iterable[tuple[Any, Any]]) -> dict[Any, Any] | CelMap:
    """A ``dict`` when the keys coexist in one unchanged, else a :class:`CelMap`; raises on a repeated key."""
    plist = list(pairs)
    d: dict[Any, Any] = {}
    idents: set[tuple[str, object]] = set()
    for k, v in plist:
        ident = key_identity(k)
        if ident in idents:
            raise ValueError(f"repeated map key {k!r}")
        idents.add(ident)
        if k in d:  # equal under Python (1 and True) but distinct in CEL
            return CelMap(plist)
        d[k] = v
    return d
