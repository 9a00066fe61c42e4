"""Manifests: YAML → a validated resource graph with a ``file:line:col`` for every node (reference §1).

The public facade::

    manifest = load_manifest("orders.yaml")          # raises ManifestLoadError listing every problem
    diagnostics = check_manifest("orders.yaml")      # the same checks, returned (``telo check``)
    manifest.position("order", "/steps/0/retry")     # Pos(file, line, column) of any config node

The only package that imports YAML (ARCHITECTURE §2).
"""

from .diagnostics import (
    ERR_MANIFEST_VALIDATION_FAILED,
    Diagnostic,
    ManifestLoadError,
    Severity,
)
from .graph import BASE_NAMES, CelChecker, CelMode, CelScope
from .loader import check_manifest, load_manifest
from .model import Application, Import, LibraryModule, Manifest, ResourceDecl, Target, Variable
from .nodes import Cel, Pos, Ref, SqlText, Template, TextSpan, bound_statement, expressions_in
from .positions import PositionTable

__all__ = [
    "BASE_NAMES",
    "ERR_MANIFEST_VALIDATION_FAILED",
    "Application",
    "Cel",
    "CelChecker",
    "CelMode",
    "CelScope",
    "Diagnostic",
    "Import",
    "LibraryModule",
    "Manifest",
    "ManifestLoadError",
    "Pos",
    "PositionTable",
    "Ref",
    "ResourceDecl",
    "Severity",
    "SqlText",
    "Target",
    "Template",
    "TextSpan",
    "Variable",
    "bound_statement",
    "check_manifest",
    "expressions_in",
    "load_manifest",
]
