"""``load_manifest``: YAML file → validated :class:`Manifest`, or every problem at once (reference §1).

Stages, each appending to one diagnostics list (nothing is run on error):

1. read the YAML documents (:mod:`.reader`); the first is the ``Telo.Application``/``Telo.Library`` header;
2. resolve ``imports`` (:mod:`.imports`; a library directory is loaded by this same module, recursively);
3. collect the kinds in reach: ``Telo.*``, ``<Alias>.<Kind>`` of every import, and ``Self.<Kind>`` for the
   module's own ``Telo.Definition`` documents;
4. evaluate ``variables``/``secrets`` (:mod:`.variables`);
5. declare every resource (names, kinds, duplicates), then validate each config against its kind's schema
   (:mod:`.validate`) and walk it (:mod:`.graph`: references, inline resources, CEL hook); refuse resources
   that invoke each other in a cycle no condition breaks (:mod:`.cycles`);
6. read the boot ``targets`` (:mod:`.boot`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast

from telo.specs import BUILTIN_KINDS, CAPABILITIES, TELO, Capability, KindSpec
from telo.targets import file_url

from .boot import read_targets
from .cycles import reference_cycles
from .declare import Declarer
from .diagnostics import (
    ERR_MANIFEST_DUPLICATE_RESOURCE,
    ERR_MANIFEST_NOT_FOUND,
    ERR_MANIFEST_UNKNOWN_RESOURCE,
    ERR_MANIFEST_VALIDATION_FAILED,
    ERR_MANIFEST_YAML,
    Diagnostic,
    ManifestLoadError,
    errors_of,
)
from .graph import CelChecker, Graph
from .imports import resolve_imports
from .model import Application, LibraryModule, Manifest, ResourceDecl
from .nodes import Pos
from .positions import join
from .reader import NAME, Document, read_documents
from .validate import DURABLE_BODIES, validate
from .variables import evaluate

HEADER_KINDS = ("Telo.Application", "Telo.Library")
DEFINITION = "Telo.Definition"
_APP_KIND = KindSpec("Telo", "Application", {"type": "object"}, "runnable")

HEADER_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "kind": {"enum": list(HEADER_KINDS)},
        "metadata": {
            "type": "object",
            "properties": {"name": {"type": "string", "pattern": NAME.pattern},
                           "version": {"type": ["string", "number"]}},
            "required": ["name"],
        },
        "imports": {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}},
        "variables": {"type": "object"},
        "secrets": {"type": "object"},
        "targets": {"type": "array"},
        "exports": {
            "type": "object",
            "properties": {"kinds": {"type": "array", "items": {"type": "string"}},
                           "resources": {"type": "array", "items": {"type": "string"}}},
            "additionalProperties": False,
        },
    },
    "required": ["kind", "metadata"],
}

DEFINITION_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "pattern": NAME.pattern}},
                     "required": ["name"]},
        "capability": {"type": "string"},
        "schema": {"type": "object"},
        "extends": {"type": "string"},
    },
    "required": ["metadata", "capability"],
}


@dataclass
class _Module:
    application: Application
    resources: dict[str, ResourceDecl]
    kinds: dict[str, KindSpec]
    canonical_kinds: dict[str, KindSpec]
    own_kinds: dict[str, KindSpec]
    module: str
    source: str
    text: str


def load_manifest(
    source: str | Path,
    *,
    text: str | None = None,
    env: Mapping[str, str] | None = None,
    cel_checker: CelChecker | None = None,
) -> Manifest:
    """Load and validate a manifest; raise :class:`ManifestLoadError` listing every error.

    ``text`` overrides reading ``source`` (which then only names the file in positions and resolves
    relative paths). ``env`` replaces ``os.environ`` for ``variables``/``secrets``. ``cel_checker`` is called
    for every CEL expression with the scope it is evaluated in and may return a diagnostic (the CEL
    adapter's compile and type errors).
    """
    diagnostics: list[Diagnostic] = []
    loaded = _load(Path(source), text, env, cel_checker, diagnostics, ())
    if loaded is None or errors_of(diagnostics):
        raise ManifestLoadError(str(source), diagnostics)
    return Manifest(
        application=loaded.application,
        resources=loaded.resources,
        kinds=loaded.kinds,
        canonical_kinds=loaded.canonical_kinds,
        source=loaded.source,
        module=loaded.module,
        text=loaded.text,
        diagnostics=diagnostics,
    )


def check_manifest(
    source: str | Path,
    *,
    text: str | None = None,
    env: Mapping[str, str] | None = None,
    cel_checker: CelChecker | None = None,
) -> list[Diagnostic]:
    """Every diagnostic of loading ``source`` (errors and warnings, sorted), without raising: ``telo check``."""
    try:
        return load_manifest(source, text=text, env=env, cel_checker=cel_checker).diagnostics
    except ManifestLoadError as exc:
        return exc.diagnostics


def _not_utf8(file: str, raw: bytes, exc: UnicodeDecodeError) -> Diagnostic:
    """A manifest that is not UTF-8 text (YAML's encoding here), at the first byte that cannot be decoded."""
    line = raw.count(b"\n", 0, exc.start) + 1
    column = len(raw[raw.rfind(b"\n", 0, exc.start) + 1:exc.start].decode("utf-8", "replace")) + 1
    return Diagnostic(ERR_MANIFEST_YAML, f"the manifest is not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be "
                      "decoded", Pos(file, line, column), hint="save the file as UTF-8 (a manifest is YAML text)")


def _load(
    path: Path,
    text: str | None,
    env: Mapping[str, str] | None,
    cel_checker: CelChecker | None,
    diagnostics: list[Diagnostic],
    stack: tuple[Path, ...],
) -> _Module | None:
    file = str(path)
    if text is None:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            diagnostics.append(Diagnostic(ERR_MANIFEST_NOT_FOUND, f"cannot read manifest {file}: {exc.strerror or exc}",
                                          None, hint="check that the file exists and this user may read it"))
            return None
        try:  # (newlines translated as read_text does: \r\n and \r read as \n)
            text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
        except UnicodeDecodeError as exc:
            diagnostics.append(_not_utf8(file, raw, exc))
            return None
    if env is None:
        env = os.environ
    module_url = file_url(path)  # as Node's pathToFileURL spells it: no symlink resolution (docs/compat.md)
    directory = Path(os.path.abspath(path)).parent  # symlinks kept, as Node's path.resolve keeps them
    read_from = len(diagnostics)
    documents = read_documents(text, file, directory, diagnostics)
    cut = _stream_cut(diagnostics, read_from)
    if not documents:
        if not errors_of(diagnostics):
            diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED, "the manifest has no documents",
                                          Pos(file, 1, 1)))
        return None
    header, rest = _split_header(documents, file, diagnostics)
    head: dict[str, Any] = header.value if header else {}
    table = header.positions if header else documents[0].positions
    if header is not None:
        validate(head, HEADER_SCHEMA, table, "", head.get("kind", "Telo.Application"), diagnostics)

    def load_library(library_file: Path, pos: Pos) -> LibraryModule | None:
        return _load_library(library_file, pos, env, cel_checker, diagnostics, (*stack, path.resolve()))

    imports = resolve_imports(head.get("imports"), table, directory, load_library, diagnostics)
    kinds: dict[str, KindSpec] = {f"Telo.{k}": v for k, v in TELO.kinds.items()}
    canonical: dict[str, KindSpec] = dict(BUILTIN_KINDS)
    for alias, imported in imports.items():
        kinds.update({f"{alias}.{name}": spec for name, spec in imported.kinds.items()})
        if isinstance(imported, LibraryModule):
            canonical.update({k.canonical: k for k in imported.all_kinds.values()})
    metadata: dict[str, Any] = head["metadata"] if isinstance(head.get("metadata"), dict) else {}
    app_name: str = metadata["name"] if isinstance(metadata.get("name"), str) else path.stem
    definitions = [d for d in rest if isinstance(d.value, dict) and d.value.get("kind") == DEFINITION]
    own = _definitions(definitions, app_name, kinds, diagnostics)
    kinds.update({f"Self.{name}": spec for name, spec in own.items()})
    canonical.update({k.canonical: k for k in own.values()})

    variables = evaluate("variables", head.get("variables"), env, table, diagnostics)
    secrets = evaluate("secrets", head.get("secrets"), env, table, diagnostics)
    declarer = Declarer(kinds, imports, module_url, diagnostics)
    resources = _declare_all([d for d in rest if d not in definitions], declarer, diagnostics)

    def check(decl: ResourceDecl) -> None:
        subject = f"{decl.alias_kind} {decl.name!r}"
        validate(decl.config, decl.spec.schema, decl.positions, decl.base, subject, diagnostics,
                 durable=decl.spec.canonical in DURABLE_BODIES or decl.spec.extends == "Durable.Run")

    def declare(doc: dict[str, Any], owner: ResourceDecl, at: tuple[str | int, ...], name: str | None
                ) -> ResourceDecl | None:
        return declarer.declare(doc, owner.positions, join(owner.base, *at), name=name, owner=owner.name,
                                pointer=join("", *at))

    graph = Graph(resources, imports, canonical, declare, check, diagnostics, cel_checker)
    for decl in list(resources.values()):
        check(decl)
        graph.walk_resource(decl)
    if not errors_of(diagnostics):  # like the zone checks (analysis.check): a broken graph would find cascades
        diagnostics.extend(reference_cycles(resources, canonical))  # a → b → a on every call: never returns

    kind = cast(Literal["Telo.Application", "Telo.Library"],
                head.get("kind") if head.get("kind") in HEADER_KINDS else "Telo.Application")
    app_decl = ResourceDecl(app_name, kind, kind, _APP_KIND, {k: v for k, v in head.items() if k != "kind"},
                            dict(metadata), header.pos if header else Pos(file, 1, 1), module_url, table)
    targets = read_targets(head.get("targets"), app_decl, graph, diagnostics)
    version = metadata.get("version")
    exports: dict[str, Any] = head["exports"] if isinstance(head.get("exports"), dict) else {}
    application = Application(
        name=app_name,
        version=str(version) if version is not None else None,
        kind=kind,
        imports=imports,
        variables={n: v.value for n, v in variables.items()},
        secrets={n: v.value for n, v in secrets.items()},
        targets=targets,
        metadata=dict(metadata),
        pos=app_decl.pos,
        declared_variables={**variables, **secrets},
        exports={k: [str(x) for x in v] for k, v in exports.items() if isinstance(v, list)},
    )
    if cut is not None:
        _drop_cascade(diagnostics, read_from, cut)
    return _Module(application, resources, kinds, canonical, own, module_url, file, text)


