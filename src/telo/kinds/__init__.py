"""Kinds: declarative specs of every built-in kind and the registry resolving imports to them.

The kinds' *behaviour* (controllers) lives with the engine and the durable backend; this package only says
what each kind's configuration looks like and how it is annotated (see :mod:`telo.kinds.registry`).
"""

from .registry import (
    CAPABILITIES,
    Capability,
    FieldSpec,
    KindSpec,
    ModuleSpec,
    conforms,
    module_name_of,
    resolve_import,
)
from .specs import BUILTIN_KINDS, BUILTIN_MODULES, TELO

__all__ = [
    "BUILTIN_KINDS",
    "BUILTIN_MODULES",
    "CAPABILITIES",
    "TELO",
    "Capability",
    "FieldSpec",
    "KindSpec",
    "ModuleSpec",
    "conforms",
    "module_name_of",
    "resolve_import",
]
