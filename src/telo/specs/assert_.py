"""Module ``assert`` (library ``Assert``): the test assertions (reference §14)."""

from __future__ import annotations

from .common import NO_CONFIG, config
from .model import KindSpec, ModuleSpec, module

M = "Assert"

EQUALS = KindSpec(
    M, "Equals", NO_CONFIG, "invocable",
    input_schema={"type": "object",
                  "properties": {"actual": {"description": "The value under test."},
                                 "expected": {"description": "What it must equal (CEL equality: 1 == 1.0)."}},
                  "required": ["actual", "expected"]},
    description="Fails the test unless its inputs' `actual` equals `expected`.",
    example="""\
kind: Assert.Equals
metadata: { name: eq }
""",
)

EVENTS = KindSpec(
    M, "Events",
    config(
        {
            "filter": {"type": "array", "items": {"type": "object", "properties": {"type": {"type": "string"}},
                                                  "required": ["type"]},
                       "description": "`[{type: pattern}]`: capture only events whose name matches one of these "
                                      "(default: all)."},
            "expect": {
                "type": "array",
                "description": "`[{event, payload?, times?}]`: `event` is a name pattern (`<resource>.<Event>`, "
                               "`*` matches one segment); `payload` must be a subset of the event's payload. With "
                               "`times`, exactly that many events match; without, the entries must be seen in "
                               "this order.",
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
    description="Checks the kernel events seen since boot (the list: \"Events\" below). Place it as a target "
                "after the one it observes.",
    example="""\
kind: Assert.Events
metadata: { name: events }
expect:
  - { event: chargeCard.Invoked, times: 1 }
  - { event: order.RunCompleted }
""",
)

MANIFEST = KindSpec(
    M, "Manifest",
    config(
        {
            "source": {"type": "string", "minLength": 1,
                       "description": "The manifest to load, relative to this one."},
            "expect": {
                "type": "object",
                "description": "`{errors?, warnings?, loadError?, runs?}`: the diagnostics (by code) the load must "
                               "report, a load error it must fail with, or runs it must complete.",
                "properties": {"errors": {"type": "array"}, "warnings": {"type": "array"}, "loadError": {},
                               "runs": {}},
                "additionalProperties": False,
            },
        },
        ("source",),
    ),
    "runnable",
    description="Loads another manifest and checks what its load reports: the diagnostics `telo check` would "
                "print.",
    example="""\
kind: Assert.Manifest
metadata: { name: refusesTypo }
source: fixtures/typo.yaml
expect: { errors: [ERR_MANIFEST_VALIDATION_FAILED] }
""",
)

ASSERT: ModuleSpec = module("assert", M, EQUALS, EVENTS, MANIFEST)
