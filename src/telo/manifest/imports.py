"""``imports:`` of a Telo.Application or Telo.Library (reference §1).

``{Alias: <ref>}``; the alias becomes the kind prefix (``Local.Workflow``) and the ``!ref Alias.name``
prefix. A ref resolves, in this order, to:

1. a built-in module named by its last segment — a bare name (``durable-local``), a relative path
   (``../../modules/durable-local``: upstream's own tests import modules so, and those directories hold
   Node controllers this runtime replaces) or ``oci://…/<name>@<version>``; a relative path whose resolved
   directory has a built-in module's name (``../`` from ``modules/durable-local/tests``), or holds a library
   written for another runtime (its kinds name ``controllers``) whose ``metadata.name`` is a built-in
   module's (``DurableLocal``), names that module too — the library there is never loaded. A library of the
   user's own (no ``controllers``) is theirs, whatever it is named;
2. a ``Telo.Library`` directory (one with a ``telo.yaml``), or a library's YAML file, by path relative to
   the importing file — or a ``Telo.Application``'s file, which exports every kind and module-level resource
   it declares (a test manifest importing the application under test; the loader's ``_load_library``).

Anything else — a library whose kinds name controllers of another runtime included — is
``ERR_MANIFEST_UNKNOWN_MODULE`` at the import's position.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telo.specs import BUILTIN_MODULES, ModuleSpec, module_name_of

from .diagnostics import (
    ERR_MANIFEST_INVALID_NAME,
    ERR_MANIFEST_UNKNOWN_MODULE,
    ERR_MANIFEST_VALIDATION_FAILED,
    Diagnostic,
)
from .model import Import, LibraryModule
from .nodes import Pos
from .positions import PositionTable, join
from .reader import NAME, read_documents

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
                                          hint="import one of telo's built-in modules ("
                                               + ", ".join(sorted(BUILTIN_MODULES)) + "), a Telo.Library of your "
                                               "own, or implement the kinds in Python with @telo.kind "
                                               "(docs/python-api.md)"))
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
        target = Path(os.path.abspath(directory / ref))  # normalised, its symlinks kept (Node's path.resolve)
        # upstream's own tests import their module as `../` (from modules/durable-local/tests): the resolved
        # directory's name, or the name of the library there, is the module's
        by_directory = BUILTIN_MODULES.get(target.name) if target.is_dir() else None
        library_file = target / LIBRARY_FILE if target.is_dir() else target
        if not library_file.is_file():
            if by_directory is not None:
                return by_directory
            return f"{ref!r} is neither a built-in module nor a library directory (no {target / LIBRARY_FILE})"
        header = peek_library(library_file)
        if not header.controllers:
            return load_library(library_file, pos)  # a library of the user's own, whatever its name
        builtin = builtin_named(header.name) or by_directory
        if builtin is not None:
            return builtin  # upstream's copy of a module telo ships: its Node controllers are not read
        return (f"{ref!r} is the library {header.name or library_file.name!r}, written for another runtime "
                f"(its kinds name the controllers {', '.join(header.controllers[:2])}), and telo has no "
                "implementation of it")
    return f"{ref!r} names no built-in module"


def _comparable(name: str) -> str:
    return name.replace("-", "").replace("_", "").lower()


def builtin_named(name: str | None) -> ModuleSpec | None:
    """The built-in module a library's ``metadata.name`` names, by canonical or import name, spelt either way
    (``DurableLocal``, ``durable-local``)."""
    if not name:
        return None
    wanted = _comparable(name)
    for module in BUILTIN_MODULES.values():
        if wanted in (_comparable(module.canonical), _comparable(module.import_name)):
            return module
    return None


@dataclass(frozen=True, slots=True)
class LibraryHeader:
    """What an import needs to know of a library before loading it: its name, and the controllers its kinds
    name (upstream's libraries name Node packages, ``pkg:npm/...``; telo's kinds are Python, ``@telo.kind``)."""

    name: str | None
    controllers: tuple[str, ...]


def peek_library(library_file: Path) -> LibraryHeader:
    """The header of ``library_file``, read leniently: a file that does not parse reads as a nameless library
    without controllers, and its loading reports the problem."""
    found: list[Diagnostic] = []
    try:
        documents = read_documents(library_file.read_text(encoding="utf-8"), str(library_file),
                                   library_file.parent, found)
    except (OSError, UnicodeDecodeError):
        return LibraryHeader(None, ())
    values = [d.value for d in documents if isinstance(d.value, dict)]
    metadata = values[0].get("metadata") if values else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    controllers: list[str] = []
    for value in values[1:]:
        named = value.get("controllers") if value.get("kind") == "Telo.Definition" else None
        for controller in named if isinstance(named, list) else ([named] if named else []):
            controllers.append(controller if isinstance(controller, str) else json.dumps(controller, default=str))
    return LibraryHeader(name if isinstance(name, str) else None, tuple(controllers))


def is_path(ref: str) -> bool:
    return not ref.startswith("oci://") and (ref.startswith((".", "/")) or "/" in ref or ref.endswith(".yaml"))
