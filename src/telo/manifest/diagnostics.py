"""Diagnostics: what a manifest load found wrong, each with its ``file:line:col`` (reference §1, §12).

Loading never stops at the first problem: every stage appends to one list and, if any error is in it,
:class:`ManifestLoadError` reports them all together (reference §1: "All such errors are collected and
reported together"), sorted by position so the output reads like a compiler's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from telo import errors
from telo.errors import Code, ManifestError

from .nodes import Pos

Severity = Literal["error", "warning"]

# --- codes -----------------------------------------------------------------------------------------------
# The aggregate code of a failed load (reference §1); also used for any schema or variable violation.
ERR_MANIFEST_VALIDATION_FAILED = Code.MANIFEST_VALIDATION_FAILED
ERR_MANIFEST_YAML = Code.MANIFEST_YAML  # YAML syntax, an unknown tag, a duplicate key
ERR_MANIFEST_NOT_FOUND = Code.MANIFEST_NOT_FOUND  # the file (or an imported library) cannot be read
ERR_MANIFEST_INVALID_NAME = Code.MANIFEST_INVALID_NAME  # a resource name or import alias off the grammar
ERR_MANIFEST_DUPLICATE_RESOURCE = Code.MANIFEST_DUPLICATE_RESOURCE
ERR_MANIFEST_UNKNOWN_ALIAS = Code.MANIFEST_UNKNOWN_ALIAS  # `X.Kind` or `!ref X.name` with X not imported
ERR_MANIFEST_UNKNOWN_KIND = Code.MANIFEST_UNKNOWN_KIND  # the alias is imported but has no such kind
ERR_MANIFEST_UNKNOWN_MODULE = Code.MANIFEST_UNKNOWN_MODULE  # an import names no built-in module or library
ERR_MANIFEST_UNKNOWN_RESOURCE = Code.MANIFEST_UNKNOWN_RESOURCE  # `!ref missing`
ERR_MANIFEST_BARE_REFERENCE = Code.MANIFEST_BARE_REFERENCE  # a plain string in a reference slot
ERR_MANIFEST_REFERENCE_KIND = Code.MANIFEST_REFERENCE_KIND  # `!ref x` where x's kind does not fit the slot
ERR_MANIFEST_REFERENCE_CYCLE = Code.MANIFEST_REFERENCE_CYCLE  # a → b → a, invoked on every call (.cycles)
ERR_MANIFEST_INVALID_STEP = Code.MANIFEST_INVALID_STEP  # not exactly one step kind key
ERR_MANIFEST_INCLUDE = Code.MANIFEST_INCLUDE  # `!include-bytes` of an unreadable file
ERR_MANIFEST_CEL = Code.MANIFEST_CEL  # reported by the CEL checker hook
ERR_STEP_NAME_REQUIRED = Code.STEP_NAME_REQUIRED  # reference §3 / §11
ERR_INVALID_STEP_NAME = Code.INVALID_STEP_NAME  # spec §5.1 (same code as telo.paths)
# Siblings with one name share one journal path: in a durable body the second would replay the first's
# receipt, its effect never executing — an error there; elsewhere (a Run.Sequence target) upstream lets the later
# result overwrite the earlier, so a warning, and the interpreter refuses such a list inside a durable run.
ERR_DUPLICATE_STEP_NAME = errors.ERR_DUPLICATE_STEP_NAME
WARN_DUPLICATE_STEP_NAME = "DUPLICATE_STEP_NAME"
# A step named with a word CEL reserves (`loop`, `if` …): readable here, refused by strict CEL implementations.
WARN_RESERVED_STEP_NAME = "RESERVED_STEP_NAME"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding. ``pos`` is ``None`` only when no file position exists (an unreadable file)."""

    code: str
    message: str
    pos: Pos | None
    severity: Severity = "error"
    hint: str | None = None

    def __post_init__(self) -> None:
        # A Code member becomes the exact str: diagnostics travel in ManifestLoadError.data, plain data
        object.__setattr__(self, "code", str(self.code))

    def __str__(self) -> str:
        where = f"{self.pos}: " if self.pos else ""
        tag = "" if self.severity == "error" else f"{self.severity}: "
        hint = f" (hint: {self.hint})" if self.hint else ""
        return f"{where}{tag}{self.code} {self.message}{hint}"

    def to_dict(self) -> dict[str, object]:
        """The JSON form ``telo check --json`` prints."""
        out: dict[str, object] = {"code": self.code, "message": self.message, "severity": self.severity}
        if self.pos is not None:
            out.update(file=self.pos.file, line=self.pos.line, column=self.pos.column)
        if self.hint:
            out["hint"] = self.hint
        return out


def sort_key(d: Diagnostic) -> tuple[bool, str, int, int, str]:
    """By position, a YAML error first: what follows it may be its cascade (loader._drop_cascade)."""
    first = d.code != ERR_MANIFEST_YAML
    return (first, d.pos.file, d.pos.line, d.pos.column, d.code) if d.pos else (first, "", 0, 0, d.code)


def errors_of(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diagnostics if d.severity == "error"]


class ManifestLoadError(ManifestError):
    """A manifest failed to load; ``diagnostics`` holds every finding (errors and warnings).

    The code is ``ERR_MANIFEST_VALIDATION_FAILED``; each diagnostic keeps its more specific code. The
    message lists every error as ``file:line:col: CODE message``, one per line.
    """

    default_code = Code.MANIFEST_VALIDATION_FAILED

    def __init__(self, source: str, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics: list[Diagnostic] = sorted(diagnostics, key=sort_key)
        errors = errors_of(self.diagnostics)
        lines = "\n".join(f"  {d}" for d in errors)
        first = errors[0].pos if errors else None
        data: dict[str, object] = {"diagnostics": [d.to_dict() for d in self.diagnostics]}
        if first is not None:
            data.update(file=first.file, line=first.line, column=first.column)
        super().__init__(
            f"manifest {source} has {len(errors)} error{'s' if len(errors) != 1 else ''}:\n{lines}",
            data=data,
        )
