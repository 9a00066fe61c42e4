"""Reading the plain encoding (spec §6.4): a JSON value into CEL values, keyed on the slot's schema.

Writing, and the table of what each CEL type becomes, is :mod:`telo.values.plain`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import unquote

from telo.errors import PlainValueInvalid, TypedFrameUnencodable
from telo.values.types import INT64_MAX, INT64_MIN, UINT64_MAX, Uint, parse_rfc3339
from telo.values.url import Url

from .depth import HINT, MAX_VALUE_DEPTH, check_depth, too_deep_error
from .texts import decode_base64url, json_pointer, parse_cel_duration

# --- reading ----------------------------------------------------------------------------------------------

Schema = Mapping[str, Any] | bool | None


def from_plain(value: Any, schema: Schema = None) -> Any:
    """Read a plain JSON value (as ``json.loads`` gives it) into CEL values, keyed on its schema (§6.4).

    The schema is walked with the value; each node's CEL type is decided by, in order:

    * ``x-telo-type``: ``google.protobuf.Timestamp``, ``google.protobuf.Duration``, ``bytes``, ``Telo.Url``,
      ``uint``, ``int``, ``double`` (another ``x-telo-type`` is an annotation here and is read structurally);
    * for a string: ``format: date-time`` -> Timestamp (:func:`~telo.values.types.parse_rfc3339`: any
      offset, one to nine fractional digits), ``format: duration`` -> Duration (:func:`parse_cel_duration`,
      the CEL grammar — not ISO 8601 as in JSON Schema's own ``duration``), ``format: uri`` -> :class:`Url`
      (:meth:`Url.parse`), ``contentEncoding: base64url`` -> bytes, else str;
    * for a number: ``type: integer`` -> int (an integral float such as ``3.0`` reads as ``3``; ``3.5`` and
      values outside int64 are refused), ``type: number`` -> float; with both, the JSON number's own form;
    * ``properties`` / ``patternProperties`` / ``additionalProperties`` for object members, ``items`` /
      ``prefixItems`` / ``additionalItems`` for array elements; ``anyOf`` / ``oneOf``: the first alternative
      that reads; ``allOf``: the alternatives merged; local ``$ref`` (``#/$defs/…``, ``#/definitions/…``).

    With no schema (``None``, ``True``, ``{}``) a node reads by its JSON form: an integer as int (CEL int,
    as YAML/JSON integer literals are in this runtime), a fraction as float, objects as dicts. JSON ``null``
    reads as ``None`` whatever the slot declares. This is a reader, not a validator: ``required``,
    ``minimum``, ``enum``, ``additionalProperties: false``… are left to jsonschema. Raises
    :class:`~telo.errors.PlainValueInvalid` with the JSON Pointer of the node that does not read.
    """
    if schema is None or schema is True or (isinstance(schema, Mapping) and not schema):
        return _read_schemaless(value)
    check_depth(value, "a plain JSON value")
    try:
        return _Reader(schema).read(schema, value, "")
    except RecursionError:  # a few frames a level: a value near the limit, read on an already deep stack
        raise TypedFrameUnencodable(f"a plain JSON value nested too deeply to read on this stack "
                                    f"(the limit is {MAX_VALUE_DEPTH} levels)", hint=HINT) from None


def _read_schemaless(root: Any) -> Any:
    """``_Reader.read`` with no schema, iteratively: each node by its JSON form (the CLI's ``--input`` and
    ``--payload`` read so), on any depth up to MAX_VALUE_DEPTH whatever the caller's stack."""
    top, members = _open_plain(root, "")
    if members is None:
        return top
    stack: list[tuple[Any, Any]] = [(top, members)]
    while stack:
        out, it = stack[-1]
        step = next(it, None)
        if step is None:
            stack.pop()
            continue
        slot, child, path = step
        converted, kids = _open_plain(child, path)
        if kids is not None:
            if len(stack) >= MAX_VALUE_DEPTH:
                raise too_deep_error("a plain JSON value")
            stack.append((converted, kids))
        if type(out) is list:
            out.append(converted)
        else:
            out[slot] = converted
    return top


def _open_plain(value: Any, path: str) -> tuple[Any, Any]:
    """A scalar read (and None), or an empty container and an iterator of its ``(slot, value, pointer)``."""
    t = type(value)
    if t is list:
        return [], ((i, v, json_pointer(path, i)) for i, v in enumerate(value))
    if t is dict:
        return {}, ((_member_name(k, json_pointer(path, k)), v, json_pointer(path, k)) for k, v in value.items())
    if value is None or t is bool:
        return value, None
    if t is int:
        return _read_integral(value, path, INT64_MIN, INT64_MAX, "an integer (CEL int)"), None
    if t is float:
        return _read_double(value, path), None
    if t is str:
        return _read_text(value, path), None
    raise _invalid(f"{_describe(value)} is not a JSON value", path)


def _member_name(key: Any, path: str) -> str:
    if type(key) is not str:
        raise _invalid(f"an object member name of type {type(key).__name__}", path)
    return _read_text(key, path)


def _describe(value: Any) -> str:
    t = type(value)
    if t is bool:
        return "the boolean " + ("true" if value else "false")
    if t is int or t is float:
        return f"the number {value!r}"
    if t is str:
        return f"the string {value[:60]!r}"
    if t is list:
        return "an array"
    if t is dict:
        return "an object"
    return f"a {t.__name__}"


def _invalid(message: str, path: str, hint: str | None = None) -> PlainValueInvalid:
    return PlainValueInvalid(message, path=path, hint=hint)


def _merge(a: Schema, b: Schema) -> Schema:
    """Shallow conjunction of two schemas, enough to decide types: ``b`` wins, ``properties`` are united."""
    if a is None or a is True:
        return b
    if b is None or b is True:
        return a
    if a is False or b is False:
        return False
    out = dict(a)
    for k, v in b.items():
        united = k in ("properties", "patternProperties")
        if united and isinstance(out.get(k), Mapping) and isinstance(v, Mapping):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def _read_text(value: str, path: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _invalid("a string that is not Unicode text (unpaired surrogate)", path) from None
    return value


def _read_integral(value: Any, path: str, lo: int, hi: int, what: str) -> int:
    t = type(value)
    if t is float and math.isfinite(value) and value == int(value):
        value = int(value)  # 3.0 is the integer 3: JSON does not distinguish their spellings
    elif t is not int:
        raise _invalid(f"{_describe(value)} where the schema declares {what}", path,
                       "write a whole JSON number" if t is float else None)
    if not lo <= value <= hi:
        raise _invalid(f"{value} is outside the range of {what} ({lo}..{hi})", path,
                       "declare type: number for a value beyond the integer range")
    return int(value)


def _read_double(value: Any, path: str) -> float:
    t = type(value)
    if t is int:
        try:
            return float(value)  # the nearest double, ties to even
        except OverflowError:
            raise _invalid(f"{value} is beyond the range of a double", path) from None
    if t is float and math.isfinite(value):
        return float(value)
    raise _invalid(f"{_describe(value)} where the schema declares a number", path)


def _string_reader(what: str, parse: Any) -> Any:
    def read(value: Any, path: str) -> Any:
        if type(value) is not str:
            raise _invalid(f"{_describe(value)} where the schema declares {what}", path)
        try:
            return parse(_read_text(value, path))
        except ValueError as exc:
            raise _invalid(f"{value[:80]!r} does not read as {what}: {exc}", path) from None

    return read


_read_timestamp = _string_reader("a timestamp (RFC 3339)", parse_rfc3339)
_read_duration = _string_reader("a duration (like 1h30m or 1.5s)", parse_cel_duration)
_read_bytes = _string_reader("bytes (base64url without padding)", decode_base64url)
_read_url = _string_reader("an absolute URL", Url.parse)

_TELO_TYPES: Final[Mapping[str, Any]] = {
    "google.protobuf.Timestamp": _read_timestamp,
    "google.protobuf.Duration": _read_duration,
    "bytes": _read_bytes,
    "Telo.Url": _read_url,
    "uint": lambda v, p: Uint(_read_integral(v, p, 0, UINT64_MAX, "a uint")),
    "int": lambda v, p: _read_integral(v, p, INT64_MIN, INT64_MAX, "an int"),
    "double": _read_double,
}
_FORMATS: Final[Mapping[str, Any]] = {
    "date-time": _read_timestamp,
    "duration": _read_duration,
    "uri": _read_url,
}
_JSON_KIND: Final[Mapping[type, str]] = {
    bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"
}


class _Reader:
    def __init__(self, root: Schema) -> None:
        self.root = root

    def read(self, schema: Schema, value: Any, path: str) -> Any:
        schema = self._resolve(schema, path)
        kind = _JSON_KIND.get(type(value))
        if value is None:
            return None
        if kind is None:
            raise _invalid(f"{_describe(value)} is not a JSON value", path)
        if schema is None or schema is True:
            schema = {}
        if schema is False:
            raise _invalid(f"the schema admits no value here, but {_describe(value)} is there", path)
        if not isinstance(schema, Mapping):
            raise _invalid(f"the schema here is not an object but {type(schema).__name__}", path)
        for combinator in ("anyOf", "oneOf"):
            if isinstance(schema.get(combinator), list):
                return self._read_alternatives(schema, combinator, value, path)
        telo = schema.get("x-telo-type")
        if isinstance(telo, str) and telo in _TELO_TYPES:
            return _TELO_TYPES[telo](value, path)
        declared = schema.get("type")
        types = [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else None
        if kind in ("integer", "number"):
            if types is None:  # no declared type: the JSON number's own form decides
                types = [kind]
            if "integer" in types and (kind == "integer" or "number" not in types):
                return _read_integral(value, path, INT64_MIN, INT64_MAX, "an integer (CEL int)")
            if "number" in types:
                return _read_double(value, path)
        elif types is None or kind in types:
            if kind == "string":
                fmt = _FORMATS.get(schema.get("format"))  # type: ignore[arg-type]
                if fmt is None and schema.get("contentEncoding") == "base64url":
                    fmt = _read_bytes
                return fmt(value, path) if fmt else _read_text(value, path)
            if kind == "boolean":
                return value
            if kind == "object":
                return self._read_object(schema, value, path)
            return self._read_array(schema, value, path)
        raise _invalid(f"{_describe(value)} where the schema declares type {declared!r}", path)

    def _read_alternatives(self, schema: Mapping[str, Any], combinator: str, value: Any, path: str) -> Any:
        rest = {k: v for k, v in schema.items() if k != combinator}
        reasons = []
        for alternative in schema[combinator]:
            try:
                return self.read(_merge(rest, self._resolve(alternative, path)), value, path)
            except PlainValueInvalid as exc:
                reasons.append(exc.message)
        raise _invalid(f"{_describe(value)} reads as none of the {combinator} alternatives: "
                       + "; ".join(reasons), path)

    def _read_object(self, schema: Mapping[str, Any], value: dict[str, Any], path: str) -> dict[str, Any]:
        props = schema.get("properties") or {}
        patterns = schema.get("patternProperties") or {}
        additional = schema.get("additionalProperties", True)
        out: dict[str, Any] = {}
        for key, member in value.items():
            child = json_pointer(path, key)
            if type(key) is not str:
                raise _invalid(f"an object member name of type {type(key).__name__}", child)
            _read_text(key, child)
            if key in props:
                sub = props[key]
            else:
                sub = next((s for p, s in patterns.items() if self._matches(p, key, child)), None)
                if sub is None:
                    sub = additional if additional is not False else True  # reader, not validator
            out[key] = self.read(sub, member, child)
        return out

    @staticmethod
    def _matches(pattern: str, key: str, path: str) -> bool:
        try:
            return re.search(pattern, key) is not None
        except (re.error, TypeError) as exc:
            message = f"the schema's patternProperties pattern {pattern!r} is not a regex: {exc}"
            raise _invalid(message, path) from None

    def _read_array(self, schema: Mapping[str, Any], value: list[Any], path: str) -> list[Any]:
        items = schema.get("items")
        if isinstance(items, list):  # draft 4 .. 2019-09 tuple form
            prefix, rest = items, schema.get("additionalItems", True)
        else:
            prefix = schema.get("prefixItems") or []
            rest = items if items is not None else True
        if rest is False:
            rest = True  # reader, not validator
        return [self.read(prefix[i] if i < len(prefix) else rest, v, json_pointer(path, i))
                for i, v in enumerate(value)]

    def _resolve(self, schema: Schema, path: str) -> Schema:
        """Follow ``$ref`` (local only) and merge ``allOf``, until the schema decides by itself."""
        seen: set[str] = set()
        while isinstance(schema, Mapping):
            if "$ref" in schema:
                ref = schema["$ref"]
                if not isinstance(ref, str) or ref in seen:
                    raise _invalid(f"the schema's $ref {ref!r} is circular or not a string", path)
                seen.add(ref)
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                schema = _merge(self._lookup(ref, path), rest) if rest else self._lookup(ref, path)
            elif isinstance(schema.get("allOf"), list):
                merged: Schema = {k: v for k, v in schema.items() if k != "allOf"}
                for part in schema["allOf"]:
                    merged = _merge(merged, self._resolve(part, path))
                schema = merged
            else:
                break
        return schema

    def _lookup(self, ref: str, path: str) -> Schema:
        if not ref.startswith("#"):
            raise _invalid(f"the schema's $ref {ref!r} is not local (only #/… refs are resolved)", path)
        node: Any = self.root
        pointer = unquote(ref[1:])
        tokens = pointer.split("/")[1:] if pointer else []
        for token in tokens:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise _invalid(f"the schema's $ref {ref!r} does not resolve", path)
        if not (node is None or isinstance(node, (bool, Mapping))):
            raise _invalid(f"the schema's $ref {ref!r} names a {type(node).__name__}, not a schema", path)
        return node
