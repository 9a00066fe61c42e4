"""Module ``console`` (library ``Console``): ``Console.WriteLine`` (reference §13)."""

from __future__ import annotations

from .common import NO_CONFIG
from .model import KindSpec, ModuleSpec, module

M = "Console"

WRITE_LINE = KindSpec(
    M, "WriteLine", NO_CONFIG, "invocable",
    # `{style text}` markup is rendered as ANSI on a TTY, stripped otherwise; returns the raw string.
    input_schema={"type": "object", "properties": {"output": {"type": "string"}}, "required": ["output"],
                  "additionalProperties": False},
    output_schema={"type": "string"},
)

CONSOLE: ModuleSpec = module("console", M, WRITE_LINE)
