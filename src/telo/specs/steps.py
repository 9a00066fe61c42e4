"""The shared Step grammar (reference §3), as data: which key makes a step which kind, and a JSON Schema
per step kind. Nested bodies are ``{"x-telo-steps": true}``, so a validator that understands that keyword
recurses through ``then``/``do``/``cases``/``try``… with the same grammar.

The schemas are *closed*, unlike upstream's open one: a misspelt field (``retyr: {attempts: 5}``, ``timeOut:``)
would otherwise load and silently do nothing — the retry disappears. The one extra key upstream's test suites
write, ``maxIterations`` on a ``while`` step, is accepted and ignored as upstream does (caps belong to
``Run.Loop``, reference §3). ``name`` is checked by the validator itself (it has its own codes,
``ERR_STEP_NAME_REQUIRED`` and ``ERR_INVALID_STEP_NAME``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .common import DURATION_PATTERN, Schema, ref, runtime, steps

# Checked in this order: the first key present decides the step's kind (reference §3).
STEP_KINDS: tuple[str, ...] = ("invoke", "if", "while", "switch", "try", "throw", "value")

PREDICATE: Schema = runtime(type="boolean")  # a literal must be a real boolean (spec: no truthiness)

RETRY: Schema = {
    "type": "object",
    "properties": {
        "attempts": {"type": "integer", "minimum": 0, "default": 0},
        "initialDelay": {"type": "number", "minimum": 0, "default": 250},
        "factor": {"type": "number", "exclusiveMinimum": 0, "default": 2},
        "maxDelay": {"type": "number", "minimum": 0, "default": 32000},
        "jitter": {"enum": ["full", "none"], "default": "full"},
        "nonRetryable": {"type": "array", "items": {"type": "string"}, "default": []},
        # Deprecated: read only when initialDelay is absent; units ms|s|m|h (reference §3).
        "delay": {"type": "string", "pattern": r"^[0-9]+(ms|s|m|h)$", "deprecated": True},
    },
    "additionalProperties": False,
}

_ERROR_SCOPE: Schema = {"x-telo-steps": True, "x-telo-scope": ["error"]}  # catch/finally see `error`
_COMMON: Schema = {"name": {"type": "string"}, "when": PREDICATE}


def _step(kind: str, properties: Schema, required: tuple[str, ...]) -> Schema:
    return {
        "type": "object",
        "x-telo-step": kind,
        "properties": {**_COMMON, **properties},
        "required": list(required),
        "additionalProperties": False,
    }


STEP_SCHEMAS: Mapping[str, Schema] = {
    "invoke": _step(
        "invoke",
        {
            "invoke": ref("*"),
            "inputs": runtime(),
            "retry": RETRY,
            "timeout": {"type": "number", "exclusiveMinimum": 0},  # ms, bounds each attempt
            # telo: what recovery does with this step's effect if its outcome is unknown (event-log §2)
            "onUnconfirmed": {"enum": ["redrive", "park", "fail"]},
        },
        ("invoke",),
    ),
    "if": _step(
        "if",
        {
            "if": PREDICATE,
            "then": steps(),
            "elseif": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"if": PREDICATE, "then": steps()},
                    "required": ["if", "then"],
                    "additionalProperties": False,
                },
            },
            "else": steps(),
        },
        ("if", "then"),
    ),
    "while": _step(
        "while",
        # maxIterations: accepted and ignored, as upstream's open schema does (its test suites write it)
        {"while": PREDICATE, "do": steps(), "maxIterations": {"type": "integer", "minimum": 0}},
        ("while", "do"),
    ),
    "switch": _step(
        "switch",
        {"switch": runtime(), "cases": {"type": "object", "additionalProperties": steps()}, "default": steps()},
        ("switch", "cases"),
    ),
    "try": _step(
        "try",
        {"try": steps(), "catch": _ERROR_SCOPE, "finally": _ERROR_SCOPE},
        ("try",),
    ),
    "throw": _step(
        "throw",
        {
            "throw": runtime(
                type="object",
                properties={"code": {"type": "string", "minLength": 1}, "message": {"type": "string"}, "data": {}},
                required=["code"],
                additionalProperties=False,
            )
        },
        ("throw",),
    ),
    "value": _step("value", {"value": runtime()}, ("value",)),
}

# The schema of an inline boot target: an invoke step whose name is optional (default `Target<i>`).
TARGET_STEP: Schema = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "invoke": ref("*"),
        "inputs": runtime(),
        "when": PREDICATE,
        "retry": RETRY,
        "timeout": {"type": "number", "exclusiveMinimum": 0},
    },
    "required": ["invoke"],
    "additionalProperties": False,
}


def step_kinds_present(step: Mapping[str, Any]) -> list[str]:
    """The step-kind keys present in ``step``, in the deciding order; the first one is its kind."""
    return [k for k in STEP_KINDS if k in step]


def step_kind(step: Mapping[str, Any]) -> str | None:
    """The kind of ``step`` (reference §3: the first of invoke, if, while, switch, try, throw, value)."""
    present = step_kinds_present(step)
    return present[0] if present else None


def branch_bodies(step: Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], Any]]:
    """The nested step lists of a step with the key segments that lead to each (reference §1 inline names,
    §4 journaling paths): ``then`` | ``elseif, i, then`` | ``else`` | ``do`` | ``cases, key`` | ``default`` |
    ``try`` | ``catch`` | ``finally``. Values are returned as found (they may not be lists)."""
    kind = step_kind(step)
    out: list[tuple[tuple[str | int, ...], Any]] = []
    if kind == "if":
        if "then" in step:
            out.append((("then",), step["then"]))
        elseif = step.get("elseif")
        if isinstance(elseif, list):
            for i, branch in enumerate(elseif):
                if isinstance(branch, Mapping) and "then" in branch:
                    out.append((("elseif", i, "then"), branch["then"]))
        if "else" in step:
            out.append((("else",), step["else"]))
    elif kind == "while":
        if "do" in step:
            out.append((("do",), step["do"]))
    elif kind == "switch":
        cases = step.get("cases")
        if isinstance(cases, Mapping):
            out.extend((("cases", key), body) for key, body in cases.items())
        if "default" in step:
            out.append((("default",), step["default"]))
    elif kind == "try":
        out.extend(((key,), step[key]) for key in ("try", "catch", "finally") if key in step)
    return out


__all__ = ["DURATION_PATTERN", "PREDICATE", "RETRY", "STEP_KINDS", "STEP_SCHEMAS", "TARGET_STEP",
           "branch_bodies", "step_kind", "step_kinds_present"]
