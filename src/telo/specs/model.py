"""The kind specs' data model (reference §1 "imports", §3, §5–§7, §13, §14).

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
* ``x-telo-steps: true`` — a step list (the shared Step grammar, reference §3; :mod:`telo.specs.steps`);
* ``x-telo-scope: [names]`` — extra CEL names a step list's bodies see (``item``, ``index`` …, reference §2);
* ``x-telo-provides-zone: {attribute: reason}`` on a body slot; ``x-telo-requires-zone: {zone, attributes}``
  and ``x-telo-violates-zone: {attribute: reason}`` on the schema root (reference §5, §12);
* ``x-telo-use: detached`` on a slot whose target runs detached (``Run.Detach``, reference §12);
* ``x-telo-type: <type name>`` — a value-type annotation (``Telo.HostPath``, ``Telo.Stream``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Capability = Literal["invocable", "runnable", "service", "provider", "type", "abstract"]
CAPABILITIES: tuple[str, ...] = ("invocable", "runnable", "service", "provider", "type", "abstract")


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
    document of a library kind. ``fields`` is derived from ``schema``. ``description`` and ``example`` (a YAML
    resource document) are what the generated reference prints (docs/kinds/, :mod:`telo.specs.reference`); each
    field's own text is the ``description`` of its schema.

    ``unimplemented`` marks a kind telo knows but does not implement yet, saying what it would provide
    (``declarative schema and migrations``): its spec lets upstream manifests load, and every declaration of it
    is an error of ``telo check`` and of every boot, ERR_KIND_NOT_IMPLEMENTED, hinting at ``unimplemented_hint``.
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
    description: str = ""
    example: str = ""
    unimplemented: str = ""
    unimplemented_hint: str = ""

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

    def not_implemented(self) -> str:
        """The refusal of a declaration of an unimplemented kind (empty for a kind telo implements)."""
        return f"{self.canonical} ({self.unimplemented}) is not implemented by telo yet" if self.unimplemented else ""

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
