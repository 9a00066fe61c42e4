"""Imports: built-in modules by bare name, relative path or oci ref; Telo.Library directories (reference §1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from telo.manifest import Diagnostic, LibraryModule, Manifest, Ref, load_manifest
from telo.specs import BUILTIN_MODULES

from .conftest import locate


@pytest.mark.parametrize(
    "ref",
    ["durable-local", "../../modules/durable-local", "./modules/durable-local/", "modules/durable-local",
     "oci://ghcr.io/telo-run/modules/durable-local@1.4.0", "oci://ghcr.io/telo-run/durable-local"],
)
def test_builtin_import_forms(load: Callable[..., Manifest], ref: str) -> None:
    m = load(f"""
        kind: Telo.Application
        metadata: {{name: I}}
        imports: {{Local: "{ref}", Files: durable-journal-file}}
        ---
        kind: Files.Journal
        metadata: {{name: j}}
        directory: ./runs
        ---
        kind: Local.Result
        metadata: {{name: r}}
        journal: !ref j
        """)
    assert m.application.imports["Local"] is BUILTIN_MODULES["durable-local"]
    assert m.resources["r"].kind == "DurableLocal.Result"
    assert m.kinds["Local.Result"] is m.kinds["DurableLocal.Result"] if "DurableLocal.Result" in m.kinds else True


def test_two_aliases_for_one_module(load: Callable[..., Manifest]) -> None:
    m = load("""
        kind: Telo.Application
        metadata: {name: I}
        imports: {A: run, B: run}
        ---
        kind: A.Value
        metadata: {name: x}
        value: 1
        ---
        kind: B.Value
        metadata: {name: y}
        value: 2
        """)
    assert m.resources["x"].kind == m.resources["y"].kind == "Run.Value"


def test_unknown_and_reserved_imports(fail: Callable[..., list[Diagnostic]]) -> None:
    text = (
        "kind: Telo.Application\nmetadata: {name: I}\n"
        "imports: {A: nothing-here, B: ./no/such/dir, C: oci://x/y/unknown@1, Telo: run, Self: run}\n"
    )
    diags = fail(text)
    assert [d.code for d in diags] == ["ERR_MANIFEST_UNKNOWN_MODULE"] * 3 + ["ERR_MANIFEST_INVALID_NAME"] * 2
    assert diags[0].pos is not None and (diags[0].pos.line, diags[0].pos.column) == locate(text, "nothing-here")
    assert "no " in diags[1].message and "telo.yaml" in diags[1].message


LIBRARY = """
kind: Telo.Library
metadata: {name: Shipping, version: 1.0.0}
imports: {Run: run}
exports: {kinds: [Parcel], resources: [carrier]}
---
kind: Telo.Definition
metadata: {name: Parcel}
capability: Telo.Invocable
schema:
  type: object
  properties:
    weight: {type: number}
    carrier: {x-telo-ref: Self.Carrier}
  required: [weight]
  additionalProperties: false
