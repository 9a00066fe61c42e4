"""Declarations of kinds telo knows but does not implement yet (``KindSpec.unimplemented``: ``Postgres.Schema``,
``Postgres.Table`` …): a static check of ``telo check`` and every load, so that a manifest using one is refused
before anything runs — one error per declaration, naming what is missing, with the kind's hint.

The runtime refuses them too when it creates resources without the static checks
(:meth:`telo.runtime.app.Application.create`, ERR_KIND_NOT_IMPLEMENTED with the same text).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from telo.errors import Code

from .diagnostics import Diagnostic
from .model import LibraryModule, Manifest, ResourceDecl


def unimplemented_kinds(manifest: Manifest) -> list[Diagnostic]:
    """An ERR_KIND_NOT_IMPLEMENTED error at each declaration of an unimplemented kind: the manifest's own (inline
    and ``with:``-scoped ones included) and those of the libraries it imports."""
    return [
        Diagnostic(Code.KIND_NOT_IMPLEMENTED, f"{decl.alias_kind} {decl.name!r}: {decl.spec.not_implemented()}",
                   decl.pos, hint=decl.spec.unimplemented_hint or None)
        for decl in _declarations(manifest) if decl.spec.unimplemented
    ]


def _declarations(manifest: Manifest) -> Iterator[ResourceDecl]:
    seen: set[int] = set()
    yield from _with_scoped(manifest.resources.values(), seen)
    pending = list(manifest.application.imports.values())
    visited: set[str] = set()
    while pending:
        module = pending.pop()
        if not isinstance(module, LibraryModule) or module.module in visited:
            continue
        visited.add(module.module)
        yield from _with_scoped(module.resources.values(), seen)
        pending.extend(module.imports.values())


def _with_scoped(decls: Iterable[ResourceDecl], seen: set[int]) -> Iterator[ResourceDecl]:
    for decl in decls:
        if id(decl) in seen:
            continue
        seen.add(id(decl))
        yield decl
        yield from _with_scoped(decl.scoped.values(), seen)
