"""What a compiled expression calls and reads, found by walking its checked AST (telo-reference §12).

``DURABLE_NONDETERMINISM`` needs the functions an expression calls "found by parsing, never by text
matching": ``'nowMillis()'`` inside a string literal is not a call, ``x.nowMillis`` is not a call. The library
hands out the checked expression only serialized (``Expression.serialize()``: a ``google.protobuf.Any``
holding a ``cel.expr.CheckedExpr``), so this module reads the few fields it needs straight from the protobuf
wire format rather than shipping the ``cel.expr`` descriptors.

It also records, per top-level variable, which of its fields the expression selects (``steps.a.result`` and
``has(steps.b)`` select ``a`` and ``b`` of ``steps``). The scope then converts only those entries of a large
map (:mod:`telo.cel.scope`): converting the scope, not evaluating, dominates a step's cost (cel-notes).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

__all__ = ["Analysis", "analyse", "call_sites"]

# cel.expr field numbers (cel-spec proto/cel/expr/checked.proto and syntax.proto).
_ANY_VALUE: Final = 2
_CHECKED_EXPR: Final = 4
_EXPR_CONST, _EXPR_IDENT, _EXPR_SELECT, _EXPR_CALL = 3, 4, 5, 6
_EXPR_LIST, _EXPR_STRUCT, _EXPR_COMPREHENSION = 7, 8, 9
_CONST_STRING: Final = 6

#: Operators and the parser's internal helpers (``_+_``, ``!_``, ``@in``, ``math.@max``…) are not "calls" a
#: manifest author wrote by name; :attr:`Analysis.calls` leaves them out.
_INTERNAL_MARKS: Final = ("_", "@", "!_", "-_")

# `steps.?x` and `steps['x']` also select one field.
_FIELD_CALLS: Final = frozenset({"_?._", "_[_]", "_[?_]"})


@dataclass(frozen=True, slots=True)
class Analysis:
    """``calls``: function names called; ``selects``: per top-level variable read, the fields selected from it,
    or ``None`` when the variable is used otherwise (iterated, indexed dynamically, passed whole)."""

    calls: frozenset[str]
    selects: dict[str, frozenset[str] | None]


def analyse(serialized: bytes, variables: frozenset[str]) -> Analysis:
    """Walk the serialized checked expression; ``variables`` are the environment's top-level names."""
    checked = _only(serialized, _ANY_VALUE)
    expr = _only(checked, _CHECKED_EXPR) if checked is not None else None
    walker = _Walker(variables)
    if expr is not None:
        walker.expr(expr, frozenset())
    return Analysis(
        frozenset(walker.calls),
        {k: (frozenset(v) if v is not None else None) for k, v in walker.selects.items()},
    )


class _Walker:
    def __init__(self, variables: frozenset[str]) -> None:
        self.variables = variables
        self.calls: set[str] = set()
        self.selects: dict[str, set[str] | None] = {}

    def _whole(self, name: str) -> None:
        self.selects[name] = None

    def _field(self, name: str, field: str) -> None:
        if "\x00" in field:  # a key only to_lib can pass to the library (as a StringValue): read it whole
            self._whole(name)
            return
        if name in self.selects:
            fields = self.selects[name]
            if fields is not None:
                fields.add(field)
        else:
            self.selects[name] = {field}

    def _free_ident(self, expr: bytes, bound: frozenset[str]) -> str | None:
        """The variable name if ``expr`` is an identifier naming a top-level variable (not a bound one)."""
        ident = _only(expr, _EXPR_IDENT)
        if ident is None:
            return None
        name = _text(_only(ident, 1))
        return name if name in self.variables and name not in bound else None

    def expr(self, expr: bytes, bound: frozenset[str]) -> None:
        for number, value in _messages(expr):
            if number == _EXPR_IDENT:
                name = _text(_only(value, 1))
                if name in self.variables and name not in bound:
                    self._whole(name)
            elif number == _EXPR_SELECT:
                self._select(value, bound)
            elif number == _EXPR_CALL:
                self._call(value, bound)
            elif number == _EXPR_LIST:
                for number2, element in _messages(value):
                    if number2 == 1:
                        self.expr(element, bound)
            elif number == _EXPR_STRUCT:
                for number2, entry in _messages(value):
                    if number2 == 2:
                        for number3, part in _messages(entry):
                            if number3 in (3, 4):  # map_key, value
                                self.expr(part, bound)
            elif number == _EXPR_COMPREHENSION:
                self._comprehension(value, bound)

    def _select(self, select: bytes, bound: frozenset[str]) -> None:
        operand = _only(select, 1)
        if operand is None:
            return
        name = self._free_ident(operand, bound)
        if name is not None:
            self._field(name, _text(_only(select, 2)))
        else:
            self.expr(operand, bound)

    def _call(self, call: bytes, bound: frozenset[str]) -> None:
        function = _text(_only(call, 2))
        if not function.startswith(_INTERNAL_MARKS) and "@" not in function:
            self.calls.add(function)
        target = _only(call, 1)
        args = [value for number, value in _messages(call) if number == 3]
        if function in _FIELD_CALLS and target is None and len(args) == 2:
            name = self._free_ident(args[0], bound)
            key = _string_constant(args[1])
            if name is not None and key is not None:
                self._field(name, key)
                return
        if target is not None:
            self.expr(target, bound)
        for arg in args:
            self.expr(arg, bound)

    def _comprehension(self, comp: bytes, bound: frozenset[str]) -> None:
        fields = dict(_all_fields(comp))
        iter_vars = frozenset(_text(fields[n]) for n in (1, 8) if n in fields)
        accu = frozenset({_text(fields[3])}) if 3 in fields else frozenset()
        for number, sub in ((2, bound), (4, bound)):  # iter_range, accu_init: outside the loop's names
            if number in fields:
                self.expr(fields[number], sub)
        for number in (5, 6):  # loop_condition, loop_step
            if number in fields:
                self.expr(fields[number], bound | iter_vars | accu)
        if 7 in fields:  # result
            self.expr(fields[7], bound | accu)


