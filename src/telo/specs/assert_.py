"""Module ``assert`` (library ``Assert``): the test assertions (reference §14)."""

from __future__ import annotations

from .common import NO_CONFIG, config
from .model import KindSpec, ModuleSpec, module

M = "Assert"

EQUALS = KindSpec(
    M, "Equals", NO_CONFIG, "invocable",
    input_schema={"type": "object", "properties": {"actual": {}, "expected": {}},
                  "required": ["actual", "expected"]},
)

EVENTS = KindSpec(
    M, "Events",
    config(
        {
            "filter": {"type": "array", "items": {"type": "object", "properties": {"type": {"type": "string"}},
                                                  "required": ["type"]}},
            "expect": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"event": {"type": "string"}, "payload": {},
                                   "times": {"type": "integer", "minimum": 0}},
                    "required": ["event"],
                    "additionalProperties": False,
                },
            },
        },
        ("expect",),
    ),
    "runnable",  # placed as a later target; captures every kernel event from boot
)

MANIFEST = KindSpec(
    M, "Manifest",
    config(
        {
            "source": {"type": "string", "minLength": 1},
            "expect": {
                "type": "object",
                "properties": {"errors": {"type": "array"}, "warnings": {"type": "array"}, "loadError": {},
                               "runs": {}},
                "additionalProperties": False,
            },
        },
        ("source",),
    ),
    "runnable",
)

ASSERT: ModuleSpec = module("assert", M, EQUALS, EVENTS, MANIFEST)
