"""Shared helpers for the value-codec tests: the conformance vectors, the §6.6 value notation, strategies.

The notation converter lives here rather than in ``src``: it exists to read the conformance file, and a
runtime has no other use for a second spelling of its values.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from telo.values import CelMap, Duration, Timestamp, Uint, Url
from telo.values.types import (
    DURATION_MAX_SECONDS,
    INT64_MAX,
    INT64_MIN,
    NANOS_PER_SECOND,
    TIMESTAMP_MAX_SECONDS,
    TIMESTAMP_MIN_SECONDS,
    UINT64_MAX,
    key_identity,
    make_map,
)

# <repo root>/../shared/conformance/typed-frame-vectors.json, the repo root being the parent of tests/.
REPO_ROOT = Path(__file__).resolve().parents[3]
VECTORS_PATH = REPO_ROOT.parent / "shared" / "conformance" / "typed-frame-vectors.json"


@functools.cache
def vectors() -> dict[str, Any]:
    if not VECTORS_PATH.is_file():
        raise FileNotFoundError(
            f"the spec's typed-frame conformance vectors are not at {VECTORS_PATH}: the tests read them from the "
            "shared/ directory beside this checkout (<dir>/shared and <dir>/<checkout>, as CI lays them out)")
    with VECTORS_PATH.open(encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


# --- the value notation of §6.6 --------------------------------------------------------------------------

_DOUBLE_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf, "-0": -0.0}


def from_notation(node: dict[str, Any]) -> Any:
    """A domain value from its §6.6 notation: one member per node, e.g. ``{"int": "2"}``."""
    if len(node) != 1:
        raise ValueError(f"a notation node has exactly one member: {node!r}")
    ((kind, body),) = node.items()
    if kind == "null":
        return None
    if kind in ("bool", "string"):
        return body
    if kind == "double":
        return _DOUBLE_WORDS[body] if isinstance(body, str) else float(body)
    if kind == "int":
        return int(body)
    if kind == "uint":
        return Uint(int(body))
    if kind == "bytes":
        return bytes(body)
    if kind == "timestamp":
        return Timestamp(int(body["seconds"]), body["nanos"])
    if kind == "duration":
        return Duration(int(body["seconds"]), body["nanos"])
    if kind == "list":
        return [from_notation(x) for x in body]
    if kind == "map":
        return make_map((from_notation(k), from_notation(v)) for k, v in body)
    if kind == "url":
        return Url(**body)
    raise ValueError(f"unknown notation kind {kind!r}")


def to_notation(value: Any) -> dict[str, Any]:
    """The §6.6 notation of a domain value (for readable failure messages and notation round trips)."""
    t = type(value)
    if value is None:
        return {"null": None}
    if t is bool:
        return {"bool": value}
    if t is str:
        return {"string": value}
    if t is float:
        if math.isnan(value):
            return {"double": "NaN"}
        if math.isinf(value):
            return {"double": "Infinity" if value > 0 else "-Infinity"}
        if value == 0 and math.copysign(1.0, value) < 0:
            return {"double": "-0"}
        return {"double": value}
    if t is int:
        return {"int": str(value)}
    if t is Uint:
        return {"uint": str(int(value))}
    if t is bytes:
        return {"bytes": list(value)}
    if t is Timestamp:
        return {"timestamp": {"seconds": str(value.seconds), "nanos": value.nanos}}
    if t is Duration:
        return {"duration": {"seconds": str(value.seconds), "nanos": value.nanos}}
    if t is list:
        return {"list": [to_notation(x) for x in value]}
    if t is dict or t is CelMap:
        return {"map": [[to_notation(k), to_notation(v)] for k, v in value.items()]}
    if t is Url:
        return {"url": value.to_members()}
    raise TypeError(f"no notation for {t.__name__}")


# --- hypothesis strategies for the domain ----------------------------------------------------------------

ints = st.one_of(
    st.integers(INT64_MIN, INT64_MAX),
    st.sampled_from([0, 1, -1, INT64_MIN, INT64_MAX, 2**53, -(2**53), 2**53 + 1]),
)
uints = st.one_of(st.integers(0, UINT64_MAX), st.sampled_from([0, 1, 2**63, UINT64_MAX])).map(Uint)
doubles = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1e21, 1e-7, 1e-6, 0.1, 1e16]),
)
texts = st.one_of(
    st.text(),  # hypothesis never draws surrogates here: every string is Unicode text
    st.text(alphabet=st.sampled_from('"\\/\b\f\n\r\t\x00\x1f\x7f\u2028é😀\U0010ffff\ue000\uffff')),
    st.sampled_from(["$telo", "value", "", "~/", "__proto__"]),
)
timestamps = st.builds(
    Timestamp,
    st.one_of(
        st.integers(TIMESTAMP_MIN_SECONDS, TIMESTAMP_MAX_SECONDS),
        st.sampled_from([TIMESTAMP_MIN_SECONDS, TIMESTAMP_MAX_SECONDS, 0, -1]),
    ),
    st.one_of(st.integers(0, NANOS_PER_SECOND - 1), st.sampled_from([0, 1, 500_000_000, 999_999_999])),
)
_MAX_DURATION_NANOS = DURATION_MAX_SECONDS * NANOS_PER_SECOND + NANOS_PER_SECOND - 1
durations = st.one_of(
    st.integers(-_MAX_DURATION_NANOS, _MAX_DURATION_NANOS),
    st.sampled_from([0, 1, -1, _MAX_DURATION_NANOS, -_MAX_DURATION_NANOS, -1_500_000_000]),
).map(Duration.from_nanos)
_url_text = st.text(min_size=1, max_size=8)
urls = st.builds(
    Url,
    scheme=st.sampled_from(["postgres", "https", "s3", "x-y.z+w"]),
    host=st.one_of(st.sampled_from(["db.internal", "::1", "127.0.0.1"]), _url_text),
    port=st.none() | st.integers(0, 65535),
    user=st.none() | _url_text,
    password=st.none() | _url_text,
    path=st.none() | _url_text.map(lambda p: "/" + p),
    query=st.none() | st.dictionaries(_url_text, st.text(max_size=8), max_size=3),
)
scalars = st.one_of(
    st.none(), st.booleans(), ints, uints, doubles, texts, st.binary(), timestamps, durations, urls
)
map_keys = st.one_of(texts, ints, uints, st.booleans())


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(texts, children, max_size=5),  # mostly JSON objects; "$telo" makes it tagged
        st.dictionaries(map_keys, children, max_size=5),  # mixed keys: tagged maps
        st.lists(st.tuples(map_keys, children), max_size=5, unique_by=lambda kv: key_identity(kv[0])).map(
            CelMap  # 1 beside True, which no dict can hold
        ),
    )


values = st.recursive(scalars, _containers, max_leaves=25)


class FloatSubclass(float):
    pass


_surrogate_texts = st.tuples(st.text(max_size=2), st.integers(0xD800, 0xDFFF), st.text(max_size=2)).map(
    lambda t: t[0] + chr(t[1]) + t[2]
)
# Values outside the domain, for checking that both writers refuse them alike.
junk = st.one_of(
    st.sampled_from([(), (1,), object, len, 1j, bytearray(b"x")]),
    st.integers(min_value=2**63).map(lambda n: n * st_sign(n)),
    _surrogate_texts,
    st.floats().map(FloatSubclass),
)
junk_keys = st.one_of(map_keys, _surrogate_texts, st.just(1.5), st.just(None), st.integers(min_value=2**63))


def st_sign(n: int) -> int:
    return -1 if n % 2 else 1


def _junk_containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        _containers(children),
        st.dictionaries(junk_keys, children, max_size=4),
    )


values_and_junk = st.recursive(st.one_of(scalars, junk), _junk_containers, max_leaves=20)


def _json_like(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    tags = st.sampled_from(
        ["int", "uint", "double", "bytes", "map", "google.protobuf.Timestamp", "google.protobuf.Duration",
         "Telo.Url", "float", ""]
    )
    return st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(texts, children, max_size=4),
        st.fixed_dictionaries({"$telo": tags, "value": children}),
        st.fixed_dictionaries({"$telo": tags, "value": children}, optional={"x": children}),
        st.fixed_dictionaries({"$telo": st.just("map"), "value": st.lists(st.lists(children, max_size=3))}),
    )


_payload_texts = st.sampled_from(
    ["0", "-0", "01", "9223372036854775808", "18446744073709551615", "NaN", "-Infinity", "1.5", "-_8A", "AB",
     "", "2026-01-15T07:30:00Z", "2026-01-15T07:30:00.000Z", "1.5s", "1.50s", "postgres://db", "a=b"]
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
              texts, _payload_texts),
    _json_like,
    max_leaves=15,
)
