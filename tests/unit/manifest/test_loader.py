"""Loading a realistic manifest: resources, kinds, inline targets, positions, targets (reference §1, §3)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

from telo.manifest import Cel, Diagnostic, Manifest, Pos, Ref, Template, check_manifest, load_manifest
from telo.targets import file_url

from .conftest import HEADER, locate

ORDERS = HEADER + """\
variables:
  journalDir: {env: ORDERS_JOURNAL, type: string, default: ./.telo/journal, x-telo-type: Telo.HostPath}
  retries: {env: ORDERS_RETRIES, type: integer, default: 3, minimum: 0}
secrets:
  apiKey: {env: ORDERS_API_KEY, type: string}
targets:
  - !ref test
  - {ref: resumer, when: !cel "variables.retries > 0"}
  - name: report
    invoke: {kind: Local.Status, journal: !ref runs}
    inputs: {run: "order:1"}
  - invoke: !ref announce
    inputs: {output: done}
---
kind: Journal.Journal
metadata: {name: runs}
directory: !cel "variables.journalDir"
---
kind: Py.Function
metadata: {name: chargeCard}
function: shop.payments:charge
inputType: {kind: Telo.JsonSchema, schema: {type: object, required: [order]}}
idempotent: true
---
kind: Console.WriteLine
metadata: {name: announce}
---
kind: Durable.Await
metadata: {name: approval}
token: !cel "'approve:' + inputs.order"
timeout: 1h
---
kind: Local.Workflow
metadata: {name: order}
journal: !ref runs
runId: !cel "'order:' + inputs.order"
inputs: {order: !cel "inputs.order"}
steps:
  - name: charge
    invoke: !ref chargeCard
    inputs: {order: !cel "inputs.order"}
    retry: {attempts: 3, initialDelay: 100, jitter: none, nonRetryable: [ERR_CARD_DECLINED]}
    timeout: 5000
  - name: check
    if: !cel "steps.charge.result.ok"
    then:
      - name: note
        invoke: {kind: Console.WriteLine}
        inputs: {output: "charged ${{ inputs.order }}"}
    elseif:
      - if: !cel "steps.charge.result.retry"
        then:
          - name: wait
            invoke: {kind: Durable.Sleep, for: 10m}
    else:
      - name: fail
        throw: {code: ERR_CHARGE, message: !cel "'declined: ' + inputs.order"}
  - name: poll
    while: !cel "!has(steps.status) || steps.status.result.status != 'done'"
    maxIterations: 5
    do:
      - name: status
        invoke: {kind: Local.Status, journal: !ref runs}
        inputs: {run: !cel "inputs.order"}
  - name: route
    switch: !cel "inputs.region"
    cases:
      eu:
        - name: ship
          invoke: {kind: Timer.Delay}
          inputs: {duration: 10ms}
      us: []
    default:
      - name: ship
        value: none
  - name: guarded
    try:
      - name: approve
        invoke: !ref approval
    catch:
      - name: recover
        value: !cel "error.code"
    finally:
      - name: log
        invoke: {kind: Console.WriteLine, metadata: {name: finalLog}}
        inputs: {output: finished}
  - name: bulk
    invoke: {kind: Durable.Idempotent, reason: "writes are upserts", steps: [{name: upsert, value: 1}]}
---
kind: Local.Resumer
metadata: {name: resumer}
workflow: !ref order
interval: 1s
---
kind: Run.Sequence
metadata: {name: test}
with:
  - kind: Local.Resumer
    metadata: {name: scopedResumer}
    workflow: !ref order
targets: [!ref scopedResumer]
steps:
  - name: begin
    invoke: !ref order
    inputs: {order: "1", region: eu}
  - name: start
    invoke: {kind: Local.Result, journal: !ref runs, wait: 15s}
    inputs: {run: !cel "steps.begin.result.runId"}
  - name: check
    invoke: {kind: Assert.Equals}
    inputs: {actual: !cel "steps.start.result.status", expected: completed}