def _stream_cut(diagnostics: list[Diagnostic], start: int) -> Diagnostic | None:
    """The YAML error that ended the document stream (read_documents), if one did."""
    for d in diagnostics[start:]:
        if d.code == ERR_MANIFEST_YAML and d.message.startswith(("YAML syntax error", "YAML error")):
            return d
    return None


def _drop_cascade(diagnostics: list[Diagnostic], start: int, cut: Diagnostic) -> None:
    """A syntax error cuts the stream: the documents after it are not read, so a reference to a resource
    declared there reads as unknown. Those findings are the syntax error's cascade, not the author's mistakes:
    leave them out, and say so on the syntax error (it sorts first: diagnostics.sort_key)."""
    kept = [d for d in diagnostics[start:] if d.code != ERR_MANIFEST_UNKNOWN_RESOURCE]
    dropped = len(diagnostics) - start - len(kept)
    if dropped:
        note = (f"the documents after it were not read, so {dropped} reference(s) to resources they may declare "
                "are not checked until it is fixed")
        kept = [replace(d, hint=note) if d is cut else d for d in kept]
    diagnostics[start:] = kept


def _split_header(documents: list[Document], file: str, diagnostics: list[Diagnostic]
                  ) -> tuple[Document | None, list[Document]]:
    first = documents[0]
    if isinstance(first.value, dict) and first.value.get("kind") in HEADER_KINDS:
        for doc in documents[1:]:
            if isinstance(doc.value, dict) and doc.value.get("kind") in HEADER_KINDS:
                diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED,
                                              f"only the first document may be a {doc.value['kind']}", doc.pos))
        return first, [d for d in documents[1:] if not (isinstance(d.value, dict) and d.value.get("kind") in
                                                        HEADER_KINDS)]
    diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED,
                                  "the first document must be `kind: Telo.Application` (or Telo.Library)", first.pos))
    return None, documents


