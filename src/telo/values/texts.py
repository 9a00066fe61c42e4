"""Text forms the plain encoding (spec §6.4) and the typed frame's payloads (§6.3) share: JSON Pointers
(RFC 6901, as §6.2 reports a refused node), base64url without padding (RFC 4648 §5) and CEL duration strings.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Final

from telo.values.types import Duration

# --- shared helpers ------------------------------------------------------------------------------------


def json_pointer(parent: str, key: str | int) -> str:
    """``parent`` plus one reference token (RFC 6901), unpaired surrogates replaced by U+FFFD (§6.2)."""
    token = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in str(key))
    return f"{parent}/{token.replace('~', '~0').replace('/', '~1')}"


def encode_base64url(data: bytes) -> str:
    """Base64url (RFC 4648 §5) without padding: the bytes payload of §6.3 and plain form of §6.4."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


_B64URL: Final = re.compile(r"[A-Za-z0-9_-]*")


def decode_base64url(text: str) -> bytes:
    """Read base64url without padding, refusing padding, the standard alphabet and non-zero unused bits.

    Raises ``ValueError``. Only one text reads as each byte string, so this serves the frame reader too.
    """
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError(f"not base64url without padding: {text!r}")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as exc:  # pragma: no cover - the pattern and length check leave nothing to refuse
        raise ValueError(f"not base64url: {text!r}") from exc
    if encode_base64url(data) != text:
        raise ValueError(f"base64url with non-zero unused trailing bits: {text!r}")
    return data


# --- CEL duration strings -------------------------------------------------------------------------------

_UNIT_NANOS: Final[Mapping[str, int]] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # MICRO SIGN, as Go's time.ParseDuration accepts
    "\u03bcs": 1_000,  # GREEK SMALL LETTER MU, likewise
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DURATION_TERM: Final = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]+)")


def parse_cel_duration(text: str, *, extra_units: Mapping[str, int] | None = None) -> Duration:
    """Read a CEL duration string (``duration('1h30m')``), the plain form of §6.4; raises ``ValueError``.

    The grammar is Go's ``time.ParseDuration``, which CEL specifies: an optional sign, then one or more
    ``<decimal><unit>`` terms (``1h30m``, ``1.5s``, ``-2m3s``, ``.5s``, ``300ms``), units
    ``h m s ms us µs ns``, or the bare ``0``. Unlike Go, a value that is not a whole number of nanoseconds
    (``1.0000000001s``, ``0.5ns``) is refused rather than truncated — §6.4 rounds away no precision — and the
    range is the domain's ±315,576,000,000 s rather than int64 nanoseconds. ``extra_units`` maps further
    unit names to nanoseconds for readers with a wider grammar (``{"d": 86_400 * 10**9}`` for
    Durable.Sleep's ``for``).
    """
    if type(text) is not str:
        raise TypeError(f"a duration is read from a str, not {type(text).__name__}")
    units = {**_UNIT_NANOS, **extra_units} if extra_units else _UNIT_NANOS
    body = text[1:] if text[:1] in ("-", "+") else text
    if body == "0":
        return Duration(0, 0)
    if not body:
        raise ValueError(f"not a duration: {text!r} (expected terms like 1h30m, 1.5s, 300ms)")
    total = 0  # nanoseconds, scaled by 10**scale
    pos = 0
    while pos < len(body):
        m = _DURATION_TERM.match(body, pos)
        if not m or (not m.group(1) and not m.group(2)):
            raise ValueError(f"not a duration: {text!r} (each term is a number followed by a unit)")
        whole, frac, unit = m.group(1), m.group(2) or "", m.group(3)
        if unit not in units:
            raise ValueError(f"unknown unit {unit!r} in duration {text!r} (units: {', '.join(units)})")
        numerator = int(whole or "0") * 10 ** len(frac) + int(frac or "0")
        nanos, rest = divmod(numerator * units[unit], 10 ** len(frac))
        if rest:
            raise ValueError(f"duration {text!r} is finer than a nanosecond; it is refused, never rounded")
        total += nanos
        pos = m.end()
    return Duration.from_nanos(-total if text[0] == "-" else total)
