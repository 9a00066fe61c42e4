"""``telo check``'s rule for a statement's ``transaction:`` requirement (upstream facts, "sql").

A ``Sql.Query``/``Sql.Command``/``Sql.Exec``/``Sql.Selection`` that declares ``transaction:`` must run inside a
``Sql.Transaction`` on its own connection; at run time it fails with ERR_ZONE_REQUIRED otherwise
(:mod:`telo.kinds.sql_statements`). This finds the paths the manifest itself shows: from every entry — a
durable workflow, or a resource no other resource reaches (the targets') — through every reference a resource's
configuration holds, carrying the connections whose ``Sql.Transaction`` bodies enclose the walk. A statement
reached with its connection outside that set is reported once, with the path, at the deepest reference on it
written in a resource that is never reached inside such a transaction — the step that needs one around it
(the statement's own caller may well be reached inside one elsewhere).

What it cannot see (a resource started by name from Python or the CLI, a reference computed at run time) is
left to the run-time check.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from telo.errors import Code
from telo.manifest import Diagnostic, Manifest, Ref, ResourceDecl
from telo.manifest.model import libraries
from telo.specs import conforms

STATEMENTS = frozenset({"Sql.Query", "Sql.Command", "Sql.Exec", "Sql.Selection"})
TRANSACTION = "Sql.Transaction"
_Refs = tuple[tuple[Ref, int | None], ...]  # the references of a path, each with id() of the resource it is in
# Slots that name a resource without invoking it: no path runs through them.
_NOT_INVOKED = frozenset({"connection", "transaction", "journal", "queue", "inputType", "outputType"})


def transaction_requirement_checks(manifest: Manifest) -> list[Diagnostic]:
    decls = [*manifest.resources.values(),
             *(d for library in libraries(manifest.application.imports) for d in library.resources.values())]
    if not any(d.kind in STATEMENTS and d.config.get("transaction") is not None for d in decls):
        return []
    walk = _Walk(manifest)
    for target in manifest.application.targets:  # run at boot outside every transaction, whoever else reaches them
        ref = target.ref if target.ref is not None else (target.step or {}).get("invoke")
        if not isinstance(ref, Ref):
            continue
        started = walk.resolve(ref, None)
        if started is not None:
            walk.visit(started, frozenset(), ("targets", f"{started.alias_kind} {started.name!r}"), ((ref, None),))
    reached = {id(target) for d in decls for _, target, _ in walk.edges(d)}
    for decl in decls:
        entry = conforms(decl.spec, "Durable.Run", manifest.canonical_kinds) or id(decl) not in reached
        if entry and decl.kind not in STATEMENTS:
            walk.visit(decl, frozenset(), (f"{decl.alias_kind} {decl.name!r}",), ())
    return walk.findings()


class _Walk:
    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.seen: set[tuple[int, frozenset[int]]] = set()
        self.opened: dict[int, set[int]] = {}  # resource → the connections with a transaction open when reached
        self.pending: dict[int, tuple[ResourceDecl, ResourceDecl, tuple[str, ...], _Refs]] = {}

    def resolve(self, ref: Ref, decl: ResourceDecl | None) -> ResourceDecl | None:
        return self.manifest.resolve_in(ref, decl)

    def connection(self, decl: ResourceDecl) -> ResourceDecl | None:
        ref = decl.config.get("connection")
        return self.resolve(ref, decl) if isinstance(ref, Ref) else None

    def edges(self, decl: ResourceDecl) -> Iterator[tuple[Ref, ResourceDecl, bool]]:
        """``(reference, what it names, inside the body of this transaction)`` for every invoking reference."""
        for key, value in decl.config.items():
            if key in _NOT_INVOKED:
                continue
            body = decl.kind == TRANSACTION and key == "steps"
            for ref in _refs(value):
                target = self.resolve(ref, decl)
                if target is not None:
                    yield ref, target, body

    def visit(self, decl: ResourceDecl, open_on: frozenset[int], path: tuple[str, ...], refs: _Refs) -> None:
        """Walk from ``decl``, reached with transactions open on ``open_on`` by the references ``refs`` (each with
        the resource it is written in: None for the application's header), told as ``path``."""
        key = (id(decl), open_on)
        if key in self.seen:
            return
        self.seen.add(key)
        self.opened.setdefault(id(decl), set()).update(open_on)
        if decl.kind in STATEMENTS and decl.config.get("transaction") is not None:
            connection = self.connection(decl)
            if connection is not None and id(connection) not in open_on and id(decl) not in self.pending:
                self.pending[id(decl)] = (decl, connection, path, refs)
        inside = open_on
        if decl.kind == TRANSACTION:
            connection = self.connection(decl)
            inside = open_on | {id(connection)} if connection is not None else open_on
        for ref, target, body in self.edges(decl):
            step = f"{target.alias_kind} {target.name!r}"
            self.visit(target, inside if body else open_on, (*path, step), (*refs, (ref, id(decl))))

    def findings(self) -> list[Diagnostic]:
        """One per statement reached outside its transaction: at the deepest reference on its path written in a
        resource never reached inside such a transaction — the step that needs one around it (the statement's
        own caller may be reached inside one elsewhere) — or at the entry's."""
        out: list[Diagnostic] = []
        for decl, connection, path, refs in self.pending.values():
            where = next((ref.pos for ref, source in reversed(refs)
                          if source is None or id(connection) not in self.opened.get(source, ())), decl.pos)
            out.append(Diagnostic(
                Code.ZONE_REQUIRED.value,
                f"{decl.alias_kind} {decl.name!r} requires a Sql.Transaction on connection {connection.name!r} "
                f"(`transaction:`), but it is reached outside one: {' → '.join(path)}", where, "error",
                hint=f"invoke it from the body of a Sql.Transaction on {connection.name!r}, or drop `transaction:`"))
        return out


def _refs(value: Any) -> Iterator[Ref]:
    if isinstance(value, Ref):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)
