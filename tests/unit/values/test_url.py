"""Telo.Url: members, canonical url-text and its two readers (spec §6.3, §6.4, the §6.6 url rows)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telo.values.url import QueryMap, Url

from .conftest import VECTORS_PATH, vectors

VECTOR_MEMBERS: dict[str, Any] = {
    "scheme": "postgres",
    "host": "db.internal",
    "port": 5432,
    "user": "app",
    "password": "p@ss/w:rd",
    "path": "/orders",
    "query": {"sslmode": "require"},
}
VECTOR_TEXT = "postgres://app:p%40ss%2Fw%3Ard@db.internal:5432/orders?sslmode=require"


# --- the §6.6 rows -----------------------------------------------------------------------------------------


def test_vector_members_write_exact_text() -> None:
    assert Url(**VECTOR_MEMBERS).to_text() == VECTOR_TEXT
    assert str(Url(**VECTOR_MEMBERS)) == VECTOR_TEXT


def test_vector_text_reads_back_members() -> None:
    url = Url.from_canonical_text(VECTOR_TEXT)
    assert url.to_members() == VECTOR_MEMBERS
    assert url == Url(**VECTOR_MEMBERS)
    assert url.query is not None and url.query["sslmode"] == "require"


def test_not_canonical_refused_by_payload_reader_but_read_by_plain_reader() -> None:
    with pytest.raises(ValueError, match="not canonical"):
        Url.from_canonical_text("POSTGRES://db")
    assert Url.parse("POSTGRES://db") == Url(scheme="postgres", host="db")


@pytest.mark.parametrize("reader", [Url.parse, Url.from_canonical_text])
def test_fragment_does_not_read(reader: Any) -> None:
    with pytest.raises(ValueError, match="fragment"):
        reader("postgres://db#top")
    with pytest.raises(ValueError, match="fragment"):
        reader("postgres://db#")


@pytest.mark.skipif(not VECTORS_PATH.exists(), reason="shared conformance vectors not beside the repo")
def test_shared_vector_file_url_rows() -> None:
    (row,) = [r for r in vectors()["encodable"] if r["name"] == "url"]
    frame = json.loads(row["frame"])
    assert Url(**row["value"]["url"]).to_text() == frame["value"]
    assert Url.from_canonical_text(frame["value"]).to_members() == row["value"]["url"]
    for name in ("url not canonical", "url that does not read"):
        (bad,) = [r for r in vectors()["undecodable"] if r["name"] == name]
        with pytest.raises(ValueError):
            Url.from_canonical_text(json.loads(bad["frame"])["value"])


# --- canonical text ----------------------------------------------------------------------------------------

CANONICAL = [
    ("http://[::1]/", {"scheme": "http", "host": "::1", "path": "/"}),
    ("http://[::1]:8080", {"scheme": "http", "host": "::1", "port": 8080}),
    ("http://[2001:db8::ff00:42:8329]/x", {"scheme": "http", "host": "2001:db8::ff00:42:8329", "path": "/x"}),
    ("http://[::ffff:192.0.2.1]", {"scheme": "http", "host": "::ffff:192.0.2.1"}),
    ("https://e.com/caf%C3%A9/%E2%82%AC", {"scheme": "https", "host": "e.com", "path": "/café/€"}),
    ("https://b%C3%BCcher.example", {"scheme": "https", "host": "bücher.example"}),
    ("http://h/a%20b/c", {"scheme": "http", "host": "h", "path": "/a b/c"}),
    ("http://h/", {"scheme": "http", "host": "h", "path": "/"}),
    ("http://h", {"scheme": "http", "host": "h"}),
    ("http://127.0.0.1:0", {"scheme": "http", "host": "127.0.0.1", "port": 0}),
    ("redis://user@h:6379", {"scheme": "redis", "host": "h", "port": 6379, "user": "user"}),
    ("redis://:secret@h", {"scheme": "redis", "host": "h", "password": "secret"}),
    ("ftp://u%3Ax:p%3Ay@h", {"scheme": "ftp", "host": "h", "user": "u:x", "password": "p:y"}),
    ("file:///etc/hosts", {"scheme": "file", "host": "", "path": "/etc/hosts"}),
    ("mailto:x%40y.example", {"scheme": "mailto", "path": "x@y.example"}),
    ("urn:isbn%3A0451450523", {"scheme": "urn", "path": "isbn:0451450523"}),
    ("x:", {"scheme": "x"}),
    ("x:?a=1", {"scheme": "x", "query": {"a": "1"}}),
    ("svn+ssh.v2-x://h", {"scheme": "svn+ssh.v2-x", "host": "h"}),
    ("x://h?a=&b=x%3Dy&c=%2B%20", {"scheme": "x", "host": "h", "query": {"c": "+ ", "b": "x=y", "a": ""}}),
    ("http://h?=v", {"scheme": "http", "host": "h", "query": {"": "v"}}),
    ("http://h/~a-b_c.d", {"scheme": "http", "host": "h", "path": "/~a-b_c.d"}),
]


@pytest.mark.parametrize(("text", "members"), CANONICAL)
def test_canonical_text_both_directions(text: str, members: dict[str, Any]) -> None:
    url = Url(**members)
    assert url.to_text() == text
    assert Url.from_canonical_text(text) == url
    assert Url.parse(text).to_members() == url.to_members()


def test_query_entries_ordered_by_utf16_code_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00: before U+FF01 in UTF-16, though after it by code point.
    url = Url(scheme="x", host="h", query={"\uff01": "1", "\U0001f600": "2", "b": "3", "B": "4", "é": "5"})
    assert list(url.query or {}) == ["B", "b", "é", "\U0001f600", "\uff01"]
    assert url.to_text() == "x://h?B=4&b=3&%C3%A9=5&%F0%9F%98%80=2&%EF%BC%81=1"
    assert Url.from_canonical_text(url.to_text()) == url


def test_percent_encoding_is_upper_case_hex() -> None:
    assert Url(scheme="x", host="h", path="/\x00\x7f ÿ").to_text() == "x://h/%00%7F%20%C3%BF"
    assert Url(scheme="x", host="h", path="/!$&'()*+,;=:@").to_text() == (
        "x://h/%21%24%26%27%28%29%2A%2B%2C%3B%3D%3A%40"
    )


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("HTTP://h", "http://h"),
        ("http://h/%c3%a9", "http://h/%C3%A9"),
        ("http://h/%41", "http://h/A"),  # a percent-encoded unreserved character is decoded
        ("http://h/a%2Fb", "http://h/a/b"),
        ("http://h?", "http://h"),
        ("http://h?flag", "http://h?flag="),
        ("http://h?b=1&&a=2&", "http://h?a=2&b=1"),
        ("http://h?a=b=c", "http://h?a=b%3Dc"),
        ("http://h?a+b=c+d", "http://h?a%2Bb=c%2Bd"),
        ("http://h:", "http://h"),
        ("http://h:080", "http://h:80"),
        ("http://@h", "http://h"),
        ("http://u:@h", "http://u@h"),
        ("http://h/p?q=/?:@", "http://h/p?q=%2F%3F%3A%40"),
        ("mailto:x@y", "mailto:x%40y"),
        ("http://h/a/./b/../c", "http://h/a/./b/../c"),  # dot segments are kept, not resolved
        ("x://[::A]", "x://[::A]"),  # IPv6 hex case is kept as written
    ],
)
def test_lenient_reader_and_canonical_form(text: str, canonical: str) -> None:
    url = Url.parse(text)
    assert url.to_text() == canonical
    assert Url.from_canonical_text(canonical) == url
    if text != canonical:
        with pytest.raises(ValueError, match="not canonical"):
            Url.from_canonical_text(text)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("//h/x", "no scheme"),
        ("/relative", "no scheme"),
        ("h:80", None),  # reads: scheme "h", path "80" — RFC 3986 says so
        ("1http://h", "scheme"),
        ("http://h/a?x=1&x=2", "repeats the key"),
        ("http://h/a?x=1&%78=2", "repeats the key"),
        ("http://h/a b", "does not allow"),
        ("http://h/é", "does not allow"),
        ("http://h/%zz", "does not allow"),
        ("http://h/%", "does not allow"),
        ("http://h/%FF", "not UTF-8"),
        ("http://h/[x]", "does not allow"),
        ("http://a@b@h", "does not allow"),
        ("http://h:99999", "out of range"),
        ("http://h:8x", "decimal digits"),
        ("http://[::1", "IPv6"),
        ("http://[v1.x]", "IPv6"),
        ("http://[fe80::1%25eth0]", "IPv6"),
        ("http://[::1]x", "after the IPv6 host"),
        ("http://[1.2.3.4]", "IPv6"),
        ("http://h?a=[", "does not allow"),
        ("http://h#", "fragment"),
    ],
)
def test_does_not_read(text: str, why: str | None) -> None:
    if why is None:
        assert Url.parse(text) == Url(scheme="h", path="80")
        return
    with pytest.raises(ValueError, match=why):
        Url.parse(text)


def test_parse_refuses_non_text() -> None:
    with pytest.raises(TypeError):
        Url.parse({})  # type: ignore[arg-type]


# --- the value ---------------------------------------------------------------------------------------------


def test_constructor_normalises_and_validates() -> None:
    assert Url(scheme="HTTP", host="h").scheme == "http"
    assert Url(scheme="x", host="h", path="", user="", password=None, query={}) == Url(scheme="x", host="h")
    assert Url(scheme="x", host="") != Url(scheme="x")
    with pytest.raises(ValueError):
        Url(scheme="")
    with pytest.raises(ValueError):
        Url(scheme="a b")
    with pytest.raises(ValueError, match="range"):
        Url(scheme="x", host="h", port=65536)
    with pytest.raises(ValueError, match="range"):
        Url(scheme="x", host="h", port=-1)
    with pytest.raises(TypeError):
        Url(scheme="x", host="h", port=True)
    with pytest.raises(TypeError):
        Url(scheme="x", host="h", port="80")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="need a host"):
        Url(scheme="x", user="u")
    with pytest.raises(ValueError, match="need a host"):
        Url(scheme="x", port=1)
    with pytest.raises(ValueError, match="start with '/'"):
        Url(scheme="x", host="h", path="rel")
    with pytest.raises(ValueError, match="authority"):
        Url(scheme="x", path="//h")
    with pytest.raises(ValueError, match="Unicode"):
        Url(scheme="x", host="\ud800")
    with pytest.raises(TypeError):
        Url(scheme="x", host="h", query={"a": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        Url(scheme="x", host="h", query=[("a", "b")])  # type: ignore[arg-type]


def test_value_is_frozen_hashable_and_query_read_only() -> None:
    a = Url(scheme="x", host="h", query={"b": "2", "a": "1"})
    b = Url(scheme="x", host="h", query={"a": "1", "b": "2"})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert isinstance(a.query, QueryMap) and a.query == {"a": "1", "b": "2"}
    with pytest.raises(AttributeError):
        a.host = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        a.query["c"] = "3"  # type: ignore[index]
    source = {"a": "1"}
    c = Url(scheme="x", host="h", query=source)
    source["a"] = "changed"
    assert c.query == {"a": "1"}


def test_repr_masks_password_and_str_does_not() -> None:
    url = Url(**VECTOR_MEMBERS)
    assert "p@ss" not in repr(url) and "password='***'" in repr(url)
    assert repr(Url(scheme="x", host="h")) == "Url(scheme='x', host='h')"
    assert "p%40ss" in str(url)


def test_reg_name_host_that_looks_like_ipv6_text() -> None:
    # a host that is not an IPv6 address is a reg-name: its ':' is percent-encoded, not bracketed
    url = Url(scheme="x", host="a:b")
    assert url.to_text() == "x://a%3Ab"
    assert Url.from_canonical_text("x://a%3Ab") == url
    # a percent-encoded IPv6 address reads, but its canonical spelling is the bracketed one
    assert Url.parse("x://%3A%3A1").to_text() == "x://[::1]"


# --- properties --------------------------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8"), max_size=12)
_scheme = st.from_regex(r"[A-Za-z][A-Za-z0-9+.\-]{0,8}", fullmatch=True)
_host = st.one_of(_text, st.ip_addresses(v=6).map(str), st.ip_addresses(v=4).map(str))
_query = st.none() | st.dictionaries(_text, _text, max_size=4)


@st.composite
def urls(draw: st.DrawFn) -> Url:
    scheme = draw(_scheme)
    if draw(st.booleans()):
        user = draw(st.none() | _text)
        return Url(
            scheme=scheme,
            host=draw(_host),
            port=draw(st.none() | st.integers(0, 65535)),
            user=user,
            password=draw(st.none() | _text),
            path=draw(st.none() | _text.map(lambda p: "/" + p)),
            query=draw(_query),
        )
    path = draw(st.none() | _text.filter(lambda p: not p.startswith("//")))
    return Url(scheme=scheme, path=path, query=draw(_query))


@given(urls())
def test_canonical_text_round_trips(url: Url) -> None:
    text = url.to_text()
    assert Url.from_canonical_text(text) == url
    assert Url.parse(text).to_text() == text  # idempotent
    assert text.isascii()
    # from_canonical_text(to_text(u)) == u also makes to_text one-to-one: distinct values, distinct texts

