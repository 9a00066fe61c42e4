"""Shared helpers for the CEL adapter tests: an environment, one-line evaluation, domain-value strategies."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

from telo.cel import CelEnvironment, Scope
from telo.clock import FakeClock
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
)

ENV = CelEnvironment({"x": "dyn", "y": "dyn"})


def ev(text: str, clock: FakeClock | None = None, **scope: Any) -> Any:
    """Compile ``text`` and evaluate it against ``scope`` (a :class:`Scope` of the keyword arguments)."""
    program = ENV.compile(text)
    if clock is None:
        return program.evaluate(Scope(scope))
    return program.evaluate(Scope(scope), clock=clock)


# --- strategies over the value domain -------------------------------------------------------------------------

ints = st.one_of(st.integers(INT64_MIN, INT64_MAX), st.sampled_from([INT64_MIN, INT64_MAX, 0, -1, 1]))
uints = st.one_of(st.integers(0, UINT64_MAX), st.sampled_from([0, 1, UINT64_MAX, 2**63])).map(Uint)
doubles = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1e300, 0.1]),
)
# Quotes of both kinds, backslashes, braces, ": " and ", " exercise the map-key reading from debug text.
texts = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.sampled_from("'\"\\{}[]:, \n\t\x00\x7fé😀\u2028abc1u"), max_size=12),
    st.sampled_from(["", "true", "1", "1u", "'", '"', "\\", '{"a": 1}', ": ", ", "]),
)
timestamps = st.builds(
    Timestamp,
    st.one_of(
        st.integers(TIMESTAMP_MIN_SECONDS, TIMESTAMP_MAX_SECONDS),
        st.sampled_from([TIMESTAMP_MIN_SECONDS, TIMESTAMP_MAX_SECONDS, 0, -1]),
    ),
    st.one_of(st.integers(0, NANOS_PER_SECOND - 1), st.sampled_from([0, 1, 999_999_999, 123_456_789])),
)
_MAX_DURATION_NANOS = DURATION_MAX_SECONDS * NANOS_PER_SECOND + NANOS_PER_SECOND - 1
durations = st.one_of(
    st.integers(-_MAX_DURATION_NANOS, _MAX_DURATION_NANOS),
    st.sampled_from([0, 1, -1, _MAX_DURATION_NANOS, -_MAX_DURATION_NANOS, -1_500_000_001]),
).map(Duration.from_nanos)
_url_text = st.text(min_size=1, max_size=8)
urls = st.builds(
    Url,
    scheme=st.sampled_from(["postgres", "https", "s3", "x-y.z+w"]),
    host=st.one_of(st.sampled_from(["db.internal", "::1", "127.0.0.1", ""]), _url_text),
    port=st.none() | st.integers(0, 65535),
    user=st.none() | _url_text,
    password=st.none() | _url_text,
    path=st.none() | _url_text.map(lambda p: "/" + p),
    query=st.none() | st.dictionaries(_url_text, st.text(max_size=8), max_size=3),
) | st.sampled_from([Url.parse("mailto:x%40y"), Url.parse("urn:isbn:0451450523")])
scalars = st.one_of(
    st.none(), st.booleans(), ints, uints, doubles, texts, st.binary(max_size=8), timestamps, durations, urls
)
map_keys = st.one_of(texts, ints, uints, st.booleans(), st.sampled_from([0, 1, True, False, Uint(1)]))


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(texts, children, max_size=4),
        st.lists(st.tuples(map_keys, children), max_size=4, unique_by=lambda kv: key_identity(kv[0])).map(
            CelMap  # may hold 1 beside True, which no dict can
        ),
    )


_values = st.recursive(scalars, _containers, max_leaves=20)
values = st.deferred(lambda: _values)  # a short repr: hypothesis warns about the recursive strategy's long one
