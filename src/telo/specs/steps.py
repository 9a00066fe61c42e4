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

from .common import DURATION_PATTERN, Schema, ms_or_duration, ref, runtime, steps

# Checked in this order: the first key present decides the step's kind (reference §3).
STEP_KINDS: tuple[str, ...] = ("invoke", "if", "while", "switch", "try", "throw", "value")

PREDICATE: Schema = runtime(type="boolean")  # a literal must be a real boolean (spec: no truthiness)


def _predicate(description: str) -> Schema:
    return {**PREDICATE, "description": description}


RETRY: Schema = {
    "type": "object",
    "description": "Re-attempt the call when it fails with a retryable error. Backoff before re-attempt k "
                   "(0-based) = min(maxDelay, initialDelay × factor^k); a backoff of 30 s or more parks a durable "
                   "run until it is due instead of holding the process.",
    "properties": {
        "attempts": {"type": "integer", "minimum": 0, "default": 0,
                     "description": "RE-attempts after the first call, not the total: `attempts: 2` makes up to "
                                    "three calls (unlike DBOS `max_attempts` or Temporal `maximumAttempts`, "
                                    "which count the first call). 0: no retry."},
        "initialDelay": ms_or_duration(minimum=0, default=250, examples=[200, "200ms", "1s"],
                                       description="Backoff before the first re-attempt: a number of "
                                                   "milliseconds or a duration string."),
        "factor": {"type": "number", "exclusiveMinimum": 0, "default": 2,
                   "description": "Each further backoff is the previous one times `factor`."},
        "maxDelay": ms_or_duration(minimum=0, default=32000, examples=[32000, "32s", "5m"],
                                   description="Cap on any one backoff: a number of milliseconds or a duration "
                                               "string."),
        "jitter": {"enum": ["full", "none"], "default": "full",
                   "description": "`full`: each wait is a random time between 0 and the computed backoff (so "
                                  "by default waits are shorter than the formula); `none`: exactly the backoff."},
        "nonRetryable": {"type": "array", "items": {"type": "string"}, "default": [],
                         "description": "Error codes that fail at once, never retried (contract, resolution "
                                        "and cancellation errors are never retried anyway)."},
        # Deprecated: read only when initialDelay is absent; units ms|s|m|h (reference §3).
        "delay": {"type": "string", "pattern": r"^[0-9]+(ms|s|m|h)$", "deprecated": True,
                  "description": "Deprecated spelling of `initialDelay` as a duration string; read only "
                                 "when `initialDelay` is absent."},
    },
    "additionalProperties": False,
}

_NAME: Schema = {"type": "string",
                 "description": "Required. The step's name (`^[A-Za-z_][A-Za-z0-9_]*$`): its result is "
                                "`steps.<name>.result`, and its journal path ends in it."}
_WHEN: Schema = _predicate("Run the step only when this is true; otherwise it is skipped (no result).")
_COMMON: Schema = {"name": _NAME, "when": _WHEN}
_TIMEOUT: Schema = ms_or_duration(exclusiveMinimum=0, examples=[5000, "5s", "100ms"],
                                  description="Bound on each attempt (not on all of them together): a number of "
                                              "milliseconds or a duration string. An attempt that runs over "
                                              "fails with ERR_STEP_TIMEOUT (data `{step, timeout}`, timeout in "
                                              "ms), which `retry` re-attempts.")
_INVOKE: Schema = {
    "invoke": ref("*", description="The resource to call: `!ref name` or an inline `{kind: …}` resource."),
    "inputs": runtime(description="The call's inputs; CEL leaves are evaluated against the body's scope "
                                  "(`inputs`, `steps`, …)."),
    "retry": RETRY,
    "timeout": _TIMEOUT,
}


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
            **_INVOKE,
            # telo: what recovery does with this step's effect if its outcome is unknown (event-log §2)
            "onUnconfirmed": {"enum": ["redrive", "park", "fail"],
                              "description": "telo: what recovery does when the call's intent is journaled but "
                                             "its receipt is not (a crash mid-call): `redrive` it, `park` the "
                                             "run for an operator (`telo resolve`), or `fail` it. Overrides "
                                             "the target's own `onUnconfirmed` (Python.Function)."},
        },
        ("invoke",),
    ),
    "if": _step(
        "if",
        {
            "if": _predicate("The condition; must produce a boolean (else ERR_PREDICATE_NOT_BOOLEAN)."),
            "then": steps(description="Steps run when `if` is true."),
            "elseif": {
                "type": "array",
                "description": "Further `{if, then}` branches, tried in order when `if` is false.",
                "items": {
                    "type": "object",
                    "properties": {"if": PREDICATE, "then": steps()},
                    "required": ["if", "then"],
                    "additionalProperties": False,
                },
            },
            "else": steps(description="Steps run when no condition held."),
        },
        ("if", "then"),
    ),
    "while": _step(
        "while",
        # maxIterations: accepted and ignored, as upstream's open schema does (its test suites write it)
        {"while": _predicate("Tested before each turn (pre-test); no cap: use Run.Loop for a bounded loop."),
         "do": steps(description="The loop body."),
         "maxIterations": {"type": "integer", "minimum": 0,
                           "description": "Accepted and ignored, as upstream does (caps belong to Run.Loop)."}},
        ("while", "do"),
    ),
    "switch": _step(
        "switch",
        {"switch": runtime(description="The value whose string form selects a case."),
         "cases": {"type": "object", "additionalProperties": steps(),
                   "description": "Step lists by case key."},
         "default": steps(description="Steps run when no case matches (absent: ERR_NO_MATCH).")},
        ("switch", "cases"),
    ),
    "try": _step(
        "try",
        {"try": steps(description="The guarded steps."),
         "catch": {"x-telo-steps": True, "x-telo-scope": ["error"],
                   "description": "Steps run when `try` fails; they see `error {code, message, data, step}`."},
         "finally": {"x-telo-steps": True, "x-telo-scope": ["error"],
                     "description": "Steps run after `try` (and `catch`) whatever happened."}},
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
                description="Fail with this error `{code, message?, data?}` (catchable by `try`/`catch`).",
            )
        },
        ("throw",),
    ),
    "value": _step("value", {"value": runtime(description="The step's result: an expression or a structure "
                                                          "with CEL leaves.")}, ("value",)),
}

# The schema of an inline boot target: an invoke step whose name is optional (default `Target<i>`).
TARGET_STEP: Schema = {
    "type": "object",
    "properties": {
        "name": {**_NAME, "description": "Optional here (default `Target<i>`)."},
        **_INVOKE,
        "when": _WHEN,
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
