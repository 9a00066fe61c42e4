"""The value a replay will read back, made without reading the frame (spec §5.2, §6.1).

A durable step hands the body the value AS THE JOURNAL HOLDS IT: the typed frame's round trip, not the
object the effect returned — so an execution and any later replay of it see the same value (maps in
canonical member order, containers the body's own). Decoding the frame just written gives exactly that, at the
cost of parsing it; :func:`replica` builds it directly from the value the frame was written from, for the
values it is sure about (JSON-like containers, ASCII member names, scalars the codec reads back equal and
that cannot change), and answers :data:`UNSUPPORTED` for everything else — the caller then decodes.

Only call it with a value whose frame was written successfully (the domain checks are the writer's).
"""

from __future__ import annotations

from typing import Any, Final

from telo.values.types import Uint

UNSUPPORTED: Final = object()

# Read back as an equal value of the same type, and immutable: passed through as they are. (A double reads
# back as itself: the frame holds its shortest round-trip text or its tag.)
_SCALARS: Final = frozenset({str, int, float, bool, type(None), Uint, bytes})
# Key tuples known to be in canonical member order already, and the orders learnt for those that are not.
_ORDERS: dict[tuple[str, ...], tuple[str, ...] | None] = {}
_ORDERS_MAX: Final = 1024
_KEYS_MAX: Final = 64


class _Unsupported(Exception):
    pass


def replica(value: Any) -> Any:
    """``decode_frame(encode_frame(value))``, or :data:`UNSUPPORTED` when unsure (see the module docstring)."""
    try:
        return _copy(value)
    except _Unsupported:
        return UNSUPPORTED


def _copy(root: Any) -> Any:
    """An iterative walk, not a recursive one: the writer accepts values nested up to MAX_DEPTH levels, and a
    recursion of two frames a level (a function and its comprehension) would overflow CPython's default stack
    of 1000 frames on a value the journal holds legitimately. Each container is created empty, put in its
    parent's slot at once (so a map keeps its member order), and filled when popped from the stack."""
    top = _shell(root)
    if top is root:
        return root
    stack: list[tuple[Any, Any]] = [(root, top)]
    pop, push = stack.pop, stack.append
    while stack:
        src, dst = pop()
        if type(src) is dict:
            keys = tuple(src)
            order = _ORDERS[keys] if keys in _ORDERS else _learn(keys)
            for k in keys if order is None else order:
                x = src[k]
                if type(x) in _SCALARS:
                    dst[k] = x
                else:
                    dst[k] = c = _shell(x)
                    push((x, c))
        else:
            append = dst.append
            for x in src:
                if type(x) in _SCALARS:
                    append(x)
                else:
                    c = _shell(x)
                    append(c)
                    push((x, c))
    return top


def _shell(v: Any) -> Any:
    """``v`` itself for a scalar passed through, an empty container of ``v``'s type to be filled, or a raise."""
    t = type(v)
    if t in _SCALARS:
        return v
    if t is dict:
        return {}
    if t is list:
        return []
    raise _Unsupported


def _learn(keys: tuple[Any, ...]) -> tuple[str, ...] | None:
    """None when ``keys`` are in canonical order already, else that order; raises for a map it leaves to the
    reader: a non-str or non-ASCII key (UTF-16 order), or ``$telo`` (the frame writes such a map tagged)."""
    for k in keys:
        if type(k) is not str or not k.isascii() or k == "$telo":
            raise _Unsupported
    ordered = tuple(sorted(keys))  # ASCII: code point order is the frame's UTF-16 code unit order
    order = None if ordered == keys else ordered
    if len(keys) <= _KEYS_MAX:
        if len(_ORDERS) >= _ORDERS_MAX:
            _ORDERS.clear()
        _ORDERS[keys] = order
    return order
