"""Turning a resource document (or an inline ``{kind: …}`` mapping) into a :class:`ResourceDecl`: kind
resolution through the import aliases, name grammar (reference §1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from telo.specs import KindSpec

from .diagnostics import (
    ERR_MANIFEST_INVALID_NAME,
    ERR_MANIFEST_UNKNOWN_ALIAS,
    ERR_MANIFEST_UNKNOWN_KIND,
    ERR_MANIFEST_VALIDATION_FAILED,
    Diagnostic,
)
from .model import Import, LibraryModule, ResourceDecl
from .nodes import Pos
from .positions import PositionTable, join
from .reader import NAME


class Declarer:
    """Resolves ``Alias.Kind`` names of one module and builds declarations."""

    def __init__(
        self,
        kinds: Mapping[str, KindSpec],
        imports: Mapping[str, Import],
        module: str,
        diagnostics: list[Diagnostic],
    ) -> None:
        self.kinds, self.imports, self.module, self.diagnostics = kinds, imports, module, diagnostics

    def kind(self, written: Any, pos: Pos) -> KindSpec | None:
        """The spec of ``Alias.Kind``; reports an unknown alias, kind or an abstract kind."""
        if not isinstance(written, str) or "." not in written:
            self._error(ERR_MANIFEST_UNKNOWN_KIND, f"kind {written!r} is not of the form Alias.Kind", pos)
            return None
        spec = self.kinds.get(written)
        alias, _, name = written.partition(".")
        if spec is None:
            module = self.imports.get(alias)
            if module is not None:
                if isinstance(module, LibraryModule) and name in module.all_kinds:
                    why = f"library {module.canonical} does not export kind {name!r} (exports.kinds)"
                else:
                    why = f"module {alias} ({_module_name(module)}) has no kind {name!r}"
                known = ", ".join(sorted(module.kinds)) or "none"
                self._error(ERR_MANIFEST_UNKNOWN_KIND, f"unknown kind {written!r}: {why}", pos,
                            hint=f"its kinds: {known}")
            elif alias in ("Telo", "Self"):
                own = sorted(k for k in self.kinds if k.startswith(alias + "."))
                self._error(ERR_MANIFEST_UNKNOWN_KIND, f"unknown kind {written!r}", pos,
                            hint=f"known: {', '.join(own) or 'none'}")
            else:
                aliases = ", ".join(sorted(self.imports)) or "none"
                self._error(ERR_MANIFEST_UNKNOWN_ALIAS, f"kind {written!r}: no import is aliased {alias!r}", pos,
                            hint=f"add it to the application's imports (imported aliases: {aliases})")
            return None
        if spec.abstract:
            self._error(ERR_MANIFEST_UNKNOWN_KIND, f"kind {written!r} ({spec.canonical}) is abstract: declare a kind "
                        "that extends it", pos)
            return None
        return spec

    def declare(
        self,
        doc: Any,
        table: PositionTable,
        base: str,
        *,
        name: str | None = None,
        owner: str | None = None,
        pointer: str | None = None,
    ) -> ResourceDecl | None:
        """A declaration from ``doc`` found at ``base`` in ``table``'s document. ``name`` is the generated
        name of an inline resource (its own ``metadata.name`` wins, spec §5.3); without one, the document
        must carry ``metadata.name``."""
        pos = table.value(base)
        if not isinstance(doc, dict):
            self._error(ERR_MANIFEST_VALIDATION_FAILED, "a resource is a mapping with `kind` and `metadata`", pos)
            return None
        if "kind" not in doc:
            self._error(ERR_MANIFEST_VALIDATION_FAILED, "a resource needs a `kind`", pos)
            return None
        spec = self.kind(doc["kind"], table.value(join(base, "kind")))
        metadata = doc.get("metadata")
        declared = metadata.get("name") if isinstance(metadata, dict) else None
        if metadata is not None and not isinstance(metadata, dict):
            self._error(ERR_MANIFEST_VALIDATION_FAILED, "`metadata` must be a mapping",
                        table.value(join(base, "metadata")))
        if declared is None and name is None:
            self._error(ERR_MANIFEST_VALIDATION_FAILED, "a resource needs `metadata: {name: …}`", pos)
            return None
        if declared is not None and not (isinstance(declared, str) and NAME.fullmatch(declared)):
            self._error(ERR_MANIFEST_INVALID_NAME,
                        f"resource name {declared!r} is not a name: ^[A-Za-z_][A-Za-z0-9_]*$ (a hyphen reads as "
                        "subtraction in CEL)", table.value(join(base, "metadata", "name")))
            return None
        if spec is None:
            return None
        config = {k: v for k, v in doc.items() if k not in ("kind", "metadata")}
        return ResourceDecl(
            name=declared if isinstance(declared, str) else str(name),
            alias_kind=str(doc["kind"]),
            kind=spec.canonical,
            spec=spec,
            config=config,
            metadata=dict(metadata) if isinstance(metadata, dict) else {},
            pos=pos,
            module=self.module,
            positions=table,
            base=base,
            owner=owner,
            pointer=pointer,
        )

    def _error(self, code: str, message: str, pos: Pos, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(code, message, pos, hint=hint))


def _module_name(module: Import) -> str:
    return module.canonical
