"""Schema fragments shared by the built-in kind specs (plain dicts: nothing is parsed at import time)."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
# Durations as upstream writes them: "250ms", "1.5s", "90m", "2h", "1d" (reference §5 Sleep, §6 Result).
DURATION_PATTERN = r"^[0-9]+(\.[0-9]+)?(ms|s|m|h|d)$"


def ref(kind: str = "*", **extra: Any) -> Schema:
    """A reference slot accepting ``!ref`` or an inline ``{kind: …}`` of ``kind`` (or one extending it)."""
    return {"x-telo-ref": kind, **extra}


def steps(**extra: Any) -> Schema:
    """A step list (the shared Step grammar of reference §3)."""
    return {"x-telo-steps": True, **extra}


def runtime(**schema: Any) -> Schema:
    """A field that may be CEL, evaluated per call against ``{inputs}`` plus the module scope."""
    return {"x-telo-eval": "runtime", **schema}


def compile_time(**schema: Any) -> Schema:
    """A field that may be CEL, evaluated once at load against the module scope (no ``inputs``)."""
    return {"x-telo-eval": "compile", **schema}


def duration(**extra: Any) -> Schema:
    """A duration string (``250ms``, ``1.5s``, ``2m``, ``1h``, ``1d``)."""
    return {"type": "string", "pattern": DURATION_PATTERN, **extra}


def ms_or_duration(**extra: Any) -> Schema:
    """A number of milliseconds or a duration string: ``timeout: 1000`` and ``timeout: 1s`` are one value.

    Upstream writes these fields as numbers of ms; a duration string is accepted too, as everywhere else a
    duration is written (issue 15). ``pattern`` constrains strings only and ``minimum`` numbers only, so one
    schema says both; :func:`telo.specs.durations.duration_ms` reads the value.
    """
    return {"type": ["number", "string"], "pattern": DURATION_PATTERN, "x-telo-unit": "ms", **extra}


def type_slot(**extra: Any) -> Schema:
    """``inputType``/``outputType``: a ``Telo.Type`` (``Telo.JsonSchema`` extends it), by ``!ref`` or inline."""
    return ref("Telo.Type", **extra)


def input_type() -> Schema:
    return type_slot(description="The call's input contract: a `Telo.Type` (`!ref` or an inline "
                                 "`{kind: Telo.JsonSchema, schema: …}`); inputs that fail it are refused with "
                                 "ERR_INPUT_INVALID before the call.")


def output_type() -> Schema:
    return type_slot(description="The call's output contract: a `Telo.Type`; a result that fails it is "
                                 "ERR_OUTPUT_INVALID.")


def config(properties: dict[str, Schema], required: tuple[str, ...] = (), /, **extra: Any) -> Schema:
    """A kind's configuration schema: a closed object (an unknown field is an author's typo, reported)."""
    out: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    out.update(extra)
    return out


def exactly_one(*names: str) -> list[Schema]:
    """``oneOf`` branches saying exactly one of ``names`` is present (Sleep ``for``|``until``, …)."""
    return [{"required": [n]} for n in names]


CATCHES: Schema = {
    "type": "array",
    "description": "Whole-operation fallbacks `[{when?, value}]`: when the operation fails, the first entry whose "
                   "`when` holds (seeing `error` and `inputs`) supplies the result instead.",
    "items": {
        "type": "object",
        "properties": {"when": runtime(type="boolean"), "value": runtime()},
        "required": ["value"],
        "x-telo-scope": ["error"],  # a whole-operation fallback sees {error, inputs}
        "additionalProperties": False,
    },
}

NO_CONFIG: Schema = config({})
