"""Module ``timer`` (library ``Timer``): ``Timer.Delay`` (reference §13)."""

from __future__ import annotations

from .common import NO_CONFIG
from .model import KindSpec, ModuleSpec, module

M = "Timer"

DELAY = KindSpec(
    M, "Delay", NO_CONFIG, "invocable",
    # A bad duration is ERR_INVALID_INPUT at call time; returns {value: <input value> ?? null}.
    input_schema={"type": "object",
                  "properties": {"duration": {"type": "string", "pattern": r"^[0-9]+(ms|s|m|h)$",
                                              "description": "How long to wait: a whole number and a unit (ms, "
                                                             "s, m, h)."},
                                 "value": {"description": "Returned as `{value}` once the wait is over."}},
                  "required": ["duration"]},
    output_schema={"type": "object", "properties": {"value": {}}, "required": ["value"]},
    description="Waits in process (not durably: a crash forgets it; use `Durable.Sleep` in a durable run), then "
                "returns `{value}` (null without one).",
    example="""\
kind: Timer.Delay
metadata: { name: pause }
""",
)

TIMER: ModuleSpec = module("timer", M, DELAY)