def call_sites(serialized: bytes, functions: frozenset[str]) -> list[tuple[str, int]]:
    """``(function, offset)`` of every global call to one of ``functions``; ``offset`` is the code-point offset
    of the call's ``(`` in the expression text (the parser's position for a call node)."""
    checked = _only(serialized, _ANY_VALUE)
    if checked is None:
        return []
    offsets: dict[int, int] = {}
    source_info = _only(checked, 5)
    for number, entry in _all_fields(source_info or b""):
        if number == 4:  # positions: map<int64 id, int32 offset>
            ints = dict(_varint_fields(entry))
            offsets[ints.get(1, 0)] = ints.get(2, 0)
    sites: list[tuple[str, int]] = []
    stack = [_only(checked, _CHECKED_EXPR) or b""]
    while stack:
        expr = stack.pop()
        call = _only(expr, _EXPR_CALL)
        if call is not None and _only(call, 1) is None:
            function = _text(_only(call, 2))
            expr_id = dict(_varint_fields(expr)).get(2)
            if function in functions and expr_id in offsets:
                sites.append((function, offsets[expr_id]))
        stack.extend(_sub_expressions(expr))
    return sites


def _sub_expressions(buf: bytes) -> Iterator[bytes]:
    """Every nested ``Expr`` of an ``Expr``, found by shape: any length-delimited field that parses as one."""
    for number, value in _all_fields(buf):
        if number in (_EXPR_SELECT, _EXPR_CALL, _EXPR_LIST, _EXPR_STRUCT, _EXPR_COMPREHENSION):
            yield from _child_exprs(number, value)


def _child_exprs(kind: int, node: bytes) -> Iterator[bytes]:
    fields = list(_all_fields(node))
    if kind == _EXPR_SELECT:
        yield from (v for n, v in fields if n == 1)
    elif kind == _EXPR_CALL:
        yield from (v for n, v in fields if n in (1, 3))
    elif kind == _EXPR_LIST:
        yield from (v for n, v in fields if n == 1)
    elif kind == _EXPR_STRUCT:
        for n, entry in fields:
            if n == 2:
                yield from (v for n2, v in _all_fields(entry) if n2 in (3, 4))
    else:  # comprehension: iter_range, accu_init, loop_condition, loop_step, result
        yield from (v for n, v in fields if n in (2, 4, 5, 6, 7))


def _string_constant(expr: bytes) -> str | None:
    const = _only(expr, _EXPR_CONST)
    if const is None:
        return None
    value = _only(const, _CONST_STRING)
    return _text(value) if value is not None else None


# --- protobuf wire format: just enough to walk a message --------------------------------------------------------


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return result, i


def _all_fields(buf: bytes) -> Iterator[tuple[int, bytes]]:
    """``(field number, bytes)`` of every length-delimited field; other wire types are skipped."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        wire = key & 7
        if wire == 0:
            _, i = _varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            length, i = _varint(buf, i)
            yield key >> 3, buf[i : i + length]
            i += length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} in a checked CEL expression")


_messages = _all_fields


def _varint_fields(buf: bytes) -> Iterator[tuple[int, int]]:
    """``(field number, value)`` of every varint field."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        wire = key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            yield key >> 3, value
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            length, i = _varint(buf, i)
            i += length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} in a checked CEL expression")


def _only(buf: bytes | None, number: int) -> bytes | None:
    if buf is None:
        return None
    found = None
    for n, value in _all_fields(buf):
        if n == number:
            found = value  # protobuf: the last occurrence of a singular field wins
    return found


def _text(buf: bytes | None) -> str:
    return buf.decode("utf-8") if buf is not None else ""
