"""Schema validation of resource configs, with every violation reported at its ``file:line:col``
(reference §1; the step grammar of reference §3).

``jsonschema``'s draft 2020-12 validator, extended:

* a :class:`Cel` or :class:`Template` leaf satisfies any schema — its value exists only once evaluated
  (the CEL checker hook and the engine take it from there);
* ``x-telo-ref`` accepts a :class:`Ref` or an inline ``{kind: …}`` mapping and refuses a bare string (the
  tag is mandatory, reference §1); whether the reference resolves is checked by :mod:`.graph`;
* ``x-telo-steps`` validates a step list: each step has a ``name`` of the step-name grammar and exactly
  one kind key (reference §3, checked in order invoke, if, while, switch, try, throw, value), then its
  kind's schema, which recurses into nested bodies.

Each ``jsonschema`` error carries the path of the offending instance; the path is the JSON Pointer the
resource's position table is keyed by.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend

from telo.specs.common import DURATION_PATTERN
from telo.specs.steps import STEP_KINDS, STEP_SCHEMAS, step_kinds_present

from .diagnostics import (
    ERR_DUPLICATE_STEP_NAME,
    ERR_INVALID_STEP_NAME,
    ERR_MANIFEST_BARE_REFERENCE,
    ERR_MANIFEST_INVALID_STEP,
    ERR_MANIFEST_VALIDATION_FAILED,
    ERR_STEP_NAME_REQUIRED,
    WARN_DUPLICATE_STEP_NAME,
    WARN_RESERVED_STEP_NAME,
    Diagnostic,
)
from .json_schema import Unresolvable, offline_validator, unresolved_ref
from .nodes import Cel, Ref, Template
from .positions import PositionTable, from_path, join
from .reader import NAME

# `validator` names of the errors raised by our own keywords: they select the diagnostic code.
_CODES = {
    "x-telo-ref-bare": ERR_MANIFEST_BARE_REFERENCE,
    "x-telo-ref": ERR_MANIFEST_VALIDATION_FAILED,
    "x-telo-step-name-required": ERR_STEP_NAME_REQUIRED,
    "x-telo-step-name": ERR_INVALID_STEP_NAME,
    "x-telo-step-kind": ERR_MANIFEST_INVALID_STEP,
}
_WARNINGS = {"x-telo-step-duplicate": WARN_DUPLICATE_STEP_NAME, "x-telo-step-reserved": WARN_RESERVED_STEP_NAME}
# CEL's language keywords: `steps.in.result` does not parse. The reserved words (CEL spec, "Syntax") parse as a
# field here but not in every implementation: a warning.
CEL_KEYWORDS = frozenset({"true", "false", "null", "in"})
CEL_RESERVED = frozenset({"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
                          "loop", "package", "namespace", "return", "var", "void", "while"})
# Kinds whose step lists always run journaled: a duplicate step name there is an error, not a warning.
DURABLE_BODIES = frozenset({"DurableLocal.Workflow", "Durable.Idempotent"})
_STEP_LIST = ", ".join(STEP_KINDS)
_Keyword = Callable[[Any, Any, Any, Mapping[str, Any]], Iterator[ValidationError]]


def _skip_expressions(keyword: _Keyword) -> _Keyword:
    def wrapped(validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
        if isinstance(instance, Cel | Template):
            return
        yield from keyword(validator, value, instance, schema)

    return wrapped


def _ref_keyword(validator: Any, wanted: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if isinstance(instance, Ref) or (isinstance(instance, dict) and "kind" in instance):
        return
    if isinstance(instance, str):
        yield ValidationError(
            f"{instance!r} is a bare string in a reference slot: write `!ref {instance}`",
            validator="x-telo-ref-bare",
        )
    elif isinstance(instance, Cel | Template):
        yield ValidationError("a reference slot takes `!ref name` or an inline `{kind: …}` resource, not a CEL "
                              "expression", validator="x-telo-ref")
    else:
        yield ValidationError(
            f"expected a reference (`!ref name`) or an inline resource (`{{kind: …}}`), got {_describe(instance)}",
            validator="x-telo-ref",
        )


def _steps_keyword(validator: Any, enabled: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if not enabled:
        return
    if isinstance(instance, Ref) and schema.get("x-telo-steps-or-ref"):
        return  # a body given as `!ref executable` (upstream's Sql.Transaction): the graph checks the reference
    if not isinstance(instance, list):
        yield ValidationError(f"expected a list of steps, got {_describe(instance)}", validator="x-telo-steps-shape")
        return
    seen: set[str] = set()
    for index, step in enumerate(instance):
        if not isinstance(step, dict):
            yield ValidationError(f"a step is a mapping, got {_describe(step)}", validator="x-telo-steps-shape",
                                  path=(index,))
            continue
        name = step.get("name")
        if "name" not in step:
            yield ValidationError("a step needs a `name`", validator="x-telo-step-name-required", path=(index,))
        elif not (isinstance(name, str) and NAME.fullmatch(name)):
            yield ValidationError(
                f"invalid step name {name!r}: a step name matches ^[A-Za-z_][A-Za-z0-9_]*$ (a hyphen reads as "
                "subtraction in CEL)", validator="x-telo-step-name", path=(index, "name"))
        elif name in CEL_KEYWORDS:
            yield ValidationError(
                f"invalid step name {name!r}: it is a CEL keyword, so `steps.{name}.result` cannot be written "
                "(the expression does not parse)", validator="x-telo-step-name", path=(index, "name"))
        else:
            if name in CEL_RESERVED:
                yield ValidationError(
                    f"step name {name!r} is a word CEL reserves: this runtime reads `steps.{name}`, but a CEL "
                    "implementation that follows the specification strictly refuses it",
                    validator="x-telo-step-reserved", path=(index, "name"))
            if name in seen:
                yield ValidationError(
                    f"another step of this list is already named {name!r}: both would record under one journal "
                    "path, and the second would replay the first's result instead of running (rename one)",
                    validator="x-telo-step-duplicate", path=(index, "name"))
            seen.add(name)
        kinds = step_kinds_present(step)
        if not kinds:
            yield ValidationError(f"a step needs exactly one of: {_STEP_LIST}", validator="x-telo-step-kind",
                                  path=(index,))
            continue
        for extra in kinds[1:]:
            yield ValidationError(
                f"a step is exactly one kind: {kinds[0]!r} and {extra!r} are both present (it would run as "
                f"{kinds[0]!r})", validator="x-telo-step-kind", path=(index, extra))
        if len(kinds) > 1:  # the extra kind keys are reported above, not again as unknown fields
            step = {k: v for k, v in step.items() if k not in kinds[1:]}
        yield from validator.descend(step, STEP_SCHEMAS[kinds[0]], path=index)


_TeloValidator: type[Validator] = extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    validators={
        **{k: _skip_expressions(v) for k, v in Draft202012Validator.VALIDATORS.items()},
        "x-telo-ref": _ref_keyword,
        "x-telo-steps": _skip_expressions(_steps_keyword),
    },
)


# Specs are long-lived module constants: key by identity, holding the schema so its id stays unique.
_VALIDATORS: dict[int, tuple[Mapping[str, Any], Validator]] = {}


def validator_for(schema: Mapping[str, Any]) -> Validator:
    """A (cached) validator for ``schema``."""
    cached = _VALIDATORS.get(id(schema))
    if cached is None or cached[0] is not schema:
        if len(_VALIDATORS) > 1024:  # library schemas are per load; do not grow without bound
            _VALIDATORS.clear()
        cached = (schema, offline_validator(schema, _TeloValidator))
        _VALIDATORS[id(schema)] = cached
    return cached[1]


def validate(
    instance: Any,
    schema: Mapping[str, Any],
    table: PositionTable,
    base: str,
    subject: str,
    diagnostics: list[Diagnostic],
    *,
    durable: bool = False,
) -> None:
    """Validate ``instance`` (found at ``base`` in ``table``'s document) and append one diagnostic per
    violation; ``subject`` names it in messages (``Local.Workflow 'order'``). ``durable``: the instance is a
    durable body (DURABLE_BODIES), whose duplicate step names are errors."""
    try:
        for error in validator_for(schema).iter_errors(instance):
            diagnostics.extend(_to_diagnostics(error, table, base, subject, durable))
    except Unresolvable as exc:  # a $ref outside the schema: never fetched (json_schema)
        diagnostics.append(Diagnostic(
            ERR_MANIFEST_VALIDATION_FAILED,
            f"{subject}: its kind's schema refers to {unresolved_ref(exc)!r}, which is not inside the schema "
            "(telo fetches no schema from elsewhere)", table.value(base),
            hint="write the referenced schema into the Telo.Definition's schema ($defs), or import the module "
                 "telo ships instead of a library written for another runtime"))


def _to_diagnostics(error: ValidationError, table: PositionTable, base: str, subject: str,
                    durable: bool = False) -> list[Diagnostic]:
    path = list(error.absolute_path)
    pointer = join(base, *path)
    where = from_path(path) or "/"
    kind = str(error.validator)
    if kind == "x-telo-step-duplicate" and durable:
        return [Diagnostic(ERR_DUPLICATE_STEP_NAME, f"{subject} at {where}: {error.message}", table.value(pointer))]
    if kind in _WARNINGS:
        return [Diagnostic(_WARNINGS[kind], f"{subject} at {where}: {error.message}", table.value(pointer),
                           severity="warning")]
    if kind == "additionalProperties" and isinstance(error.instance, dict):
        allowed = error.schema.get("properties", {}) if isinstance(error.schema, Mapping) else {}
        patterns = error.schema.get("patternProperties", {}) if isinstance(error.schema, Mapping) else {}
        extras = [k for k in error.instance if k not in allowed and not any(re.search(p, k) for p in patterns)]
        known = ", ".join(allowed) or "none"
        named = error.instance.get("name")
        if isinstance(error.schema, Mapping) and error.schema.get("x-telo-step") and isinstance(named, str):
            where = f"on step {named!r} ({where})"
        else:
            where = f"at {where}"
        return [
            Diagnostic(ERR_MANIFEST_VALIDATION_FAILED, f"{subject}: unknown field {k!r} {where} (fields: {known})",
                       table.key(join(pointer, k)), hint=_did_you_mean(k, list(allowed)))
            for k in extras
        ]
    code = _CODES.get(kind, ERR_MANIFEST_VALIDATION_FAILED)
    # A second step-kind key is pointed at where the key is written, not at its value.
    pos = table.key(pointer) if kind == "x-telo-step-kind" else table.value(pointer)
    return [Diagnostic(code, f"{subject} at {where}: {_message(error)}", pos)]


def _message(error: ValidationError) -> str:
    """A message that names fields and YAML types instead of dumping the instance's Python repr."""
    kind, instance = error.validator, error.instance
    value: Any = error.validator_value
    if kind == "required":
        missing = [k for k in value if not (isinstance(instance, dict) and k in instance)]
        return f"missing required field {missing[0]!r}" if missing else error.message
    if kind == "type":
        if isinstance(instance, Ref):
            return f"a reference ({instance}) is not allowed here; expected {_types(value)}"
        return f"expected {_types(value)}, got {_describe(instance)}"
    if kind in ("oneOf", "anyOf") and all(_is_required_only(s) for s in value):
        names = [s["required"][0] for s in value]
        present = [n for n in names if isinstance(instance, dict) and n in instance]
        listed = " or ".join(repr(n) for n in names)
        if kind == "oneOf" and len(present) > 1:
            return f"only one of {listed} may be given, found {', '.join(repr(p) for p in present)}"
        return f"{'exactly' if kind == 'oneOf' else 'at least'} one of {listed} is required"
    if kind == "enum":
        return f"{_short(instance)} is not one of {', '.join(_short(v) for v in value)}"
    if kind == "const":
        return f"expected {_short(value)}, got {_short(instance)}"
    if kind == "pattern" and value == DURATION_PATTERN:
        # A duration field: say what is meant rather than print the regular expression.
        numeric = isinstance(error.schema, Mapping) and "number" in (error.schema.get("type") or ())
        return (f"{_short(instance)} is not a duration: write a number and one unit, like 250ms, 1.5s, 2m, 1h or "
                f"1d{' (or a number of milliseconds)' if numeric else ''}")
    if kind == "pattern":
        return f"{_short(instance)} does not match {value}"
    if kind in ("maxProperties", "minProperties") and isinstance(instance, dict):
        bound = "at most" if kind == "maxProperties" else "at least"
        return (f"{bound} {value} field{'' if value == 1 else 's'} may be given here, found {len(instance)}"
                + (f" ({', '.join(repr(str(k)) for k in instance)})" if instance else ""))
    shown = repr(instance)  # jsonschema's own messages start with the instance's repr: say it in YAML terms
    if error.message.startswith(shown):
        return _describe(instance) + error.message[len(shown):]
    return error.message


def _did_you_mean(word: str, candidates: list[str]) -> str | None:
    """``timeOut`` → ``timeout``, ``retyr`` → ``retry``: case-insensitive first, then by similarity."""
    for candidate in candidates:
        if candidate.lower() == word.lower():
            return f"did you mean {candidate!r}?"
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def _is_required_only(schema: Any) -> bool:
    return isinstance(schema, Mapping) and set(schema) == {"required"} and len(schema["required"]) == 1


def _types(value: Any) -> str:
    names = [value] if isinstance(value, str) else list(value)
    return " or ".join({"object": "a mapping", "array": "a list", "null": "null"}.get(n, f"a {n}") for n in names)


def _describe(instance: Any) -> str:
    """The YAML-level description of a value for messages."""
    if isinstance(instance, bool):
        return f"the boolean {str(instance).lower()}"
    if isinstance(instance, int | float):
        return f"the number {instance}"
    if isinstance(instance, str):
        return f"the string {_short(instance)}"
    if instance is None:
        return "null"
    if isinstance(instance, dict):
        return "a mapping"
    if isinstance(instance, list):
        return "a list"
    if isinstance(instance, bytes):
        return f"{len(instance)} bytes"
    if isinstance(instance, Ref):
        return f"a reference ({instance})"
    return type(instance).__name__


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, Ref) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["validate", "validator_for"]
