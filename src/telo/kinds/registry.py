"""Declarative kind specs and the built-in module table (reference §1 "imports", §3, §5–§7, §13, §14).

A *module* is what an import names (``durable-local``); its *canonical* name (``DurableLocal``) is the
upstream library's ``metadata.name``, and a kind's canonical name is ``<canonical>.<Kind>``
(``DurableLocal.Workflow``) whatever alias the manifest imported it under. Journals, events and zone reports
use the canonical name (reference §1).

A :class:`KindSpec` holds the JSON Schema (draft 2020-12) of a resource's configuration, annotated with the
upstream ``x-telo-*`` keywords (read by the manifest loader and the static checks):

* ``x-telo-ref: <canonical kind | "*">`` — a reference slot: ``!ref`` or an inline ``{kind: …}`` resource;
  the referenced kind must be that kind or extend it;
* ``x-telo-eval: compile | runtime`` — a CEL-bearing field, evaluated once at load against the module
  scope, or per call against ``{inputs}`` plus the module scope (reference §1);
* ``x-telo-steps: true`` — a step list (the shared Step grammar, reference §3; :mod:`telo.kinds.specs.steps`);
* ``x-telo-scope: [names]`` — extra CEL names a step list's bodies see (``item``, ``index`` …, reference §2);
* ``x-telo-provides-zone: {attribute: reason}`` on a body slot; ``x-telo-requires-zone: {zone, attributes}``
  and ``x-telo-violates-zone: {attribute: reason}`` on the schema root (reference §5, §12);
* ``x-telo-use: detached`` on a slot whose target runs detached (``Run.Detach``, reference §12);
* ``x-telo-type: <type name>`` — a value-type annotation (``Telo.HostPath``, ``Telo.Stream``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from telo.errors import Code, ManifestError

Capability = Literal["invocable", "runnable", "service", "provider", "type", "abstract"]
CAPABILITIES: tuple[str, ...] = ("invocable", "runnable", "service", "provider", "type", "abstract")
ERR_MANIFEST_UNKNOWN_MODULE = Code.MANIFEST_UNKNOWN_MODULE


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """The annotations of one top-level configuration field, read from the kind's schema."""

    name: str
    required: bool = False
    ref: str | None = None  # x-telo-ref
    eval: Literal["compile", "runtime"] | None = None  # x-telo-eval
    steps: bool = False  # x-telo-steps
    scope: tuple[str, ...] = ()  # x-telo-scope
    provides_zone: Mapping[str, str] | None = None  # x-telo-provides-zone
    use: str | None = None  # x-telo-use
    value_type: str | None = None  # x-telo-type
    default: Any = None
    has_default: bool = False


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One kind: its module's canonical name, its own name, the config schema and its capability.

    ``capabilities`` lists every capability (``Run.Sequence`` is invocable *and* runnable); ``capability``
    is the primary one. ``extends`` is the canonical kind this one specialises (``DurableLocal.Workflow``
    extends ``Durable.Run``). ``input_schema``/``output_schema`` are the fixed call contract of kinds
    that have one (``Console.WriteLine`` takes ``{output}``). ``definition`` is the raw ``Telo.Definition``
    document of a library kind. ``fields`` is derived from ``schema``.
    """

    module: str
    name: str
    schema: Mapping[str, Any]
    capability: Capability
    capabilities: frozenset[str] = frozenset()
    extends: str | None = None
    input_schema: Mapping[str, Any] | None = None
    output_schema: Mapping[str, Any] | None = None
    definition: Mapping[str, Any] | None = None
    fields: Mapping[str, FieldSpec] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.capability not in CAPABILITIES:
            raise ValueError(f"{self.canonical}: unknown capability {self.capability!r}")
        object.__setattr__(self, "capabilities", frozenset(self.capabilities | {self.capability}))
        if not self.fields:
            object.__setattr__(self, "fields", _fields_of(self.schema))

    @property
    def canonical(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def abstract(self) -> bool:
        return self.capability == "abstract" or bool(self.schema.get("x-telo-abstract"))

    @property
    def requires_zone(self) -> Mapping[str, Any] | None:
        """``{zone: <canonical kind>, attributes: [...]}`` with ``Self.`` resolved to this module."""
        raw = self.schema.get("x-telo-requires-zone")
        if not isinstance(raw, Mapping):
            return None
        zone = raw.get("zone")
        if isinstance(zone, str) and zone.startswith("Self."):
            zone = f"{self.module}.{zone[5:]}"
        return {**raw, "zone": zone}

    @property
    def violates_zone(self) -> Mapping[str, str] | None:
        raw = self.schema.get("x-telo-violates-zone")
        return raw if isinstance(raw, Mapping) else None

    def body_fields(self) -> list[FieldSpec]:
        """The step-list fields, in schema order."""
        return [f for f in self.fields.values() if f.steps]


def _fields_of(schema: Mapping[str, Any]) -> dict[str, FieldSpec]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    required = set(schema.get("required", ()))
    out: dict[str, FieldSpec] = {}
    for name, sub in properties.items():
        if not isinstance(sub, Mapping):
            continue
        out[name] = FieldSpec(
            name=name,
            required=name in required,
            ref=sub.get("x-telo-ref"),
            eval=sub.get("x-telo-eval"),
            steps=bool(sub.get("x-telo-steps")),
            scope=tuple(sub.get("x-telo-scope", ())),
            provides_zone=sub.get("x-telo-provides-zone"),
            use=sub.get("x-telo-use"),
            value_type=sub.get("x-telo-type"),
            default=sub.get("default"),
            has_default="default" in sub,
        )
    return out


@dataclass(frozen=True, slots=True)
class ModuleSpec:
    """A built-in module: the name imports use, its canonical library name, and its kinds by short name."""

    import_name: str
    canonical: str
    kinds: Mapping[str, KindSpec]

    def kind(self, name: str) -> KindSpec | None:
        return self.kinds.get(name)


def module(import_name: str, canonical: str, *kinds: KindSpec) -> ModuleSpec:
    """Build a :class:`ModuleSpec`, checking every kind belongs to it (the specs are hand-written)."""
    for spec in kinds:
        if spec.module != canonical:
            raise ValueError(f"kind {spec.canonical} listed in module {canonical}")
    return ModuleSpec(import_name, canonical, {k.name: k for k in kinds})


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
    from .specs import BUILTIN_MODULES  # the specs import this module; bind late

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
    from .specs import BUILTIN_KINDS, BUILTIN_MODULES

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


def conforms(kind: KindSpec, wanted: str, lookup: Mapping[str, KindSpec]) -> bool:
    """Whether ``kind`` is the canonical kind ``wanted`` or extends it (transitively); ``"*"`` fits all."""
    if wanted == "*":
        return True
    seen: set[str] = set()
    current: KindSpec | None = kind
    while current is not None and current.canonical not in seen:
        if current.canonical == wanted:
            return True
        seen.add(current.canonical)
        current = lookup.get(current.extends) if current.extends else None
    return False
