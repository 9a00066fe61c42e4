"""Strict equality of CEL values as the typed frame sees them (spec §6.1: "CEL type included").

Python's ``==`` is too lenient for asking "did this value read back as the one written?": ``True == 1``,
``Uint(2) == 2``, ``1.0 == 1``, ``0.0 == -0.0``, and ``nan != nan``. :func:`equal` compares exact types,
treats every NaN as equal to every NaN and negative zero as different from zero (the frame writes them
differently), and compares maps by CEL key identity whatever their representation (``dict`` or
:class:`~telo.values.types.CelMap`), each key's exact type included.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from telo.values.types import CelMap, key_identity

__all__ = ["equal"]

_MAPS = (dict, CelMap)


def equal(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same CEL value, of the same CEL type (see the module docstring)."""
    ta, tb = type(a), type(b)
    if ta is not tb:
        return ta in _MAPS and tb in _MAPS and _maps_equal(a, b)
    if ta is float:
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if ta is list:
        if len(a) != len(b):
            return False
        for x, y in zip(a, b, strict=True):  # noqa: SIM110 - a loop, not all(genexpr): half the stack depth
            if not equal(x, y):
                return False
        return True
    if ta in _MAPS:
        return _maps_equal(a, b)
    return bool(a == b)


def _pairs(m: Mapping[Any, Any]) -> dict[tuple[str, object], tuple[Any, Any]] | None:
    out: dict[tuple[str, object], tuple[Any, Any]] = {}
    for k, v in m.items():
        try:
            ident = key_identity(k)
        except TypeError:  # a key of no CEL type: not a CEL map, so compare nothing equal
            return None
        out[ident] = (k, v)
    return out


def _maps_equal(a: Mapping[Any, Any], b: Mapping[Any, Any]) -> bool:
    if len(a) != len(b):
        return False
    pa, pb = _pairs(a), _pairs(b)
    if pa is None or pb is None or pa.keys() != pb.keys():
        return False
    for ident, (ka, va) in pa.items():
        kb, vb = pb[ident]
        if type(ka) is not type(kb) or not equal(va, vb):
            return False
    return True