"""


def _orders(write: Callable[..., Path]) -> tuple[Manifest, str, Path]:
    path = write(ORDERS, "orders.yaml")
    text = path.read_text()
    return load_manifest(path, env={"ORDERS_API_KEY": "s3cret"}), text, path


def test_application(write: Callable[..., Path]) -> None:
    m, _, path = _orders(write)
    app = m.application
    assert (app.name, app.kind, app.version) == ("T", "Telo.Application", None)
    assert {a: i.canonical for a, i in app.imports.items()}["Local"] == "DurableLocal"
    assert app.variables == {"journalDir": "./.telo/journal", "retries": 3}
    assert app.secrets == {"apiKey": "s3cret"}
    assert m.module == file_url(path) and m.module.startswith("file:///")  # Node's spelling (docs/compat.md)
    assert m.diagnostics == []


def test_resources_have_canonical_kinds_and_configs(write: Callable[..., Path]) -> None:
    m, _, _ = _orders(write)
    order = m.resources["order"]
    assert (order.alias_kind, order.kind, order.spec.canonical) == ("Local.Workflow", "DurableLocal.Workflow",
                                                                    "DurableLocal.Workflow")
    assert order.config["journal"] == Ref("runs", None, order.config["journal"].pos)
    assert isinstance(order.config["runId"], Cel)
    assert order.config["steps"][0]["retry"]["attempts"] == 3
    assert m.resolve(order.config["journal"]).kind == "DurableJournalFile.Journal"
    assert m.kind("Local.Workflow") is m.kind("DurableLocal.Workflow") is order.spec
    assert all(r.module == m.module for r in m.resources.values())


def test_inline_targets_are_named_per_spec_5_3(write: Callable[..., Path]) -> None:
    m, _, _ = _orders(write)
    steps = m.resources["order"].config["steps"]
    names = {
        "WorkflowOrderSteps1Then0Note": steps[1]["then"][0]["invoke"],
        "WorkflowOrderSteps1Elseif0Then0Wait": steps[1]["elseif"][0]["then"][0]["invoke"],
        "WorkflowOrderSteps2Do0Status": steps[2]["do"][0]["invoke"],
        "WorkflowOrderSteps3CasesEu0Ship": steps[3]["cases"]["eu"][0]["invoke"],
        "finalLog": steps[4]["finally"][0]["invoke"],  # its own metadata.name wins
        "WorkflowOrderSteps5Bulk": steps[5]["invoke"],
        "SequenceTestSteps1Start": m.resources["test"].config["steps"][1]["invoke"],
        "SequenceTestSteps2Check": m.resources["test"].config["steps"][2]["invoke"],
        # Inline declarations elsewhere are named from the owner and the pointer.
        "FunctionChargeCardInputType": m.resources["chargeCard"].config["inputType"],
        "ApplicationTTargets2Report": m.application.targets[2].ref,
    }
    for name, ref in names.items():
        assert isinstance(ref, Ref) and ref.inline and ref.name == name, name
        assert name in m.resources
    start = m.resources["SequenceTestSteps1Start"]
    assert (start.kind, start.owner, start.pointer) == ("DurableLocal.Result", "test", "/steps/1/invoke")
    assert start.config == {"journal": Ref("runs", None, start.config["journal"].pos), "wait": "15s"}
    nested = m.resources["WorkflowOrderSteps5Bulk"].config["steps"][0]
    assert nested == {"name": "upsert", "value": 1}
    assert {r.name for r in m.inline_resources("order")} >= {"WorkflowOrderSteps1Then0Note", "finalLog"}


def test_with_scope_resources_belong_to_their_owner(write: Callable[..., Path]) -> None:
    m, _, _ = _orders(write)
    test = m.resources["test"]
    assert set(test.scoped) == {"scopedResumer"}
    assert "scopedResumer" not in m.resources
    assert test.scoped["scopedResumer"].owner == "test"
    assert test.config["targets"][0] == Ref("scopedResumer", None, test.config["targets"][0].pos)


def test_targets_forms(write: Callable[..., Path]) -> None:
    m, text, path = _orders(write)
    t = m.application.targets
    assert [(x.name, x.form, x.index) for x in t] == [
        ("test", "ref", 0), ("resumer", "ref", 1), ("report", "invoke", 2), ("Target3", "invoke", 3)]
    assert isinstance(t[1].when, Cel) and t[1].when.text == "variables.retries > 0"
    assert t[3].step is not None and t[3].step["name"] == "Target3" and t[3].ref == Ref(
        "announce", None, t[3].ref.pos if t[3].ref else Pos("", 0, 0))
    assert t[0].pos == Pos(str(path), *locate(text, "!ref test"))


def test_positions_are_exact(write: Callable[..., Path]) -> None:
    m, text, path = _orders(write)
    file = str(path)
    order = m.resources["order"]
    assert order.pos == Pos(file, *locate(text, "kind: Local.Workflow"))
    assert m.position("order", "/steps/0/retry/attempts") == Pos(file, *locate(text, "3, initialDelay"))
    assert m.position(order, "/steps/1/then/0/inputs/output") == Pos(file, *locate(text, '"charged'))
    assert order.key_position("/steps/0/timeout") == Pos(file, *locate(text, "timeout: 5000"))
    tmpl = order.config["steps"][1]["then"][0]["inputs"]["output"]
    assert isinstance(tmpl, Template) and tmpl.expressions[0].pos == Pos(file, *locate(text, "inputs.order }}"))
    # An inline resource's positions are relative to its own declaration.
    inline = m.resources["SequenceTestSteps1Start"]
    assert inline.pos == Pos(file, *locate(text, "{kind: Local.Result, journal: !ref runs, wait"))
    assert inline.position("/wait") == Pos(file, *locate(text, "15s"))
    cel = order.config["runId"]
    assert cel.pos == Pos(file, *locate(text, "!cel \"'order:'"))
    assert cel.locate(1, 12) == Pos(file, *locate(text, "inputs.order\"\ninputs"))


def test_literal_position_numbers(load: Callable[..., Manifest]) -> None:
    m = load(
        """
        kind: Telo.Application
        metadata: {name: P}
        imports: {Run: run}
        ---
        kind: Run.Sequence
        metadata: {name: s}
        steps:
          - name: a
            value: !cel "1 + 2"
        """
    )
    s = m.resources["s"]
    assert (s.pos.line, s.pos.column) == (5, 1)
    assert s.position("/steps/0/value") == Pos(s.pos.file, 9, 12)
    assert s.config["steps"][0]["value"].locate(1, 5) == Pos(s.pos.file, 9, 22)
    assert s.key_position("/steps/0/name") == Pos(s.pos.file, 8, 5)


def test_yaml_ints_are_ints_and_timestamps_stay_strings(load: Callable[..., Manifest]) -> None:
    m = load(
        """
        kind: Telo.Application
        metadata: {name: P}
        imports: {Run: run}
        ---
        kind: Run.Value
        metadata: {name: v}
        value: {n: 3, x: 1.0, at: 2026-05-01T10:00:00Z, day: 2026-05-01}
        """
    )
    value = m.resources["v"].config["value"]
    assert type(value["n"]) is int and type(value["x"]) is float
    assert value["at"] == "2026-05-01T10:00:00Z" and value["day"] == "2026-05-01"


def test_text_argument_overrides_the_file(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """
        kind: Telo.Application
        metadata: {name: Inline, version: 2}
        """
    )
    m = load_manifest(tmp_path / "virtual.yaml", text=text, env={})
    assert m.application.name == "Inline" and m.application.version == "2"
    assert m.source == str(tmp_path / "virtual.yaml")


def test_check_manifest_returns_diagnostics_without_raising(write: Callable[..., Path]) -> None:
    path = write(ORDERS, "orders.yaml")
    assert check_manifest(path, env={"ORDERS_API_KEY": "x"}) == []
    diags = check_manifest(path, env={})
    assert [d.code for d in diags] == ["ERR_MANIFEST_VALIDATION_FAILED"]
    assert "apiKey" in diags[0].message
    assert check_manifest(path.parent / "missing.yaml")[0].code == "ERR_MANIFEST_NOT_FOUND"


def test_duplicate_step_names_warn_in_a_sequence(load: Callable[..., Manifest]) -> None:
    """Upstream lets a later sibling's result overwrite an earlier one's outside a durable run (reference
    scenario tests/manifests/steps/value_steps.yaml); the interpreter refuses such a list inside one."""
    m = load(
        """
        kind: Telo.Application
        metadata: {name: P}
        imports: {Run: run}
        ---
        kind: Run.Sequence
        metadata: {name: s}
        steps:
          - {name: a, value: 1}
          - {name: a, value: 2}
        """
    )
    assert [(d.code, d.severity) for d in m.diagnostics] == [("DUPLICATE_STEP_NAME", "warning")]


def test_duplicate_step_names_in_a_durable_workflow_are_a_load_error(fail: Callable[..., list[Diagnostic]]) -> None:
    """Observed (issue 12, case 8): two `pay` steps loaded and ran; the second never executed — it replayed the
    first's receipt. Only `telo check` warned."""
    errors = fail(
        """
        kind: Telo.Application
        metadata: {name: P}
        imports: {Local: durable-local, Journal: durable-journal-sqlite}
        ---
        kind: Journal.Journal
        metadata: {name: runs}
        path: runs.db
        ---
        kind: Local.Workflow
        metadata: {name: w}
        journal: !ref runs
        steps:
          - {name: pay, value: 1}
          - try:
              - {name: x, value: 1}
              - {name: x, value: 2}
            name: guarded
        """
    )
    assert [(d.code, d.severity) for d in errors] == [("ERR_DUPLICATE_STEP_NAME", "error")]
    assert "'x'" in errors[0].message and errors[0].pos is not None and errors[0].pos.line == 16