def _definitions(documents: list[Document], module: str, kinds: Mapping[str, KindSpec],
                 diagnostics: list[Diagnostic]) -> dict[str, KindSpec]:
    """The module's own kinds, from its ``Telo.Definition`` documents (``Self.<Kind>`` in the module)."""
    out: dict[str, KindSpec] = {}
    for doc in documents:
        value, table = doc.value, doc.positions
        before = len(diagnostics)
        validate(value, DEFINITION_SCHEMA, table, "", DEFINITION, diagnostics)
        if len(diagnostics) > before:
            continue
        name = value["metadata"]["name"]
        capability = str(value["capability"]).removeprefix("Telo.").lower()
        if capability not in CAPABILITIES:
            diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED,
                                          f"Telo.Definition {name!r}: unknown capability {value['capability']!r} "
                                          f"(one of {', '.join(CAPABILITIES)})", table.value("/capability")))
            continue
        extends = value.get("extends")
        if isinstance(extends, str) and extends in kinds:
            extends = kinds[extends].canonical  # written with an alias; stored canonical
        if name in out:
            diagnostics.append(Diagnostic(ERR_MANIFEST_DUPLICATE_RESOURCE, f"kind {name!r} is defined twice", doc.pos))
            continue
        schema = value.get("schema") or {"type": "object"}
        out[name] = KindSpec(module, name, schema, cast(Capability, capability),
                             extends=extends if isinstance(extends, str) else None, definition=value)
    return out


