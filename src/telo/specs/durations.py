"""Reading a duration field: a number of milliseconds or a duration string (``250ms``, ``1.5s``, ``1h``).

One reader for every place a step's ``timeout`` or a retry's ``initialDelay``/``maxDelay`` is turned into
milliseconds — the engine when it compiles a step, the static checks when they compute a backoff — so that
``timeout: 1s`` and ``timeout: 1000`` mean the same thing wherever they are read (issue 15). The schema
(:func:`telo.specs.common.ms_or_duration`) admits exactly the strings :data:`DURATION_PATTERN` matches.
"""

from __future__ import annotations

import re
from typing import Any

from telo.values.plain import parse_cel_duration

from .common import DURATION_PATTERN

_DAY_NANOS = 86_400 * 10**9
_PATTERN = re.compile(DURATION_PATTERN)


def duration_ms(value: Any) -> float:
    """``value`` in milliseconds: a number is milliseconds already; a string is a duration of the schema's
    grammar (``250ms``, ``1.5s``, ``90m``, ``2h``, ``1d``). Raises ``ValueError`` for anything else (a bool is
    not a number here: YAML's ``yes`` must not become 1 ms)."""
    if isinstance(value, bool):
        raise ValueError(f"expected milliseconds or a duration like 250ms, 1.5s, 2m, 1h, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and _PATTERN.fullmatch(value):
        return parse_cel_duration(value, extra_units={"d": _DAY_NANOS}).total_nanos() / 1e6
    raise ValueError(f"expected milliseconds or a duration like 250ms, 1.5s, 2m, 1h, got {value!r}")


__all__ = ["duration_ms"]
