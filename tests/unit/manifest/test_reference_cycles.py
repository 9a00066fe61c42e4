"""Resources that invoke each other in a cycle no condition breaks are refused at load, one diagnostic per cycle
at a reference of the cycle (issue 15; telo.manifest.cycles); recursion that can end, and workflows starting
each other's runs (detached, reference §6), load."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from telo.analysis import check
from telo.errors import Code
from telo.manifest import Diagnostic
from telo.runtime.app import Application

from .conftest import locate

FIXTURES = Path(__file__).resolve().parents[2] / "manifests" / "__fixtures__" / "cycles"
CYCLE = Code.MANIFEST_REFERENCE_CYCLE.value

HEADER = """\
kind: Telo.Application
metadata: { name: Cycles }
imports: { Run: run, Local: durable-local, Journal: durable-journal-sqlite }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./journal.db
"""


def cycles(path: Path) -> list[Diagnostic]:
    found = check(path)
    assert not [d for d in found if d.severity == "error" and d.code != CYCLE], found
    return [d for d in found if d.code == CYCLE]


def write(tmp_path: Path, body: str) -> tuple[Path, str]:
    text = HEADER + textwrap.dedent(body)
    path = tmp_path / "app.yaml"
    path.write_text(text, encoding="utf-8")
    return path, text


def test_two_sequences_invoking_each_other_are_one_cycle_at_a_reference() -> None:
    path = FIXTURES / "sequences_invoke_each_other.yaml"
    [found] = cycles(path)
    line, column = locate(path.read_text(), "!ref b")
    assert found.pos is not None and (found.pos.file, found.pos.line, found.pos.column) == (str(path), line, column)
    assert "a → b → a" in found.message and found.hint and "when:" in found.hint
    assert "a → b → a" in str(found) and f"{path}:{line}:{column}" in str(found)


def test_a_self_loop_through_an_inline_target_is_a_cycle() -> None:
    [found] = cycles(FIXTURES / "self_loop.yaml")
    assert found.message.startswith("Run.Sequence 'again' invokes itself through again → ")
    assert found.message.split(":")[0].endswith("→ again")


def test_a_step_invoking_its_own_resource_is_a_cycle(tmp_path: Path) -> None:
    path, text = write(tmp_path, """\
    ---
    kind: Run.Sequence
    metadata: { name: me }
    steps:
      - { name: first, invoke: !ref me }
    """)
    [found] = cycles(path)
    assert "me → me" in found.message
    assert found.pos is not None and (found.pos.line, found.pos.column) == locate(text, "!ref me")


def test_each_cycle_is_reported_once(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """\
    ---
    kind: Run.Sequence
    metadata: { name: a }
    steps:
      - { name: one, invoke: !ref b }
      - { name: two, invoke: !ref c }
    ---
    kind: Run.Sequence
    metadata: { name: b }
    steps:
      - { name: back, invoke: !ref a }
    ---
    kind: Run.Sequence
    metadata: { name: c }
    steps:
      - { name: back, invoke: !ref a }
    ---
    kind: Run.Sequence
    metadata: { name: x }
    steps:
      - { name: on, invoke: !ref y }
    ---
    kind: Run.Sequence
    metadata: { name: y }
    steps:
      - name: wrapped
        try:
          - { name: ok, invoke: !ref z }
        finally:
          - { name: back, invoke: !ref x }
    ---
    kind: Run.Sequence
    metadata: { name: z }
    steps: [{ name: leaf, value: 1 }]
    """)
    found = cycles(path)
    assert [d.message.split(" invokes itself through ")[1].split(":")[0] for d in found] == \
        ["a → b → a", "x → y → x"]


def test_the_cycle_refuses_to_load_the_application() -> None:
    with pytest.raises(Exception) as raised:
        Application.load(FIXTURES / "sequences_invoke_each_other.yaml", controllers={})
    assert CYCLE in str(raised.value)


def test_recursion_that_can_end_and_workflows_starting_each_other_load() -> None:
    assert cycles(FIXTURES / "guarded_recursion.yaml") == []
    assert cycles(FIXTURES / "workflows_start_each_other.yaml") == []


def test_conditional_bodies_break_a_cycle(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """\
    ---
    kind: Run.Sequence
    metadata: { name: a }
    steps:
      - name: guarded
        try:
          - { name: fine, value: 1 }
        catch:
          - { name: retry, invoke: !ref a }
      - name: pick
        switch: !cel "inputs.k"
        cases:
          again: [{ name: again, invoke: !ref a }]
      - name: loop
        while: !cel "false"
        do: [{ name: again, invoke: !ref a }]
      - { name: each, invoke: !ref each }
      - { name: later, invoke: !ref flow }
    ---
    kind: Run.Sequence
    metadata: { name: d }
    steps: [{ name: detached, invoke: !ref bg }]
    ---
    kind: Run.Iteration
    metadata: { name: each }
    collection: !cel "inputs.items"
    steps: [{ name: again, invoke: !ref a }]
    ---
    kind: Run.Detach
    metadata: { name: bg }
    invoke: !ref d
    ---
    kind: Local.Workflow
    metadata: { name: flow }
    journal: !ref runs
    steps: [{ name: again, invoke: !ref a }]
    """)
    assert cycles(path) == []
