"""Module ``run`` (library ``Run``): the step composers (reference §3)."""

from __future__ import annotations

from .common import CATCHES, config, ref, runtime, steps, type_slot
from .model import KindSpec, ModuleSpec, module

M = "Run"
_ITEM_SCOPE = ["item", "index", "items"]
_BINDINGS = {"x-telo-bindings": True}  # the expression also sees the resource's `bindings:` names

SEQUENCE = KindSpec(
    M, "Sequence",
    config(
        {
            "steps": steps(),
            "inputType": type_slot(),
            "outputType": type_slot(),
            "outputs": runtime(type="object", **{"x-telo-scope": ["steps"]}),  # against {steps, inputs}
            # Inline resource declarations scoped to one run of the sequence (created on entry, torn down
            # on exit); each is a full `{kind, metadata: {name}, …}` document.
            "with": {"type": "array", "items": {"type": "object", "required": ["kind", "metadata"]},
                     "x-telo-with": True},
            "targets": {"type": "array", "items": ref("*")},  # with-resources run() before the steps
        },
        ("steps",),
    ),
    "invocable",
    capabilities=frozenset({"runnable"}),
)

VALUE = KindSpec(
    M, "Value",
    config(
        {
            "value": runtime(**_BINDINGS),  # sees {inputs, …bindings}
            "bindings": {"type": "object", "additionalProperties": runtime(**_BINDINGS)},
            "inputType": type_slot(),
            "outputType": type_slot(),
        },
        ("value",),
    ),
    "invocable",
)

_COLLECTION = {
    "collection": runtime(type="array"),  # an array (or, for Iteration, an async stream)
    "concurrency": runtime(type="integer", minimum=1, default=1),
    "steps": steps(**{"x-telo-scope": _ITEM_SCOPE}),
    "catches": CATCHES,
    "inputType": type_slot(),
    "outputType": type_slot(),
}

ITERATION = KindSpec(M, "Iteration", config(dict(_COLLECTION), ("collection", "steps")), "invocable")

PROJECTION = KindSpec(
    M, "Projection",
    config({**_COLLECTION, "outputs": runtime(type="object", **{"x-telo-scope": [*_ITEM_SCOPE, "steps"]})},
           ("collection", "steps")),
    "invocable",
)

LOOP = KindSpec(
    M, "Loop",
    config(
        {
            "condition": runtime(type="boolean", **{"x-telo-scope": ["iteration", "previous"]}),
            "maxIterations": runtime(type="integer", minimum=1),
            "steps": steps(**{"x-telo-scope": ["iteration", "previous"]}),
            "outputs": runtime(type="object", **{"x-telo-scope": ["steps", "iteration", "previous"]}),
            "catches": CATCHES,
            "inputType": type_slot(),
            "outputType": type_slot(),
        },
        ("steps",),
        # At least one bound (else INVALID_LOOP at run time; reported at load here).
        anyOf=[{"required": ["condition"]}, {"required": ["maxIterations"]}],
    ),
    "invocable",
)

CHOICE = KindSpec(
    M, "Choice",
    config(
        {
            "choices": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"when": runtime(type="boolean", **_BINDINGS), "value": runtime(**_BINDINGS)},
                    "required": ["when", "value"],
                    "additionalProperties": False,
                },
            },
            "default": {"type": "object", "properties": {"value": runtime(**_BINDINGS)}, "required": ["value"],
                        "additionalProperties": False},
            "bindings": {"type": "object", "additionalProperties": runtime(**_BINDINGS)},
            "inputType": type_slot(),
            "outputType": type_slot(),
        },
        ("choices",),
    ),
    "invocable",
)

DETACH = KindSpec(
    M, "Detach",
    config({"invoke": ref("*", **{"x-telo-use": "detached"}), "inputs": runtime()}, ("invoke",)),
    "invocable",
    output_schema={"type": "object", "properties": {"detached": {"const": True}}},
)

RUN: ModuleSpec = module("run", M, SEQUENCE, VALUE, ITERATION, PROJECTION, LOOP, CHOICE, DETACH)
