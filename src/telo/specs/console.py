"""Module ``console`` (library ``Console``): ``Console.WriteLine`` (reference §13)."""

from __future__ import annotations

from .common import NO_CONFIG
from .model import KindSpec, ModuleSpec, module

M = "Console"

WRITE_LINE = KindSpec(
    M, "WriteLine", NO_CONFIG, "invocable",
    # `{style text}` markup is rendered as ANSI on a TTY, stripped otherwise; returns the raw string.
    input_schema={"type": "object",
                  "properties": {"output": {"type": "string",
                                            "description": "The line; `{green text}` markup is rendered as ANSI on "
                                                           "a terminal and stripped otherwise."}},
                  "required": ["output"], "additionalProperties": False},
    output_schema={"type": "string"},
    description="Writes its input `output` as one line on standard output; returns the raw string. Emits "
                "`<name>.LineWritten`.",
    example="""\
kind: Console.WriteLine
metadata: { name: say }
""",
)

CONSOLE: ModuleSpec = module("console", M, WRITE_LINE)
