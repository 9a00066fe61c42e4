"""YAML text → documents of plain data with :class:`Ref`/:class:`Cel`/:class:`Template` leaves and a
position table (reference §1, "Multi-document YAML", "YAML tags"). The only module that imports PyYAML.

Choices, and why:

* **Composed nodes, converted here** instead of PyYAML constructors: a constructor does not know the JSON
  Pointer of the node it builds, and every position must land in the table under its pointer.
* **YAML 1.2 core schema** for plain scalars instead of PyYAML's YAML 1.1 resolver: ``yes``/``on`` stay
  strings, ``017`` is 17, ``1:30`` is a string, and timestamps are never turned into ``datetime`` — this is
  how the upstream Node parser (``yaml`` 2, core schema) reads a manifest.
* **Integers are ``int``** (CEL int; int64-checked) and floats are ``float``. Node reads *every* YAML number
  as a double (reference §15.13); we keep the CEL reading on purpose, see ``docs/design.md``.
* **Mapping keys are strings** (a switch's ``cases: {1: …}`` has the key ``"1"``), as in JavaScript.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .diagnostics import ERR_MANIFEST_INCLUDE, ERR_MANIFEST_INVALID_NAME, ERR_MANIFEST_YAML, Diagnostic
from .limits import scan
from .nodes import Cel, Pos, Ref, SqlText, Template, TextSpan, bound_statement
from .positions import PositionTable, join

try:  # libyaml's parser is ~10× faster; the pure-Python one gives identical nodes and marks
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # resource names, aliases and step names (reference §1)

_STR, _INT, _FLOAT = "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_BOOL, _NULL = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"
_SEQ, _MAP = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
REF, CEL, INCLUDE_BYTES, SQL = "!ref", "!cel", "!include-bytes", "!sql"

# The YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
_CORE = (
    (_NULL, re.compile(r"~|null|Null|NULL|")),
    (_BOOL, re.compile(r"true|True|TRUE|false|False|FALSE")),
    (_INT, re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")),
    (_FLOAT, re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)"
                        r"|\.nan|\.NaN|\.NAN")),
)
_INT64 = (-(2**63), 2**63 - 1)

# Legacy interpolation (reference §1): non-greedy and `}`-free, exactly like upstream's delimiter pattern.
_LEGACY = re.compile(r"\$\{\{([^}]*?)\}\}")
_LEGACY_WHOLE = re.compile(r"\s*\$\{\{([^}]*?)\}\}\s*")


class _Loader(_BaseLoader):
    """PyYAML's safe loader with the core-schema resolver (no implicit resolvers of its own)."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's class-level registry

    def resolve(self, kind: type[Node], value: Any, implicit: Any) -> Any:
        if kind is ScalarNode and implicit[0]:  # plain (unquoted) scalar without an explicit tag
            for tag, pattern in _CORE:
                if pattern.fullmatch(value):
                    return tag
            return _STR
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]


@dataclass(slots=True)
class Document:
    """One YAML document: its data, the positions of its nodes, and where it starts."""

    value: Any
    positions: PositionTable
    pos: Pos


def read_documents(text: str, file: str, base_dir: Path, diagnostics: list[Diagnostic]) -> list[Document]:
    """Every non-empty document of ``text``; problems are appended to ``diagnostics``. A syntax error ends
    the stream (the parser cannot resynchronise), but the documents before it are still returned so their
    own errors can be reported in the same run."""
    scanner = _Loader(text)
    try:  # alias bombs and too-deep nesting, refused before a node is composed (telo.manifest.limits)
        refusal = scan(scanner, file)
    finally:
        scanner.dispose()
    loader = _Loader(text)
    documents: list[Document] = []
    index = 0
    try:
        while loader.check_node():
            if refusal is not None and index == refusal.document:
                diagnostics.append(refusal.diagnostic)
                break
            index += 1
            node = loader.get_node()
            if node is None or (isinstance(node, ScalarNode) and node.tag == _NULL):
                continue  # an empty document (`---` with nothing after it)
            builder = _Builder(text, file, base_dir, diagnostics)
            documents.append(Document(builder.build(node, ""), builder.table, builder.pos(node)))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = Pos(file, mark.line + 1, mark.column + 1) if mark else Pos(file, 1, 1)
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        diagnostics.append(Diagnostic(ERR_MANIFEST_YAML, f"YAML syntax error: {problem}", pos))
    except yaml.YAMLError as exc:  # e.g. a character the reader refuses, reported without a mark
        diagnostics.append(Diagnostic(ERR_MANIFEST_YAML, f"YAML error: {exc}", Pos(file, 1, 1)))
    finally:
        loader.dispose()
    return documents


