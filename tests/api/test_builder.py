"""telo.builder: the Python form of a workflow is the YAML form — same configuration data, same journal."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import telo
from telo.builder import (
    cel,
    if_,
    invoke,
    iteration,
    ref,
    resource,
    retry,
    step,
    switch,
    throw,
    try_,
    value,
    while_,
    workflow,
)
from telo.clock import FakeClock
from telo.manifest import Cel, ManifestLoadError, Ref, Template

_attempts: Counter[str] = Counter()


@telo.kind("Parity.Work", idempotent=True)
def work(inputs: dict[str, Any], ctx: telo.StepContext) -> dict[str, Any]:
    return {"did": inputs["label"], "key": ctx.idempotency_key}


@telo.kind("Parity.Flaky")
def flaky(inputs: dict[str, Any]) -> dict[str, Any]:
    _attempts[inputs["run"]] += 1
    if _attempts[inputs["run"]] == 1:
        raise telo.TeloError("ERR_FLAKY", "the first attempt fails")
    return {"attempt": _attempts[inputs["run"]]}


COMMON = """\
kind: Telo.Application
metadata: { name: Parity, version: 1.0.0 }
imports: { Run: run, Local: durable-local, Journal: durable-journal-sqlite, Parity: Parity }
---
kind: Journal.Journal
metadata: { name: journal }
path: ./unused.db
---
kind: Parity.Work
metadata: { name: work }
---
kind: Parity.Flaky
metadata: { name: flaky }
---
kind: Run.Sequence
metadata: { name: billing }
steps:
  - { name: save, invoke: !ref work, inputs: { label: billing } }
outputs: !cel "steps.save.result"
"""

WORKFLOW_YAML = """\
---
kind: Local.Workflow
metadata: { name: wf }
journal: !ref journal
runId: !cel "inputs.run"
inputs: { run: !cel "inputs.run", items: !cel "inputs.items" }
steps:
  - { name: bill, invoke: !ref billing }
  - name: size
    if: !cel "size(inputs.items) > 2"
    then: [{ name: note, value: big }]
    elseif: [{ if: !cel "size(inputs.items) > 1", then: [{ name: note, value: medium }] }]
    else: [{ name: note, value: small }]
  - { name: turn, value: 0 }
  - name: loop
    while: !cel "steps.turn.result < 2"
    do:
      - { name: save, invoke: !ref work, inputs: { label: !cel "'turn' + string(steps.turn.result)" } }
      - { name: turn, value: !cel "steps.turn.result + 1" }
  - name: route
    switch: !cel "inputs.items[0]"
    cases:
      x: [{ name: picked, value: !cel "'x'" }]
    default: [{ name: picked, value: other }]
  - name: guarded
    try:
      - { name: boom, throw: { code: ERR_BOOM, message: !cel "'boom ' + inputs.run" } }
    catch:
      - { name: caught, value: !cel "error.code" }
    finally:
      - { name: cleanup, invoke: !ref work, inputs: { label: cleanup }, when: !cel "error == null" }
  - name: each
    invoke:
      kind: Run.Iteration
      collection: !cel "inputs.items"
      steps:
        - { name: w, invoke: !ref work, inputs: { label: !cel "item" } }
    inputs: { items: !cel "inputs.items" }
  - name: charge
    invoke: { kind: Parity.Flaky }
    inputs: { run: !cel "inputs.run" }
    retry: { attempts: 2, initialDelay: 1, jitter: none }
  - { name: total, value: !cel "steps.charge.result.attempt" }
