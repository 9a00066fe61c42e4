"""``variables:`` and ``secrets:`` of a Telo.Application (reference §1).

Each entry is ``{env: HOST_VAR, type: string|integer|number|boolean|object|array, default?, …JSON-Schema
keywords}``. The value comes from the host environment at load, coerced by ``type`` (integer: ``^-?\\d+$``;
boolean: only ``"true"``/``"false"``; object/array: JSON), else the default; it is then validated against
the remaining JSON-Schema keywords. No value and no default is ``ERR_MANIFEST_VALIDATION_FAILED``; every
such problem is reported, not just the first. A secret's value never appears in a message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from jsonschema.exceptions import SchemaError

from .diagnostics import ERR_MANIFEST_INVALID_NAME, ERR_MANIFEST_VALIDATION_FAILED, Diagnostic
from .json_schema import Unresolvable, offline_validator, unresolved_ref
from .model import Variable
from .nodes import Cel, Template
from .positions import PositionTable, join
from .reader import NAME

_TYPES = ("string", "integer", "number", "boolean", "object", "array")
_INTEGER = re.compile(r"-?\d+")
_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
# Keys of an entry that are not JSON-Schema constraints on the value.
_NOT_SCHEMA = ("env", "default", "description", "title", "examples")


class _Missing:
    pass


_MISSING = _Missing()


def evaluate(
    section: str,
    entries: Any,
    env: Mapping[str, str],
    table: PositionTable,
    diagnostics: list[Diagnostic],
) -> dict[str, Variable]:
    """Evaluate ``variables`` or ``secrets`` (``section``); ``entries`` is the mapping from the document."""
    secret = section == "secrets"
    out: dict[str, Variable] = {}
    if entries is None:
        return out
    where = join("", section)
    if not isinstance(entries, dict):
        diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED, f"{section} must be a mapping of names to "
                                      "{env, type, default?}", table.value(where)))
        return out
    for name, entry in entries.items():
        pointer = join(where, name)
        pos = table.value(pointer)

        def fail(message: str, at: str = pointer, *, _name: str = name) -> None:
            diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED,
                                          f"{section[:-1]} {_name!r}: {message}", table.value(at)))

        if not NAME.fullmatch(name):
            diagnostics.append(Diagnostic(ERR_MANIFEST_INVALID_NAME, f"{section[:-1]} name {name!r} is not a name "
                                          "(^[A-Za-z_][A-Za-z0-9_]*$)", table.key(pointer)))
            continue
        if not isinstance(entry, dict):
            fail("expected a mapping {env, type, default?, …}")
            continue
        var_env = entry.get("env")
        kind = entry.get("type")
        if var_env is not None and not isinstance(var_env, str):
            fail("`env` must be the name of a host environment variable", join(pointer, "env"))
            continue
        if kind is not None and kind not in _TYPES:
            fail(f"`type` must be one of {', '.join(_TYPES)}", join(pointer, "type"))
            continue
        value: Any = _MISSING
        if var_env is not None and var_env in env:
            raw = env[var_env]
            value = _coerce(raw, kind)
            if value is _MISSING:
                shown = "(secret)" if secret else repr(raw)
                fail(f"environment variable {var_env} = {shown} is not a valid {kind}")
                continue
        elif "default" in entry:
            value = entry["default"]
            if isinstance(value, Cel | Template):
                fail("a default is a literal value, not a CEL expression", join(pointer, "default"))
                continue
        if value is _MISSING:
            source = f"environment variable {var_env} is not set" if var_env else "it has no `env`"
            fail(f"no value: {source} and there is no default")
            continue
        schema = {k: v for k, v in entry.items() if k not in _NOT_SCHEMA and not k.startswith("x-")}
        problem = _check(value, schema, secret)
        if problem:
            fail(problem)
            continue
        out[name] = Variable(name, value, var_env, pos, secret)
    return out


def _coerce(raw: str, kind: str | None) -> Any:
    """The typed value of an environment string (reference §1), or ``_MISSING`` when it does not parse."""
    if kind in (None, "string"):
        return raw
    text = raw.strip()
    if kind == "integer":
        return int(text) if _INTEGER.fullmatch(text) else _MISSING
    if kind == "number":
        if _INTEGER.fullmatch(text):
            return int(text)  # an integral number stays a CEL int, as the same YAML literal would
        return float(text) if _NUMBER.fullmatch(text) else _MISSING
    if kind == "boolean":
        return {"true": True, "false": False}.get(text, _MISSING)
    try:
        parsed = json.loads(text)
    except ValueError:
        return _MISSING
    expected = dict if kind == "object" else list
    return parsed if isinstance(parsed, expected) else _MISSING


def _check(value: Any, schema: dict[str, Any], secret: bool) -> str | None:
    try:
        validator = offline_validator(schema)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    except SchemaError as exc:
        return f"its declaration is not a valid JSON Schema: {exc.message}"
    except Unresolvable as exc:
        return f"its declaration refers to {unresolved_ref(exc)!r}, which is not inside it (nothing is fetched)"
    if not errors:
        return None
    if secret:  # the message of a failed constraint quotes the value
        return f"the value does not satisfy `{errors[0].validator}`"
    return "; ".join(e.message for e in errors)