def parse_ref(text: str, pos: Pos, diagnostics: list[Diagnostic]) -> Ref:
    """``name`` or ``Alias.name`` (names are dot-free, so the dot is unambiguous); grammar checked."""
    alias, _, name = text.strip().rpartition(".")
    for part in (alias, name) if alias else (name,):
        if not NAME.fullmatch(part):
            diagnostics.append(Diagnostic(
                ERR_MANIFEST_INVALID_NAME, f"!ref {text!r} is not a reference: {part!r} is not a name", pos,
                hint="write `!ref name` or `!ref Alias.name`; names match ^[A-Za-z_][A-Za-z0-9_]*$",
            ))
            break
    return Ref(name, alias or None, pos)


def parse_legacy(text: str, pos: Pos, span: TextSpan | None) -> str | Cel | Template:
    """A string that may hold legacy ``${{ expr }}``: a lone one is the expression's typed value (a
    :class:`Cel`), others make a :class:`Template`; without any it is the string itself (reference §1)."""
    if "${{" not in text:
        return text
    whole = _LEGACY_WHOLE.fullmatch(text)
    if whole:
        return _legacy_cel(whole, text, pos, span)
    parts: list[str | Cel] = []
    cursor = 0
    for match in _LEGACY.finditer(text):
        if match.start() > cursor:
            parts.append(text[cursor : match.start()])
        parts.append(_legacy_cel(match, text, pos, span))
        cursor = match.end()
    if not parts:
        return text  # an unterminated `${{` is literal text, as upstream
    if cursor < len(text):
        parts.append(text[cursor:])
    return Template(tuple(parts), pos)


def parse_sql(text: str, pos: Pos, span: TextSpan | None) -> SqlText | dict[str, Any]:
    """``!sql``: each ``${{ expr }}`` is a parameter (a lone one too: it binds one parameter, it cannot stand for
    the whole statement); without any, the statement is already bound (upstream's ``sql`` module)."""
    parts: list[str | Cel] = []
    cursor = 0
    for match in _LEGACY.finditer(text):
        parts.append(text[cursor : match.start()])
        parts.append(_legacy_cel(match, text, pos, span))
        cursor = match.end()
    if not parts:
        return bound_statement(text)
    parts.append(text[cursor:])
    return SqlText(tuple(parts), pos)


def _legacy_cel(match: re.Match[str], text: str, pos: Pos, span: TextSpan | None) -> Cel:
    inner = match.group(1)
    lead = len(inner) - len(inner.lstrip())
    offset = match.start(1) + lead
    sub = None
    if span is not None:  # re-base the span so the expression's offset 0 is its first character
        at = span.locate(offset)
        sub = TextSpan(span.file, ((0, at.line, at.column),))
    return Cel(inner.strip(), sub.locate(0) if sub else pos, legacy=True, span=sub)


