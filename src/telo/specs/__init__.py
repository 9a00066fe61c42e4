"""Kind specs: what every built-in kind's configuration looks like, as declarative data (reference §1, §3).

The lowest layer that knows about kinds: the manifest loader, the static checks and the kinds' behaviour
(:mod:`telo.kinds`) all read it; it imports nothing of theirs. :mod:`.model` is the data model (``KindSpec``,
``FieldSpec``, ``ModuleSpec``), one module per built-in module holds its kinds' schemas, :mod:`.tables` gathers
them, :mod:`.registry` resolves an import reference to a module.
"""

from .model import CAPABILITIES, Capability, FieldSpec, KindSpec, ModuleSpec, conforms
from .registry import module_name_of, register_module, resolve_import, user_modules
from .tables import BUILTIN_KINDS, BUILTIN_MODULES, TELO

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
    "register_module",
    "resolve_import",
    "user_modules",
]