---
kind: Telo.Definition
metadata: {name: Carrier}
capability: Telo.Provider
schema: {type: object, properties: {label: {type: string}}}
---
kind: Self.Carrier
metadata: {name: carrier}
label: DHL
---
kind: Run.Value
metadata: {name: internal}
value: 1
"""


def test_library_directory_import(write: Callable[..., Path]) -> None:
    write(LIBRARY, "lib/shipping/telo.yaml")
    app = write("""
        kind: Telo.Application
        metadata: {name: Shop}
        imports: {Ship: ./lib/shipping, Run: run}
        ---
        kind: Ship.Parcel
        metadata: {name: parcel}
        weight: 2.5
        carrier: !ref Ship.carrier
        ---
        kind: Run.Sequence
        metadata: {name: send}
        steps:
          - {name: a, invoke: !ref parcel}
          - {name: b, invoke: {kind: Ship.Parcel, weight: 1}}
        """)
    m = load_manifest(app, env={})
    lib = m.application.imports["Ship"]
    assert isinstance(lib, LibraryModule)
    assert lib.canonical == "Shipping" and set(lib.kinds) == {"Parcel"} and lib.exported_resources == ("carrier",)
    assert lib.module.endswith("/lib/shipping/telo.yaml") and lib.module != m.module
    parcel = m.resources["parcel"]
    assert (parcel.alias_kind, parcel.kind, parcel.spec.capability) == ("Ship.Parcel", "Shipping.Parcel", "invocable")
    carrier = m.resolve(parcel.config["carrier"])
    assert carrier.kind == "Shipping.Carrier" and carrier.module == lib.module and carrier.config == {"label": "DHL"}
    assert m.resources["SequenceSendSteps1B"].kind == "Shipping.Parcel"
    assert isinstance(m.resources["send"].config["steps"][1]["invoke"], Ref)


def test_library_errors(write: Callable[..., Path], fail: Callable[..., list[Diagnostic]]) -> None:
    write(LIBRARY, "lib/telo.yaml")
    text = """
        kind: Telo.Application
        metadata: {name: Shop}
        imports: {Ship: ./lib}
        ---
        kind: Ship.Carrier
        metadata: {name: c}
        ---
        kind: Ship.Parcel
        metadata: {name: p}
        weight: heavy
        carrier: !ref Ship.internal
        """
    diags = fail(text)
    messages = [d.message for d in diags]
    assert any("does not export kind 'Carrier'" in m for m in messages)
    assert any("exports no resource 'internal'" in m for m in messages)
    assert any("expected a number" in m for m in messages)


def test_library_own_errors_point_into_the_library(write: Callable[..., Path],
                                                   fail: Callable[..., list[Diagnostic]]) -> None:
    broken = write(LIBRARY.replace("label: DHL", "label: 7"), "lib/telo.yaml")
    [d] = fail("kind: Telo.Application\nmetadata: {name: Shop}\nimports: {Ship: ./lib}\n")
    assert d.pos is not None and Path(d.pos.file).resolve() == broken.resolve()
    assert (d.pos.line, d.pos.column) == locate(broken.read_text(), "7")


def test_library_import_cycle(write: Callable[..., Path], fail: Callable[..., list[Diagnostic]]) -> None:
    write("kind: Telo.Library\nmetadata: {name: A}\nimports: {B: ../b}\n", "a/telo.yaml")
    write("kind: Telo.Library\nmetadata: {name: B}\nimports: {A: ../a}\n", "b/telo.yaml")
    diags = fail("kind: Telo.Application\nmetadata: {name: X}\nimports: {A: ./a}\n")
    assert any("import cycle" in d.message for d in diags)


def test_an_imported_application_exports_its_kinds_and_module_level_resources(write: Callable[..., Path]) -> None:
    """A test manifest imports the application under test (issue 15): every kind it defines and every resource
    it declares at module level is reachable through the alias (an inline one is not: it has no name of its
    own there); its targets stay its own."""
    write("""
        kind: Telo.Application
        metadata: {name: Other}
        imports: {Run: run}
        targets: [!ref seq]
        ---
        kind: Telo.Definition
        metadata: {name: Box}
        capability: type
        schema: {type: object}
        ---
        kind: Run.Value
        metadata: {name: one}
        value: 1
        ---
        kind: Run.Sequence
        metadata: {name: seq}
        steps:
          - {name: a, invoke: {kind: Run.Value, value: 2}}
        """, "other/app.yaml")
    app = write("kind: Telo.Application\nmetadata: {name: X}\nimports: {O: ./other/app.yaml}\n"
                "---\nkind: O.Box\nmetadata: {name: one}\nx: 1\n")  # a `one` of its own, of the imported kind
    m = load_manifest(app, env={})
    other = m.application.imports["O"]
    assert isinstance(other, LibraryModule) and other.manifest is not None
    assert other.exported_resources == ("one", "seq") and set(other.kinds) == {"Box"}
    assert m.resolve(Ref("one", "O", None)).config == {"value": 1}  # the application's, not this file's `one`
    assert m.resources["one"].kind == "Other.Box"
    assert [t.name for t in other.manifest.application.targets] == ["seq"] and m.application.targets == []


def test_a_library_loads_on_its_own(write: Callable[..., Path]) -> None:
    m = load_manifest(write(LIBRARY, "lib/telo.yaml"), env={})
    assert m.application.kind == "Telo.Library" and m.application.exports["kinds"] == ["Parcel"]
    assert m.kinds["Self.Parcel"].canonical == "Shipping.Parcel"