class _Builder:
    """Converts one composed document, filling its position table."""

    def __init__(self, text: str, file: str, base_dir: Path, diagnostics: list[Diagnostic]) -> None:
        self.text, self.file, self.base_dir, self.diagnostics = text, file, base_dir, diagnostics
        self.table = PositionTable(file)
        self._active: set[int] = set()  # nodes being converted: an alias back into one is a cycle

    def pos(self, node: Node) -> Pos:
        return Pos(self.file, node.start_mark.line + 1, node.start_mark.column + 1)

    def error(self, code: str, message: str, node: Node, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(code, message, self.pos(node), hint=hint))

    def build(self, node: Node, pointer: str, key: Pos | None = None) -> Any:
        self.table.add(pointer, self.pos(node), key)
        if id(node) in self._active:
            self.error(ERR_MANIFEST_YAML, "a YAML alias refers to a node that contains it (a cycle)", node)
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, ScalarNode):
                return self._scalar(node)
            # One Python frame a nesting level (build calling build, no comprehension or helper in between):
            # telo.manifest.limits lets a document nest MAX_MANIFEST_DEPTH levels, and the runtime's own
            # recursive walks of the data need the rest of the default recursion limit.
            if isinstance(node, SequenceNode):
                self._plain_collection(node, _SEQ)
                items: list[Any] = []
                for i, item in enumerate(node.value):
                    items.append(self.build(item, join(pointer, i)))
                return items
            if isinstance(node, MappingNode):
                self._plain_collection(node, _MAP)
                out: dict[str, Any] = {}
                for key_node, value_node in self._pairs(node):
                    name = self._key(key_node, out)
                    if name is not None:
                        out[name] = self.build(value_node, join(pointer, name), self.pos(key_node))
                return out
            raise TypeError(f"unexpected YAML node {node!r}")  # pragma: no cover
        finally:
            self._active.discard(id(node))

    def _plain_collection(self, node: Node, tag: str) -> None:
        if node.tag != tag:
            self.error(ERR_MANIFEST_YAML, f"the tag {node.tag} cannot be applied to a "
                       f"{'list' if tag == _SEQ else 'mapping'}", node)

    def _key(self, key_node: Node, out: dict[str, Any]) -> str | None:
        """The mapping key's text, or None (reported) for a key that is not a scalar or repeats one."""
        if not isinstance(key_node, ScalarNode):
            self.error(ERR_MANIFEST_YAML, "a mapping key must be a scalar", key_node)
            return None
        key: str = key_node.value
        if key in out:
            self.error(ERR_MANIFEST_YAML, f"duplicate key {key!r} in one mapping", key_node,
                       hint="YAML keys must be unique; the later value would silently win")
            return None
        return key

    def _pairs(self, node: MappingNode) -> list[tuple[Node, Node]]:
        """The mapping's pairs with YAML merge keys (``<<: *base``) expanded; own keys win."""
        own: list[tuple[Node, Node]] = []
        merged: list[tuple[Node, Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or (
                isinstance(key_node, ScalarNode) and key_node.value == "<<" and key_node.style in ("", None)
            ):
                sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                for source in sources:
                    if isinstance(source, MappingNode):
                        merged.extend(self._pairs(source))
                    else:
                        self.error(ERR_MANIFEST_YAML, "a merge key (<<) takes a mapping or a list of them", source)
            else:
                own.append((key_node, value_node))
        own_keys = {k.value for k, _ in own if isinstance(k, ScalarNode)}
        seen: set[str] = set()
        inherited = []
        for k, v in merged:
            if isinstance(k, ScalarNode) and k.value not in own_keys and k.value not in seen:
                seen.add(k.value)
                inherited.append((k, v))
        return inherited + own

    def _scalar(self, node: ScalarNode) -> Any:
        tag, value, pos = node.tag, node.value, self.pos(node)
        if tag == _STR:
            return parse_legacy(value, pos, self._span(node) if "${{" in value else None)
        if tag == _INT:
            return self._int(node)
        if tag == _FLOAT:
            return self._float(value)
        if tag == _BOOL:
            return value.lower() == "true"
        if tag == _NULL:
            return None
        if tag == REF:
            return parse_ref(value, pos, self.diagnostics)
        if tag == CEL:
            if not value.strip():
                self.error(ERR_MANIFEST_YAML, "!cel needs an expression", node)
            return Cel(value, pos, span=self._span(node))
        if tag == INCLUDE_BYTES:
            return self._include(node)
        if tag == SQL:
            if not value.strip():
                self.error(ERR_MANIFEST_YAML, "!sql needs a statement", node)
            return parse_sql(value, pos, self._span(node) if "${{" in value else None)
        self.error(ERR_MANIFEST_YAML, f"unknown YAML tag {tag}", node,
                   hint="a manifest knows !ref, !cel, !sql and !include-bytes")
        return value

    def _int(self, node: ScalarNode) -> int | None:
        text = node.value.replace("_", "")
        base = {"0o": 8, "0x": 16}.get(text[:2], 10)
        number = int(text[2:] if base != 10 else text, base)
        if not _INT64[0] <= number <= _INT64[1]:
            self.error(ERR_MANIFEST_YAML, f"integer {node.value} is outside the CEL int range (int64)", node)
            return None
        return number

    @staticmethod
    def _float(value: str) -> float:
        lowered = value.lower()
        if lowered.endswith(".inf"):
            return -math.inf if lowered.startswith("-") else math.inf
        if lowered == ".nan":
            return math.nan
        return float(value)

    def _include(self, node: ScalarNode) -> bytes:
        path = self.base_dir / node.value.strip()
        try:
            data: bytes = path.read_bytes()
            return data
        except OSError as exc:
            self.error(ERR_MANIFEST_INCLUDE, f"!include-bytes cannot read {str(path)!r}: {exc.strerror or exc}",
                       node, hint="the path is relative to the manifest's directory")
            return b""

    def _span(self, node: ScalarNode) -> TextSpan:
        """Locate each source line of the scalar's text (see :class:`TextSpan`)."""
        start, end = node.start_mark.index, node.end_mark.index
        raw_lines = self.text[start:end].split("\n")
        line0, col0 = node.start_mark.line + 1, node.start_mark.column + 1
        segments: list[tuple[int, int, int]] = []
        cursor = 0
        quoted = node.style in ("'", '"')
        for i, raw in enumerate(raw_lines):
            if i == 0:
                if node.style in ("|", ">"):
                    continue  # the header line (`!cel >-`) holds no text
                skip = _first_line_skip(raw) + (1 if quoted else 0)
            else:
                skip = len(raw) - len(raw.lstrip(" \t"))
            content = raw[skip:].rstrip()
            if quoted:
                content = content.rstrip("'\"")
            if not content:
                continue
            found = node.value.find(content[:8], cursor)
            if found < 0:
                continue
            segments.append((found, line0 + i, (col0 if i == 0 else 1) + skip))
            cursor = found + 1
        return TextSpan(self.file, tuple(segments))


def _first_line_skip(raw: str) -> int:
    """Characters before the scalar's text on its first line: an explicit tag and the blanks after it."""
    if not raw.startswith("!"):
        return 0
    skip = len(raw.split(None, 1)[0])
    while skip < len(raw) and raw[skip] in " \t":
        skip += 1
    return skip
