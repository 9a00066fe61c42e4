"""Adding resource documents built in Python (:mod:`telo.builder`) to a loaded manifest.

A document goes through the same stages as one read from YAML — kind resolution, schema validation, the
reference graph (inline resources declared and named per spec §5.3, references checked), the CEL checks — so
the resources it yields are indistinguishable from loaded ones: same configuration data, same digest, same
journal. Only the positions differ: a builder node carries the ``file:line`` of the Python call that made it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from telo.errors import Code, TeloError
from telo.manifest import Manifest, ManifestLoadError, Pos, PositionTable, ResourceDecl, load_manifest
from telo.manifest.declare import Declarer
from telo.manifest.diagnostics import ERR_MANIFEST_DUPLICATE_RESOURCE, Diagnostic, errors_of
from telo.manifest.graph import Graph
from telo.manifest.positions import join
from telo.manifest.validate import validate

INLINE_SOURCE = "inline-manifest.yaml"  # the source name (in the cwd) of a manifest given as YAML text
POSITION = "__telo_pos__"  # the key-free attribute a builder document keeps its Python position in


EMPTY_APPLICATION = """\
kind: Telo.Application
metadata: { name: App }
imports: { Local: durable-local, Durable: durable, Run: run, Journal: durable-journal-sqlite }
---
kind: Journal.Journal
metadata: { name: journal }
path: ./journal.db
"""  # telo.load(None, journal=…): its one journal resource is there for builder workflows; journal= replaces it


def load_source(source: str | Path | None, env: Mapping[str, str] | None) -> Manifest:
    """A manifest file, or YAML text (a string containing a newline or ``kind:``; relative paths in it resolve
    against the current directory), or None: an application with no YAML of its own, whose workflows are all
    built in Python — :data:`EMPTY_APPLICATION`, one journal resource for them to use."""
    from telo.analysis import cel_checker

    text: str | None = None
    if source is None:
        source = EMPTY_APPLICATION
    if isinstance(source, str) and ("\n" in source or "kind:" in source):
        text, path = source, Path.cwd() / INLINE_SOURCE
    else:
        path = Path(source)
    return load_manifest(path, text=text, env=env, cel_checker=cel_checker)


def add_documents(manifest: Manifest, documents: Sequence[Mapping[str, Any]], *, where: Pos) -> list[ResourceDecl]:
    """Declare, validate and walk ``documents`` in ``manifest``; add them (and the inline resources they
    declare) to ``manifest.resources``. Raises :class:`ManifestLoadError` listing every problem, adding
    nothing. A kind may be written with an alias imported by the manifest or by its canonical name."""
    from telo.analysis import cel_checker

    diagnostics: list[Diagnostic] = []
    kinds = {**{k: v for k, v in manifest.canonical_kinds.items()}, **manifest.kinds}
    imports = manifest.application.imports
    declarer = Declarer(kinds, imports, manifest.module, diagnostics)
    resources = dict(manifest.resources)
    added: list[ResourceDecl] = []
    for doc in documents:
        pos = getattr(doc, POSITION, None) or where
        table = PositionTable(pos.file)
        table.add("", pos)
        # Deep-copied: the graph replaces inline resources in place, and a builder document may be reused.
        decl = declarer.declare(copy.deepcopy(dict(doc)), table, "")
        if decl is None:
            continue
        first = resources.get(decl.name)
        if first is not None:
            diagnostics.append(Diagnostic(ERR_MANIFEST_DUPLICATE_RESOURCE,
                                          f"resource {decl.name!r} is already declared (as {first.alias_kind} at "
                                          f"{first.pos})", pos))
            continue
        resources[decl.name] = decl
        added.append(decl)

    def check(decl: ResourceDecl) -> None:
        validate(decl.config, decl.spec.schema, decl.positions, decl.base, f"{decl.alias_kind} {decl.name!r}",
                 diagnostics)

    def declare(doc: dict[str, Any], owner: ResourceDecl, at: tuple[str | int, ...], name: str | None
                ) -> ResourceDecl | None:
        return declarer.declare(doc, owner.positions, join(owner.base, *at), name=name, owner=owner.name,
                                pointer=join("", *at))

    graph = Graph(resources, imports, kinds, declare, check, diagnostics, cel_checker)
    for decl in added:
        check(decl)
        graph.walk_resource(decl)
    if errors_of(diagnostics):
        raise ManifestLoadError(where.file, diagnostics)
    new = [r for name, r in resources.items() if name not in manifest.resources]
    manifest.resources.update({r.name: r for r in new})
    manifest.diagnostics.extend(diagnostics)
    return new


def with_journal(manifest: Manifest, doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """``doc`` with ``journal`` set to the manifest's only journal, when it is a durable workflow without one
    (``ERR_JOURNAL_AMBIGUOUS`` when the manifest declares none or several)."""
    if "journal" in doc or not isinstance(doc.get("kind"), str):
        return doc
    try:
        spec = manifest.kind(doc["kind"])
    except KeyError:
        return doc  # reported by the loader's own checks
    if spec.canonical != "DurableLocal.Workflow":
        return doc
    from telo.builder import Document
    from telo.manifest import Ref
    from telo.specs import conforms

    journals = [d for d in manifest.resources.values()
                if conforms(d.spec, "DurableLocal.Journal", manifest.canonical_kinds)]
    if len(journals) != 1:
        raise TeloError(Code.JOURNAL_AMBIGUOUS, f"workflow {doc.get('metadata')}: the manifest declares "
                        f"{len(journals)} journals", hint="name one with journal=")
    out = Document({**doc, "journal": Ref(journals[0].name, None, journals[0].pos)})
    setattr(out, POSITION, getattr(doc, POSITION, None))
    return out