"""


def python_steps() -> list[dict[str, Any]]:
    return [
        invoke("bill", "billing"),
        if_("size", "size(inputs.items) > 2", then=[value("note", "big")],
            elseif=[("size(inputs.items) > 1", [value("note", "medium")])], else_=[value("note", "small")]),
        value("turn", 0),
        while_("loop", "steps.turn.result < 2", do=[
            invoke("save", "work", {"label": cel("'turn' + string(steps.turn.result)")}),
            value("turn", cel("steps.turn.result + 1")),
        ]),
        switch("route", "inputs.items[0]", {"x": [value("picked", cel("'x'"))]}, default=[value("picked", "other")]),
        try_("guarded", [throw("boom", "ERR_BOOM", cel("'boom ' + inputs.run"))],
             catch=[value("caught", cel("error.code"))],
             finally_=[invoke("cleanup", "work", {"label": "cleanup"}, when="error == null")]),
        invoke("each", iteration("inputs.items", [invoke("w", "work", {"label": cel("item")})]),
               {"items": cel("inputs.items")}),
        invoke("charge", flaky, {"run": cel("inputs.run")}, retry=retry(2, initial_delay=1, jitter="none")),
        value("total", cel("steps.charge.result.attempt")),
    ]


def python_workflow() -> dict[str, Any]:
    return workflow("wf", python_steps(), run_id=cel("inputs.run"),
                    inputs={"run": cel("inputs.run"), "items": cel("inputs.items")})


def _plain(node: Any) -> Any:
    """Configuration data with positions dropped (the one thing that differs between the two forms)."""
    if isinstance(node, Cel):
        return ("cel", node.text)
    if isinstance(node, Ref):
        return ("ref", node.text, node.inline)
    if isinstance(node, Template):
        return ("template", tuple(_plain(p) for p in node.parts))
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def _entries(app: telo.App, run: str) -> list[tuple[Any, ...]]:
    return [(e.path, e.kind, e.decision, e.target, e.has_value, e.value) for e in app.journal(run)]


def test_the_python_form_writes_the_same_journal_as_the_yaml_form(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # both manifests are YAML text read "from" the cwd: the same module url
    inputs = {"run": "p-1", "items": ["x", "y", "z"]}
    _attempts.clear()
    with telo.load(COMMON + WORKFLOW_YAML, journal=str(tmp_path / "yaml.db"), clock=FakeClock()) as by_yaml:
        yaml_result = by_yaml.run("wf", inputs)
        yaml_entries = _entries(by_yaml, "p-1")
        yaml_config = by_yaml.manifest.resources["wf"].config
    _attempts.clear()
    with telo.load(COMMON, journal=str(tmp_path / "python.db"), clock=FakeClock()) as by_python:
        by_python.add(python_workflow())
        python_result = by_python.run("wf", inputs)
        python_entries = _entries(by_python, "p-1")
        python_config = by_python.manifest.resources["wf"].config

    assert yaml_result.status == python_result.status == "completed"
    assert yaml_result.value == python_result.value
    assert _plain(yaml_config) == _plain(python_config)
    assert python_entries == yaml_entries
    paths = [e[0] for e in yaml_entries]
    for expected in ("steps/bill", "steps/size/if", "steps/loop/while[2]", "steps/loop/do[1]/save",
                     "steps/route/switch", "steps/guarded/catch/caught", "steps/guarded/finally/cleanup",
                     "steps/each[2]/w", "steps/charge/@retry[0]", "steps/charge", "steps/total"):
        assert expected in paths, expected
    kinds = {e[3]["kind"] for e in yaml_entries if e[3]}
    assert {"Run.Sequence", "Run.Iteration", "Parity.Work", "Parity.Flaky"} <= kinds
    assert python_result.step("total") == 2 and python_result.step("note") == "big"


def test_the_builder_makes_what_the_yaml_reader_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from telo.manifest.reader import read_documents

    monkeypatch.chdir(tmp_path)
    docs = read_documents(COMMON + WORKFLOW_YAML, "m.yaml", tmp_path, [])
    raw = next(d.value for d in docs if isinstance(d.value, dict) and d.value.get("kind") == "Local.Workflow")
    built = python_workflow()
    assert _plain({k: v for k, v in raw.items() if k not in ("kind", "journal")}) == \
        _plain({k: v for k, v in built.items() if k != "kind"})


def test_nodes_carry_the_python_position_of_the_call() -> None:
    node = cel("inputs.x")
    assert node.pos.file == __file__ and node.pos.line > 0
    assert ref("Lib.thing") == Ref("thing", "Lib", ref("Lib.thing").pos)
    assert step("s", if_="true", then=(), else_=(value("v", (1, 2)),)) == {
        "name": "s", "if": "true", "then": [], "else": [{"name": "v", "value": [1, 2]}]}
    assert resource("Run.Sequence", "seq", steps=[])["metadata"] == {"name": "seq"}
    with pytest.raises(TypeError, match="not one step"):
        if_("x", True, then=value("v", 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="invoke target"):
        invoke("x", 42)


def test_a_compile_error_points_at_the_python_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with telo.load(COMMON, journal="memory:") as app:
        with pytest.raises(ManifestLoadError) as caught:
            app.workflow("bad", [value("v", cel("inputs.x +"))])  # the line reported
        text = "\n".join(str(d) for d in caught.value.diagnostics)
        assert f"{Path(__file__).name}:" in text
        with pytest.raises(ManifestLoadError, match="no resource is named"):
            app.workflow("dangling", [invoke("x", "nothere")])
        assert "bad" not in app.manifest.resources  # a failed add adds nothing


def test_workflows_added_after_the_app_started_run_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with telo.load(COMMON, journal="memory:") as app:
        app.workflow("first", [invoke("w", work, {"label": "a"})])
        assert app.run("first").step("w")["did"] == "a"
        app.workflow("second", [value("v", cel("inputs.n * 2"))], run_id=cel("'second:' + string(inputs.n)"),
                     inputs={"n": cel("inputs.n")})  # a workflow's body sees only its declared inputs
        result = app.run("second", {"n": 21})
        assert result.run_id == "second:21" and result.step("v") == 42
