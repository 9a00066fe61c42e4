"""Resolving an import reference to a module spec, and registering modules defined in Python (reference §1).

The tables searched are :data:`telo.specs.tables.BUILTIN_MODULES` and ``BUILTIN_KINDS``; a module registered
from Python (``@telo.kind``) joins them in place.
"""

from __future__ import annotations

import re
from typing import cast

from telo.errors import Code, ManifestError

from .model import KindSpec, ModuleSpec
from .tables import BUILTIN_KINDS, BUILTIN_MODULES

ERR_MANIFEST_UNKNOWN_MODULE = Code.MANIFEST_UNKNOWN_MODULE

# --- resolving an import reference -----------------------------------------------------------------------
_OCI = re.compile(r"oci://(?P<path>[^@\s]+?)(?:@(?P<version>[^/\s]+))?")


def module_name_of(ref: str) -> str:
    """The module name an import reference ends in: a bare name, a path's last segment, or the last
    repository segment of ``oci://host/org/<name>@<version>``."""
    text = ref.strip()
    oci = _OCI.fullmatch(text)
    if oci:
        return oci.group("path").rstrip("/").rsplit("/", 1)[-1]
    return text.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]


def resolve_import(ref: str) -> ModuleSpec:
    """The built-in module an import reference names (reference §1):

    * a bare name — ``durable-local``;
    * a relative path whose last segment names a built-in module — ``../../modules/durable-local`` (how
      upstream's own tests import them; the directory need not exist here);
    * ``oci://…/<name>@<version>``.

    Raises :class:`~telo.errors.ManifestError` (``ERR_MANIFEST_UNKNOWN_MODULE``) for anything else;
    ``Telo.Library`` directories are resolved by the manifest loader, not here.
    """
    name = module_name_of(ref)
    found = BUILTIN_MODULES.get(name)
    if found is None:
        known = ", ".join(sorted(BUILTIN_MODULES))
        raise ManifestError(
            ERR_MANIFEST_UNKNOWN_MODULE,
            f"import {ref!r} names no built-in module ({name!r} is not one of: {known})",
            hint="import a built-in module by name, or a Telo.Library directory (containing telo.yaml) by "
            "a relative path",
            data={"ref": ref, "module": name},
        )
    return found


# --- user modules ------------------------------------------------------------------------------------------
_USER_MODULES: set[str] = set()  # import names registered by register_module (they may be replaced)


def user_modules() -> frozenset[str]:
    """Import names of the modules registered from Python (``@telo.kind``), as opposed to telo's own."""
    return frozenset(_USER_MODULES)


def register_module(spec: ModuleSpec) -> None:
    """Make a module defined in Python (``@telo.kind``) importable by manifests like a built-in one.

    It joins the tables the manifest loader reads (:data:`BUILTIN_MODULES` by import name,
    :data:`BUILTIN_KINDS` by canonical name), so it must be registered before a manifest importing it is
    loaded. Registering a user module again replaces it (a re-imported Python module re-registers its kinds);
    taking a built-in module's import or canonical name (``run``, ``Run``, ``Telo`` …) is refused.
    """
    modules = cast(dict[str, ModuleSpec], BUILTIN_MODULES)  # the shared tables: mutated in place on purpose
    kinds = cast(dict[str, KindSpec], BUILTIN_KINDS)
    builtin = {m.import_name: m for m in modules.values() if m.import_name not in _USER_MODULES}
    taken = {*builtin, *(m.canonical for m in builtin.values()), "Telo", "Self"}
    if spec.import_name in taken or spec.canonical in taken:
        raise ValueError(f"module {spec.import_name!r} ({spec.canonical}) would shadow a built-in module")
    previous = modules.get(spec.import_name)
    if previous is not None:
        for old in previous.kinds.values():
            kinds.pop(old.canonical, None)
    modules[spec.import_name] = spec
    kinds.update({k.canonical: k for k in spec.kinds.values()})
    _USER_MODULES.add(spec.import_name)
