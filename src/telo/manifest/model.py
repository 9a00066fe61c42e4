"""The loaded manifest: application, imports, resources (module-level and inline), targets (reference §1)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from telo.specs import KindSpec, ModuleSpec

from .diagnostics import Diagnostic
from .nodes import Cel, Pos, Ref
from .positions import PositionTable, split


@dataclass(eq=False)
class ResourceDecl:
    """One resource declaration.

    ``alias_kind`` is the kind as written (``Local.Workflow``), ``kind`` its canonical name
    (``DurableLocal.Workflow``). ``config`` is the document without ``kind`` and ``metadata``; inline
    resources inside it have been replaced by a :class:`Ref` (``inline=True``) to their own declaration.
    ``module`` is the declaring module's ref (``file://<absolute path>``; spec §5.3). An inline resource
    has ``owner`` (the declaring resource's name) and ``pointer`` (JSON Pointer of the declaration inside
    the owner's config); resources of a ``Run.Sequence``'s ``with:`` are in the owner's ``scoped``.
    """

    name: str
    alias_kind: str
    kind: str
    spec: KindSpec
    config: dict[str, Any]
    metadata: dict[str, Any]
    pos: Pos
    module: str
    positions: PositionTable = field(repr=False)
    base: str = ""  # JSON Pointer of this declaration inside its document
    owner: str | None = None
    pointer: str | None = None
    scoped: dict[str, ResourceDecl] = field(default_factory=dict, repr=False)

    def position(self, pointer: str = "") -> Pos:
        """``file:line:col`` of the config value at ``pointer`` (RFC 6901, relative to this resource);
        the nearest enclosing node's position when nothing is at ``pointer`` (a missing field)."""
        return self.positions.value(self.base + pointer)

    def key_position(self, pointer: str) -> Pos:
        """Where the mapping key of the field at ``pointer`` is written (for "unknown field" reports)."""
        return self.positions.key(self.base + pointer)

    def at(self, pointer: str) -> Any:
        """The config value at ``pointer`` (``KeyError``/``IndexError`` when absent)."""
        value: Any = self.config
        for token in split(pointer):
            value = value[int(token)] if isinstance(value, list) else value[token]
        return value


@dataclass(frozen=True, slots=True)
class Variable:
    """A declared variable or secret: its evaluated value and where it is declared."""

    name: str
    value: Any
    env: str | None
    pos: Pos
    secret: bool = False


@dataclass(frozen=True, slots=True)
class Target:
    """A boot target (reference §1, "How targets run"), run sequentially in list order.

    ``form`` is ``ref`` (``!ref name`` or ``{ref, when?}``: ``run()`` on a runnable/service) or ``invoke``
    (an inline invoke step ``{name?, invoke, inputs?, when?, retry?}`` whose result is published as
    ``steps.<name>.result``). ``step`` is the step mapping of the invoke form (its ``invoke`` a :class:`Ref`).
    """

    name: str
    form: Literal["ref", "invoke"]
    ref: Ref | None
    when: bool | Cel | None
    step: Mapping[str, Any] | None
    pos: Pos
    index: int


@dataclass
class LibraryModule:
    """An imported ``Telo.Library`` directory (reference §1): its kinds and resources, as a module.

    ``kinds`` are the *exported* kinds by short name (``exports.kinds``); ``resources`` are all of the
    library's resources, of which ``exported_resources`` are reachable as ``!ref Alias.name``. An imported
    ``Telo.Application`` (a test manifest importing the manifest under test) exports every kind it defines and
    every module-level resource. ``manifest`` is the module as a manifest of its own: the runtime creates its
    resources in its own namespace (:mod:`telo.runtime.modules`), where its ``!ref`` names resolve.
    """

    canonical: str
    directory: Path
    source: str
    module: str
    kinds: dict[str, KindSpec]
    resources: dict[str, ResourceDecl]
    exported_resources: tuple[str, ...]
    all_kinds: dict[str, KindSpec] = field(default_factory=dict, repr=False)
    imports: dict[str, ModuleSpec | LibraryModule] = field(default_factory=dict, repr=False)
    variables: dict[str, Any] = field(default_factory=dict, repr=False)
    manifest: Manifest | None = field(default=None, repr=False)

    @property
    def import_name(self) -> str:
        return str(self.directory)

    def kind(self, name: str) -> KindSpec | None:
        return self.kinds.get(name)


Import = ModuleSpec | LibraryModule


@dataclass
class Application:
    """The first document: ``Telo.Application`` (runnable) or ``Telo.Library`` (importable)."""

    name: str
    version: str | None
    kind: Literal["Telo.Application", "Telo.Library"]
    imports: dict[str, Import]
    variables: dict[str, Any]
    secrets: dict[str, Any] = field(repr=False)
    targets: list[Target]
    metadata: dict[str, Any]
    pos: Pos
    declared_variables: dict[str, Variable] = field(default_factory=dict, repr=False)
    exports: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Manifest:
    """A loaded manifest (:func:`telo.manifest.load_manifest`).

    ``resources`` holds every module-level and inline resource of the file by name (inline ones under their
    generated or declared names); ``kinds`` maps each kind name usable in this file (``Local.Workflow``,
    ``Telo.JsonSchema``) to its spec, and ``canonical_kinds`` every known kind by canonical name.
    ``diagnostics`` are the warnings of a successful load.
    """

    application: Application
    resources: dict[str, ResourceDecl]
    kinds: dict[str, KindSpec]
    canonical_kinds: dict[str, KindSpec]
    source: str
    module: str
    text: str = field(repr=False)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def position(self, resource: str | ResourceDecl, pointer: str = "") -> Pos:
        """``file:line:col`` of the config value at ``pointer`` inside ``resource``."""
        decl = resource if isinstance(resource, ResourceDecl) else self.resources[resource]
        return decl.position(pointer)

    def resolve(self, ref: Ref) -> ResourceDecl:
        """The module-level (or inline) resource a reference names; ``Alias.name`` reaches a library's
        exported resource. ``with:``-scoped names are the engine's to resolve first. ``KeyError`` if none."""
        if ref.alias is None:
            return self.resources[ref.name]
        library = self.application.imports.get(ref.alias)
        if isinstance(library, LibraryModule) and ref.name in library.exported_resources:
            return library.resources[ref.name]
        raise KeyError(ref.text)

    def resolve_in(self, ref: Ref, decl: ResourceDecl | None = None) -> ResourceDecl | None:
        """The declaration ``ref`` names from inside ``decl`` (``None``: this file's header), or ``None``:
        ``decl``'s ``with:`` scopes first, then its module's resources — a library's own, for a library's resource
        — then the exported resources of that module's imports (what the static walks follow)."""
        resources, imports = self._module_of(decl)
        if ref.inline:
            return resources.get(ref.name)
        if ref.alias is None:
            owner = decl
            while owner is not None:
                if ref.name in owner.scoped:
                    return owner.scoped[ref.name]
                owner = resources.get(owner.owner) if owner.owner else None
            return resources.get(ref.name)
        library = imports.get(ref.alias)
        if isinstance(library, LibraryModule) and ref.name in library.exported_resources:
            return library.resources.get(ref.name)
        return None

    def _module_of(self, decl: ResourceDecl | None) -> tuple[Mapping[str, ResourceDecl], Mapping[str, Any]]:
        if decl is None or decl.module == self.module:
            return self.resources, self.application.imports
        for library in libraries(self.application.imports):
            if library.module == decl.module:
                return library.resources, library.imports
        return {}, {}

    def kind(self, name: str) -> KindSpec:
        """A kind by the name written in this file (``Local.Workflow``) or by canonical name."""
        return self.kinds.get(name) or self.canonical_kinds[name]

    def inline_resources(self, owner: str | None = None) -> list[ResourceDecl]:
        return [r for r in self.resources.values() if r.owner is not None and (owner is None or r.owner == owner)]


def libraries(imports: Mapping[str, Any], seen: set[int] | None = None) -> Iterator[LibraryModule]:
    """Every library ``imports`` reaches, its libraries' own imports included, each once."""
    seen = seen if seen is not None else set()
    for module in imports.values():
        if isinstance(module, LibraryModule) and id(module) not in seen:
            seen.add(id(module))
            yield module
            yield from libraries(module.imports, seen)
