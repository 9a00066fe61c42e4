"""``Telo.Url``: a URL value with members, and its url-text (spec §6.1, §6.3, §6.4).

A :class:`Url` is a frozen, hashable value of the members ``scheme, host, port, user, password, path, query``
(``None`` = absent). Members hold DECODED text: ``password="p@ss/w:rd"``, never ``p%40ss…``.

Writing (:meth:`Url.to_text`) produces the one canonical url-text of §6.3. Reading is two-tier:

* :meth:`Url.parse` is the lenient plain-encoding reader of §6.4: any absolute URL RFC 3986 reads, with no
  fragment and no repeated query key.
* :meth:`Url.from_canonical_text` is the typed-frame payload reader of §6.2: it reads only the canonical text,
  because a lenient payload reader would let two frames carry one value.

Decisions the spec leaves open (RFC 3986, not WHATWG):

* ``scheme`` is case-insensitive (RFC 3986 §3.1), so the constructor stores it lower-cased: two spellings of
  one scheme are one value. No other member's case is changed (the spec canonicalises only the scheme).
* An empty ``user``, ``password`` or ``path`` and an empty ``query`` mapping are the same as absent
  (``None``), so ``postgres://db`` has no path and ``postgres://db?`` is not canonical. ``host=""`` is NOT
  absent: it is an authority with an empty host (``file:///etc/hosts``), while ``host=None`` means no
  authority at all (``mailto:x%40y``, ``urn:isbn%3A0451450523``), which is supported; user, password and
  port need a host.
* A password without a user is written ``:pw@host`` (and reads back as ``user=None``).
* A host is an IPv6 address when it parses as one (hex, ``:`` and ``.`` only, no zone id); it is written in
  brackets verbatim, ``[::1]``, and stored without them. Any other host is a reg-name and is percent-encoded.
  ``[v1.x]`` (IPvFuture) and zone ids (RFC 6874) do not read.
* ``port`` is 0..65535; ``host:`` (empty port) reads as no port and a port with leading zeros reads, but
  neither is canonical.
* The path is decoded whole: ``/`` in the ``path`` member is always a separator, so ``a%2Fb`` reads as
  ``a/b`` and is not canonical. Dot segments are kept as written. With a host the path is empty or starts
  with ``/``; without one it must not start with ``//`` (it would read as an authority).
* The query is ``key=value`` pairs split on ``&``, each split on its FIRST ``=``. Written, every entry
  carries ``=`` (``flag=``); read, ``flag`` means ``flag=`` and empty entries (``a=1&&b=2``) are skipped.
  ``+`` is a literal plus (RFC 3986 has no form-encoding), written ``%2B``. Keys are compared decoded, so
  ``?a=1&%61=2`` repeats ``a`` and does not read.
* Percent-encoded bytes must decode as UTF-8; text outside the RFC 3986 character set does not read.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_to_bytes

__all__ = ["QueryMap", "Url"]

# RFC 3986 §2.3: the only bytes the canonical text writes literally.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT = r"%[0-9A-Fa-f]{2}"
_UNRES = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+\-.]*")
_USERINFO = re.compile(rf"(?:[{_UNRES}{_SUB_DELIMS}:]|{_PCT})*")
_REG_NAME = re.compile(rf"(?:[{_UNRES}{_SUB_DELIMS}]|{_PCT})*")
_PATH = re.compile(rf"(?:[{_UNRES}{_SUB_DELIMS}:@/]|{_PCT})*")
_QUERY = re.compile(rf"(?:[{_UNRES}{_SUB_DELIMS}:@/?]|{_PCT})*")
_IPV6_CHARS = re.compile(r"[0-9A-Fa-f:.]+")
# RFC 3986 Appendix B, with the scheme made mandatory (only absolute URLs read).
_SPLIT = re.compile(r"([^:/?#]+):(//([^/?#]*))?([^?#]*)(\?([^#]*))?(#.*)?", re.DOTALL)


def _utf16_key(key: str) -> bytes:
    """Order by UTF-16 code units (§6.3): big-endian UTF-16 bytes compare exactly so."""
    return key.encode("utf-16-be", "surrogatepass")


def _require_text(name: str, value: object) -> str:
    if type(value) is not str:
        raise TypeError(f"Url {name} must be a str, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"Url {name} is not Unicode text (an unpaired surrogate): {value!r}") from None
    return value


def _encode(text: str, keep: bytes = b"") -> str:
    """Percent-encode every UTF-8 byte that is not unreserved, with upper-case hex (§6.3)."""
    return "".join(
        chr(b) if b in _UNRESERVED or b in keep else f"%{b:02X}" for b in text.encode("utf-8")
    )


def _decode(component: str, grammar: re.Pattern[str], what: str) -> str:
    if not grammar.fullmatch(component):
        raise ValueError(f"the {what} {component!r} has characters RFC 3986 does not allow there")
    try:
        return unquote_to_bytes(component).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"the {what} {component!r} percent-encodes bytes that are not UTF-8") from None


def _is_ipv6(host: str) -> bool:
    if not _IPV6_CHARS.fullmatch(host):
        return False
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return True


class QueryMap(Mapping[str, str]):
    """An immutable, hashable query mapping, its entries held in canonical order (by UTF-16 code units)."""

    __slots__ = ("_dict", "_pairs")

    def __init__(self, entries: Mapping[str, str]) -> None:
        pairs = []
        for k, v in entries.items():
            pairs.append((_require_text("query key", k), _require_text("query value", v)))
        pairs.sort(key=lambda kv: _utf16_key(kv[0]))
        self._pairs: tuple[tuple[str, str], ...] = tuple(pairs)
        self._dict: dict[str, str] = dict(pairs)

    def __getitem__(self, key: str) -> str:
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def __hash__(self) -> int:
        return hash(self._pairs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, QueryMap):
            return self._pairs == other._pairs
        if isinstance(other, Mapping):
            return self._dict == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"QueryMap({self._dict!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Url:
    """A ``Telo.Url`` value (spec §6.1): members as decoded text, ``None`` for an absent member.

    Raises ``TypeError`` for a member of the wrong type and ``ValueError`` for one that cannot be part of a
    URL (bad scheme, port out of 0..65535, user/password/port without a host, a path the text could not
    carry).
    """

    scheme: str
    host: str | None = None
    port: int | None = None
    user: str | None = None
    password: str | None = None
    path: str | None = None
    query: Mapping[str, str] | None = field(default=None)

    def __post_init__(self) -> None:
        scheme = _require_text("scheme", self.scheme)
        if not _SCHEME.fullmatch(scheme):
            raise ValueError(f"Url scheme {scheme!r} is not ALPHA *( ALPHA / DIGIT / '+' / '-' / '.' )")
        object.__setattr__(self, "scheme", scheme.lower())  # RFC 3986 §3.1: case-insensitive
        for name in ("host", "user", "password", "path"):
            value = getattr(self, name)
            if value is not None:
                _require_text(name, value)
                if value == "" and name != "host":  # empty = absent: one value, one text
                    object.__setattr__(self, name, None)
        if self.port is not None:
            if isinstance(self.port, bool) or not isinstance(self.port, int):
                raise TypeError(f"Url port must be an int, not {type(self.port).__name__}")
            if not 0 <= self.port <= 65535:
                raise ValueError(f"Url port out of range 0..65535: {self.port}")
            object.__setattr__(self, "port", int(self.port))
        if self.query is not None:
            if not isinstance(self.query, Mapping):
                raise TypeError(f"Url query must be a mapping of str to str, not {type(self.query).__name__}")
            query = self.query if isinstance(self.query, QueryMap) else QueryMap(self.query)
            object.__setattr__(self, "query", query or None)
        if self.host is None:
            if self.user is not None or self.password is not None or self.port is not None:
                raise ValueError("Url user, password and port need a host (an authority)")
            if self.path is not None and self.path.startswith("//"):
                raise ValueError(f"Url path {self.path!r} without a host would read as an authority")
        elif self.path is not None and not self.path.startswith("/"):
            raise ValueError(f"Url path {self.path!r} must start with '/' when there is a host")

    # --- writing ---------------------------------------------------------------------------------------

    def to_text(self) -> str:
        """The canonical url-text of §6.3."""
        out = [self.scheme, ":"]
        if self.host is not None:
            out.append("//")
            if self.user is not None or self.password is not None:
                out.append(_encode(self.user or ""))
                if self.password is not None:
                    out += [":", _encode(self.password)]
                out.append("@")
            out.append(f"[{self.host}]" if _is_ipv6(self.host) else _encode(self.host))
            if self.port is not None:
                out.append(f":{self.port}")
        if self.path is not None:
            out.append(_encode(self.path, keep=b"/"))
        if self.query:
            out.append("?")
            out.append("&".join(f"{_encode(k)}={_encode(v)}" for k, v in self.query.items()))
        return "".join(out)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        # The password is masked: a repr lands in logs and tracebacks; str() still gives the full text.
        parts = [f"scheme={self.scheme!r}"]
        for name in ("host", "port", "user", "password", "path"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}='***'" if name == "password" else f"{name}={value!r}")
        if self.query is not None:
            parts.append(f"query={dict(self.query)!r}")
        return f"Url({', '.join(parts)})"

    def to_members(self) -> dict[str, Any]:
        """The present members as a dict (``query`` as a ``dict``): the §6.6 ``{"url": …}`` notation."""
        out: dict[str, Any] = {}
        for name in ("scheme", "host", "port", "user", "password", "path"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.query is not None:
            out["query"] = dict(self.query)
        return out

    # --- reading ---------------------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Url:
        """Read any absolute URL RFC 3986 reads, with no fragment and no repeated query key (§6.4).

        Raises ``TypeError`` if ``text`` is not a ``str`` and ``ValueError`` saying why when it does not read.
        """
        if type(text) is not str:
            raise TypeError(f"a URL is read from a str, not {type(text).__name__}")
        m = _SPLIT.fullmatch(text)
        if not m:
            raise ValueError(f"{text!r} is not an absolute URL: it has no scheme")
        scheme, has_authority, authority, path, has_query, query, fragment = m.groups()
        if fragment is not None:
            raise ValueError(f"{text!r} has a fragment ({fragment!r}); a Telo.Url carries none")
        if not _SCHEME.fullmatch(scheme):
            raise ValueError(f"{text!r} has no valid scheme ({scheme!r})")
        host = port = user = password = None
        if has_authority is not None:
            user, password, host, port = _read_authority(authority)
        return cls(
            scheme=scheme,
            host=host,
            port=port,
            user=user,
            password=password,
            path=_decode(path, _PATH, "path"),
            query=_read_query(query) if has_query is not None else None,
        )

    @classmethod
    def from_canonical_text(cls, text: str) -> Url:
        """Read the canonical url-text only (§6.2 payload rule); ``ValueError`` for any other spelling."""
        url = cls.parse(text)
        canonical = url.to_text()
        if canonical != text:
            raise ValueError(f"not canonical url-text: {text!r} (the canonical text is {canonical!r})")
        return url


def _read_authority(authority: str) -> tuple[str | None, str | None, str, int | None]:
    user: str | None = None
    password: str | None = None
    port_text: str | None
    userinfo, at, hostport = authority.rpartition("@")
    if at:
        name, colon, secret = userinfo.partition(":")
        user = _decode(name, _USERINFO, "user")
        password = _decode(secret, _USERINFO, "password") if colon else None
    if hostport.startswith("["):
        literal, bracket, rest = hostport[1:].partition("]")
        if not bracket or not _is_ipv6(literal):
            raise ValueError(f"the host {hostport!r} is not a bracketed IPv6 address (IPvFuture and zone ids "
                             "are not supported)")
        if rest and not rest.startswith(":"):
            raise ValueError(f"unexpected text after the IPv6 host: {rest!r}")
        host, port_text = literal, rest[1:] if rest else None
    else:
        name, colon, port_after = hostport.partition(":")
        host = _decode(name, _REG_NAME, "host")
        port_text = port_after if colon else None
    port: int | None = None
    if port_text:  # "host:" (empty port) is allowed by RFC 3986 and means no port
        if not port_text.isascii() or not port_text.isdigit():
            raise ValueError(f"the port {port_text!r} is not decimal digits")
        port = int(port_text)
        if port > 65535:
            raise ValueError(f"the port {port} is out of range 0..65535")
    return user, password, host, port


def _read_query(query: str) -> dict[str, str]:
    entries: dict[str, str] = {}
    for entry in query.split("&"):
        if not entry:
            continue
        raw_key, _, raw_value = entry.partition("=")
        key = _decode(raw_key, _QUERY, "query key")
        if key in entries:
            raise ValueError(f"the query repeats the key {key!r}; a Telo.Url query maps each key once")
        entries[key] = _decode(raw_value, _QUERY, "query value")
    return entries
