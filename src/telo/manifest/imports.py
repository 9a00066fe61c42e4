"""``imports:`` of a Telo.Application or Telo.Library (reference §1).

``{Alias: <ref>}``; the alias becomes the kind prefix (``Local.Workflow``) and the ``!ref Alias.name``
prefix. A ref resolves, in this order, to:

1. a built-in module named by its last segment — a bare name (``durable-local``), a relative path
   (``../../modules/durable-local``: upstream's own tests import modules so, and those directories hold
   Node controllers this runtime replaces) or ``oci://…/<name>@<version>``;
2. a ``Telo.Library`` directory (one with a ``telo.yaml``), or a library's YAML file, by path relative to
   the importing file — or a ``Telo.Application``'s file, which exports every kind and module-level resource
   it declares (a test manifest importing the application under test; the loader's ``_load_library``).

Anything else is ``ERR_MANIFEST_UNKNOWN_MODULE`` at the import's position.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from telo.specs import BUILTIN_MODULES, module_name_of

from .diagnostics import (
    ERR_MANIFEST_INVALID_NAME,
    ERR_MANIFEST_UNKNOWN_MODULE,
    ERR_MANIFEST_VALIDATION_FAILED,
    Diagnostic,
)
from .model import Import, LibraryModule
from .nodes import Pos
from .positions import PositionTable, join
from .reader import NAME

LIBRARY_FILE = "telo.yaml"
RESERVED_ALIASES = ("Telo", "Self")  # the always-present kind prefixes

LoadLibrary = Callable[[Path, Pos], LibraryModule | None]


def resolve_imports(
    raw: Any,
    table: PositionTable,
    directory: Path,
    load_library: LoadLibrary,
    diagnostics: list[Diagnostic],
) -> dict[str, Import]:
    """Resolve every import; problems are reported and the import is left out (so its kinds read as
    unknown only once: the loader does not report kinds of a failed alias again)."""
    out: dict[str, Import] = {}
    if raw is None:
        return out
    if not isinstance(raw, dict):
        diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED, "imports must be a mapping {Alias: module}",
                                      table.value("/imports")))
        return out
    for alias, ref in raw.items():
        pointer = join("/imports", alias)
        pos = table.value(pointer)
        if not NAME.fullmatch(alias) or alias in RESERVED_ALIASES:
            why = "is reserved" if alias in RESERVED_ALIASES else "is not a name (^[A-Za-z_][A-Za-z0-9_]*$)"
            diagnostics.append(Diagnostic(ERR_MANIFEST_INVALID_NAME, f"import alias {alias!r} {why}",
                                          table.key(pointer)))
            continue
        if not isinstance(ref, str) or not ref.strip():
            diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED,
                                          f"import {alias!r} must name a module (a string)", pos))
            continue
        found = resolve_one(ref, directory, pos, load_library)
        if isinstance(found, str):
            diagnostics.append(Diagnostic(ERR_MANIFEST_UNKNOWN_MODULE, f"import {alias}: {found}", pos,
                                          hint="built-in modules: " + ", ".join(sorted(BUILTIN_MODULES))))
        elif found is not None:
            out[alias] = found
    return out


def resolve_one(ref: str, directory: Path, pos: Pos, load_library: LoadLibrary) -> Import | str | None:
    """The module ``ref`` names; a message when it names nothing; ``None`` when a library was found but
    failed to load (its own diagnostics say why)."""
    builtin = BUILTIN_MODULES.get(module_name_of(ref))
    if builtin is not None:
        return builtin
    if is_path(ref):
        target = (directory / ref).resolve()
        library_file = target / LIBRARY_FILE if target.is_dir() else target
        if library_file.is_file():
            return load_library(library_file, pos)
        return f"{ref!r} is neither a built-in module nor a library directory (no {target / LIBRARY_FILE})"
    return f"{ref!r} names no built-in module"


def is_path(ref: str) -> bool:
    return not ref.startswith("oci://") and (ref.startswith((".", "/")) or "/" in ref or ref.endswith(".yaml"))
