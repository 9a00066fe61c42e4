"""docs/kinds/*.md is generated from the kind specs (issue 15): these tests keep the pages and the specs in step,
and keep a field from landing without the text the reference prints for it."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from telo.manifest.diagnostics import Diagnostic
from telo.manifest.reader import read_documents
from telo.manifest.validate import validate
from telo.specs import reference
from telo.specs.events import KERNEL_EVENTS
from telo.specs.model import KindSpec
from telo.specs.steps import RETRY, STEP_SCHEMAS, TARGET_STEP

SRC = Path(__file__).resolve().parents[2] / "src" / "telo"
KINDS = [k for m in reference.modules() for k in m.kinds.values()]


def test_the_reference_pages_are_what_the_specs_generate() -> None:
    behind = reference.stale(reference.DOCS)
    assert behind == [], (f"docs/kinds/ is out of date with src/telo/specs ({', '.join(behind)}): run "
                          f"`.venv/bin/{reference.COMMAND}`")


def test_a_changed_description_makes_the_check_fail(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The sync check is not vacuous: editing one field's text without regenerating is caught."""
    assert reference.main(["--out", str(tmp_path)]) == 0
    assert reference.stale(tmp_path) == []
    timeout = STEP_SCHEMAS["invoke"]["properties"]["timeout"]
    monkeypatch.setitem(timeout, "description", timeout["description"] + " Changed.")
    assert reference.stale(tmp_path) == ["steps.md"]
    assert reference.main(["--out", str(tmp_path), "--check"]) == 1


def _fields(schema: Mapping[str, Any], where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for name, sub in (schema.get("properties") or {}).items():
        yield f"{where}.{name}", sub


def _every_field() -> Iterator[tuple[str, Mapping[str, Any]]]:
    for kind in KINDS:
        yield from _fields(kind.schema, kind.canonical)
        yield from _fields(kind.input_schema or {}, f"{kind.canonical} (inputs)")
    for step, schema in STEP_SCHEMAS.items():
        yield from _fields(schema, f"{step} step")
    yield from _fields(RETRY, "retry")
    yield from _fields(TARGET_STEP, "boot target")


def test_every_field_of_every_built_in_kind_is_described() -> None:
    undocumented = [where for where, sub in _every_field() if not str(sub.get("description", "")).strip()]
    assert undocumented == [], "give these fields a `description` in src/telo/specs: " + ", ".join(undocumented)


def test_every_kind_is_described_with_an_example() -> None:
    assert [k.canonical for k in KINDS if not k.description] == []
    assert [k.canonical for k in KINDS if not k.example and not k.abstract] == []


@pytest.mark.parametrize("kind", [k for k in KINDS if k.example], ids=lambda k: k.canonical)
def test_each_example_is_a_valid_resource_of_its_kind(kind: KindSpec, tmp_path: Path) -> None:
    diagnostics: list[Diagnostic] = []
    [doc] = read_documents(kind.example, "example.yaml", tmp_path, diagnostics)
    assert diagnostics == []
    assert doc.value["kind"] == kind.canonical  # examples use the canonical name as the alias
    config = {k: v for k, v in doc.value.items() if k not in ("kind", "metadata")}
    validate(config, kind.schema, doc.positions, "", kind.canonical, diagnostics)
    assert [d.message for d in diagnostics] == []


def test_the_event_catalogue_names_every_event_the_source_emits() -> None:
    emitted: set[str] = set()
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        emitted.update(re.findall(r"emit\(\s*f\"\{[^}]+\}\.(\w+)\"", text))
        if re.search(r"emit\(f\"\{self\.name\}\.Run\{execution\.status\.capitalize\(\)\}\"", text):
            emitted.update({"RunCompleted", "RunFailed", "RunParked", "RunCancelled", "RunRunning"})
    emitted.discard("Run")  # the Run{status} family, expanded above
    assert emitted == {e.name for e in KERNEL_EVENTS}


def test_the_pages_link_each_other() -> None:
    pages = reference.render_all()
    for name, text in pages.items():
        for target in re.findall(r"\]\(([\w-]+\.md)", text):
            assert target in pages, f"{name} links to {target}"
