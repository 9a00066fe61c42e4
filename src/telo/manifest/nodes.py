"""The values a manifest's YAML turns into, beyond plain JSON-like data (reference §1, "YAML tags").

A resource's configuration is ordinary Python data — ``dict`` (string keys), ``list``, ``str``, ``int``,
``float``, ``bool``, ``None``, ``bytes`` (``!include-bytes``) — with three leaf node types where YAML says
something a plain value cannot:

* :class:`Ref` — ``!ref name`` / ``!ref Alias.name``, a reference to a resource (also what an inline
  resource in a reference slot is replaced by once it has been given its name);
* :class:`Cel` — ``!cel "expr"`` or a string that is exactly one legacy ``${{ expr }}``;
* :class:`Template` — a legacy string interpolating one or more ``${{ expr }}``;
* :class:`SqlText` — ``!sql``: a statement whose ``${{ expr }}`` parts are bound as parameters.

Each carries its own :class:`Pos`. Plain values carry none: their positions live in the side table of
:mod:`telo.manifest.positions`, so the data stays plain (``jsonschema`` and the engine read it as-is).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True, order=True)
class Pos:
    """A position in a manifest file: 1-based line and column (column counted in characters)."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True, slots=True)
class Ref:
    """``!ref name`` or ``!ref Alias.name`` (reference §1): ``alias`` is the import alias, or ``None``.

    ``inline`` marks a reference the loader put in place of an inline ``{kind: …}`` declaration in a
    reference slot; ``name`` is then the inline resource's generated (or declared) name.
    """

    name: str
    alias: str | None
    pos: Pos
    inline: bool = False

    @property
    def text(self) -> str:
        """The reference as written after ``!ref``."""
        return f"{self.alias}.{self.name}" if self.alias else self.name

    def __str__(self) -> str:
        return f"!ref {self.text}"


@dataclass(frozen=True, slots=True)
class TextSpan:
    """Where the characters of a scalar's text sit in the file, for mapping an offset inside an expression
    (a CEL compile error's column) back to ``file:line:col``.

    ``segments`` are ``(text_offset, line, column)`` triples, one per source line of the scalar, sorted by
    offset: the character at ``text_offset + k`` is on ``line`` at ``column + k`` (exact for plain, literal
    and folded scalars; approximate after an escape sequence in a quoted one).
    """

    file: str
    segments: tuple[tuple[int, int, int], ...]

    def locate(self, offset: int) -> Pos:
        if not self.segments:
            return Pos(self.file, 1, 1)
        i = max(0, bisect.bisect_right([s[0] for s in self.segments], offset) - 1)
        start, line, column = self.segments[i]
        return Pos(self.file, line, column + max(0, offset - start))


@dataclass(frozen=True, slots=True)
class Cel:
    """A CEL expression: ``!cel`` (possibly a multi-line block scalar) or a legacy whole-string ``${{ }}``.

    ``pos`` is where the node starts (its tag, for ``!cel``); :meth:`locate` maps a position inside
    ``text`` to the file. ``legacy`` is true for the ``${{ }}`` form (the analyzer treats both alike).
    """

    text: str
    pos: Pos
    legacy: bool = False
    span: TextSpan | None = field(default=None, compare=False, repr=False)

    def locate(self, line: int = 1, column: int = 1) -> Pos:
        """The file position of 1-based ``line``/``column`` inside :attr:`text` (falls back to :attr:`pos`)."""
        if self.span is None:
            return self.pos
        lines = self.text.split("\n")
        offset = sum(len(t) + 1 for t in lines[: max(0, line - 1)]) + max(0, column - 1)
        return self.span.locate(offset)

    def __str__(self) -> str:
        return f"${{{{ {self.text} }}}}" if self.legacy else f"!cel {self.text!r}"


@dataclass(frozen=True, slots=True)
class Template:
    """A legacy interpolated string (reference §1): literal parts and :class:`Cel` parts, in order.

    At run time each expression is converted to a string, ``null`` becoming ``""``, and all parts are
    concatenated.
    """

    parts: tuple[str | Cel, ...]
    pos: Pos

    @property
    def expressions(self) -> tuple[Cel, ...]:
        return tuple(p for p in self.parts if isinstance(p, Cel))


@dataclass(frozen=True, slots=True)
class SqlText(Template):
    """``!sql "… ${{ expr }} …"`` (upstream's ``sql`` module): a statement whose ``${{ }}`` parts are bound as
    parameters, never spliced. It evaluates to a *bound statement*, plain data that crosses the journal and CEL
    alike: ``{"text": [literal fragments], "bindings": [values]}`` (one more fragment than values); the statement
    kind joins the fragments with its driver's placeholder (:mod:`telo.kinds.sql_statements`). Being a
    :class:`Template`, it satisfies any schema and its expressions are checked like any other."""


def bound_statement(text: str) -> dict[str, Any]:
    """The bound statement of a ``!sql`` text without ``${{ }}`` parts (nothing to bind)."""
    return {"text": [text], "bindings": []}


def expressions_in(value: Any) -> Iterator[Cel]:
    """Every expression of a manifest value, in document order: a :class:`Cel`, a :class:`Template`'s parts, and
    those inside mappings and lists (an inline resource, already replaced by a :class:`Ref`, is not entered)."""
    if isinstance(value, Cel):
        yield value
    elif isinstance(value, Template):
        yield from value.expressions
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from expressions_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from expressions_in(item)