def test_cel_checker_hook_sees_every_expression_with_its_scope(write: Callable[..., Path]) -> None:
    seen: dict[str, tuple[str, tuple[str, ...], str | None, str]] = {}

    def checker(cel: Cel, scope: object) -> None:
        from telo.manifest import CelScope

        assert isinstance(scope, CelScope)
        seen[cel.text] = (scope.mode, scope.names, scope.resource, scope.pointer)
        return None

    load_manifest(write(ORDERS, "orders.yaml"), env={"ORDERS_API_KEY": "x"}, cel_checker=checker)
    assert seen["variables.journalDir"] == ("compile", (), "runs", "/directory")
    assert seen["'order:' + inputs.order"] == ("runtime", ("inputs",), "order", "/runId")
    assert seen["steps.charge.result.ok"] == ("step", ("inputs", "steps"), "order", "/steps/1/if")
    assert seen["error.code"] == ("step", ("inputs", "steps", "error"), "order", "/steps/4/catch/0/value")
    assert seen["inputs.order }}"[:12]][0] == "step"  # the legacy ${{ }} inside a template too
    assert seen["variables.retries > 0"][0] == "target"
    assert seen["'approve:' + inputs.order"] == ("runtime", ("inputs",), "approval", "/token")


def test_cel_checker_diagnostics_fail_the_load(write: Callable[..., Path]) -> None:
    from telo.manifest import Diagnostic, ManifestLoadError

    def checker(cel: Cel, scope: object) -> Diagnostic | None:
        if "region" in cel.text:
            return Diagnostic("ERR_MANIFEST_CEL", "undeclared reference to 'region'", cel.locate(1, 8))
        return None

    path = write(ORDERS, "orders.yaml")
    try:
        load_manifest(path, env={"ORDERS_API_KEY": "x"}, cel_checker=checker)
    except ManifestLoadError as exc:
        [d] = exc.diagnostics
        assert d.pos == Pos(str(path), *locate(path.read_text(), "region\""))
    else:
        raise AssertionError("expected a load error")
