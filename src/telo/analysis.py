"""Static checks over a manifest: what ``telo check`` reports and what every load runs first (reference §12).

The manifest loader validates structure; this module adds the CEL adapter's compile and type errors at each
expression's own ``file:line:col``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from telo.cel import CelCompileError, CelEnvironment
from telo.manifest import Cel, CelScope, Diagnostic, check_manifest


@cache
def _environment(names: tuple[str, ...]) -> CelEnvironment:
    from telo.cel import STANDARD_VARIABLES

    extra = {n: "dyn" for n in names if n not in STANDARD_VARIABLES}
    return CelEnvironment(extra or None)


def cel_checker(cel: Cel, scope: CelScope) -> Diagnostic | None:
    """Compile one expression for the scope it runs in; a failure becomes a diagnostic at its position."""
    try:
        _environment(tuple(sorted(scope.names))).compile(cel.text, source=cel.pos.file, line=cel.pos.line,
                                                          column=cel.pos.column)
    except CelCompileError as exc:
        at = None
        errors = exc.data.get("errors") or []
        if errors and isinstance(errors[0], dict) and errors[0].get("at"):
            line, column = errors[0]["at"]
            at = cel.locate(int(line), int(column))
        return Diagnostic(exc.code, exc.message, at or cel.pos, "error", exc.hint)
    return None


def check(manifest: str | Path) -> list[Diagnostic]:
    """Every diagnostic of a manifest, sorted by position (errors and warnings)."""
    return check_manifest(manifest, cel_checker=cel_checker)