def _declare_all(documents: list[Document], declarer: Declarer, diagnostics: list[Diagnostic]
                 ) -> dict[str, ResourceDecl]:
    resources: dict[str, ResourceDecl] = {}
    for doc in documents:
        decl = declarer.declare(doc.value, doc.positions, "")
        if decl is None:
            continue
        first = resources.get(decl.name)
        if first is not None:
            diagnostics.append(Diagnostic(
                ERR_MANIFEST_DUPLICATE_RESOURCE,
                f"resource {decl.name!r} is declared twice (first as {first.alias_kind} at {first.pos})",
                decl.positions.value("/metadata/name")))
            continue
        resources[decl.name] = decl
    return resources


def _load_library(library_file: Path, pos: Pos, env: Mapping[str, str], cel_checker: CelChecker | None,
                  diagnostics: list[Diagnostic], stack: tuple[Path, ...]) -> LibraryModule | None:
    resolved = library_file.resolve()
    if resolved in stack:
        diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED, f"import cycle through {library_file}", pos))
        return None
    try:
        display = str(library_file.relative_to(Path.cwd()))
    except ValueError:
        display = str(library_file)
    loaded = _load(Path(display), None, env, cel_checker, diagnostics, stack)
    if loaded is None:
        return None
    app = loaded.application
    manifest = Manifest(application=app, resources=loaded.resources, kinds=loaded.kinds,
                        canonical_kinds=loaded.canonical_kinds, source=loaded.source, module=loaded.module,
                        text=loaded.text)
    if app.kind == "Telo.Application":
        # An application imported — a test manifest importing the manifest under test (issue 15): every kind it
        # defines and every resource it declares at module level is reachable through the alias; its targets
        # are its own `telo run`'s, never run by the importer.
        return LibraryModule(canonical=app.name, directory=resolved.parent, source=loaded.source,
                             module=loaded.module, kinds=dict(loaded.own_kinds), resources=loaded.resources,
                             exported_resources=tuple(n for n, r in loaded.resources.items() if r.owner is None),
                             all_kinds=dict(loaded.own_kinds), imports=dict(app.imports),
                             variables=dict(app.variables), manifest=manifest)
    exported_kinds: dict[str, KindSpec] = {}
    for name in app.exports.get("kinds", []):
        if name in loaded.own_kinds:
            exported_kinds[name] = loaded.own_kinds[name]
        else:
            diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED,
                                          f"library {app.name} exports kind {name!r}, which it does not define",
                                          app.pos))
    exported_resources = tuple(app.exports.get("resources", []))
    for name in exported_resources:
        if name not in loaded.resources:
            diagnostics.append(Diagnostic(ERR_MANIFEST_VALIDATION_FAILED,
                                          f"library {app.name} exports resource {name!r}, which it does not declare",
                                          app.pos))
    return LibraryModule(
        canonical=app.name,
        directory=resolved.parent,
        source=loaded.source,
        module=loaded.module,
        kinds=exported_kinds,
        resources=loaded.resources,
        exported_resources=tuple(n for n in exported_resources if n in loaded.resources),
        all_kinds=dict(loaded.own_kinds),
        imports=dict(app.imports),
        variables=dict(app.variables),
        manifest=manifest,
    )


__all__ = ["check_manifest", "load_manifest"]
