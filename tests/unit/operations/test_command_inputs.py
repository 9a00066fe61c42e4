"""``--input k=v`` is text unless the input it lands in declares a type (telo.operations.command_inputs; issue 15).

The earlier rule read every value as JSON when it parsed as JSON: ``--input id=007`` started run ``7`` and
``--input version=1.10`` the number ``1.1``. The manifests here are loaded for real; typing is read off the
targets and the workflow's ``inputType``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from telo.errors import Code, TeloError
from telo.kinds.controllers import load_application
from telo.operations.command_inputs import command_inputs, target_typing, workflow_typing

MANIFEST = """\
kind: Telo.Application
metadata: {{ name: Typed }}
imports: {{ Local: durable-local, Journal: durable-journal-sqlite }}
targets:
{targets}
---
kind: Journal.Journal
metadata: {{ name: runs }}
path: ./runs.db
---
kind: Telo.JsonSchema
metadata: {{ name: OrderIn }}
schema:
  type: object
  properties:
    id: {{ type: string }}
    qty: {{ type: integer }}
    express: {{ type: boolean }}
    price: {{ type: number }}
    tags: {{ type: array }}
    meta: {{ type: [object, "null"] }}
    note: {{ type: [integer, string] }}
---
kind: Local.Workflow
metadata: {{ name: order }}
journal: !ref runs
inputType: !ref OrderIn
steps:
  - {{ name: echo, value: !cel "inputs" }}
---
kind: Local.Workflow
metadata: {{ name: untyped }}
journal: !ref runs
steps:
  - {{ name: echo, value: !cel "inputs" }}
"""


def _app(tmp_path: Path, targets: str) -> Any:
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST.format(targets=targets))
    return load_application(str(path))


def test_text_stays_text_unless_a_type_is_declared(tmp_path: Path) -> None:
    app = _app(tmp_path, "  - { invoke: !ref untyped, inputs: !cel \"inputs\" }")
    typing = target_typing(app)
    assert typing == {}
    got = command_inputs(["id=007", "gate=true", "version=1.10", "empty=", "eq=a=b"], [], typing)
    assert got == {"id": "007", "gate": "true", "version": "1.10", "empty": "", "eq": "a=b"}


def test_each_declared_type_converts_as_manifest_variables_do(tmp_path: Path) -> None:
    app = _app(tmp_path, "  - { invoke: !ref order, inputs: !cel \"inputs\" }")
    got = command_inputs(["id=007", "qty=-3", "express=false", "price=2.50", "tags=[1, \"a\"]",
                          "meta=null", "note=12", "other=5"], [], target_typing(app))
    assert got == {"id": "007", "qty": -3, "express": False, "price": 2.5, "tags": [1, "a"], "meta": None,
                   "note": 12, "other": "5"}
    assert command_inputs(["meta={\"a\": 1}", "note=twelve"], [], target_typing(app)) == {
        "meta": {"a": 1}, "note": "twelve"}  # a union tries its non-string members first


@pytest.mark.parametrize(("pair", "wanted"), [("qty=1.5", "integer"), ("qty=ten", "integer"),
                                              ("express=yes", "boolean"), ("price=cheap", "number"),
                                              ("tags={}", "array"), ("meta=[1]", "object or null")])
def test_text_that_fits_no_declared_type_is_a_usage_error(tmp_path: Path, pair: str, wanted: str) -> None:
    app = _app(tmp_path, "  - { invoke: !ref order, inputs: !cel \"inputs\" }")
    with pytest.raises(TeloError) as err:
        command_inputs([pair], [], target_typing(app))
    key = pair.partition("=")[0]
    assert err.value.code == Code.INPUT_INVALID
    assert f"order's inputType declares {key!r} as {wanted}" in err.value.message
    assert err.value.hint is not None and f"--input-json {key}=" in err.value.hint


@pytest.mark.parametrize("mapping", [
    '{ id: !cel "inputs.id", qty: !cel "inputs.qty", express: !cel "inputs[\'speedy\']" }',
    '{ id: !cel " inputs . id ", qty: !cel "inputs.qty", express: !cel "inputs[\\"speedy\\"]" }',
])
def test_an_input_passed_straight_through_is_typed_by_its_parameter(tmp_path: Path, mapping: str) -> None:
    app = _app(tmp_path, f"  - {{ invoke: !ref order, inputs: {mapping} }}")
    got = command_inputs(["id=1", "qty=2", "speedy=true"], [], target_typing(app))
    assert got == {"id": "1", "qty": 2, "speedy": True}


def test_an_input_that_feeds_a_computed_expression_stays_text(tmp_path: Path) -> None:
    app = _app(tmp_path, '  - { invoke: !ref order, inputs: { qty: !cel "has(inputs.qty) ? inputs.qty : 1" } }')
    assert command_inputs(["qty=2"], [], target_typing(app)) == {"qty": "2"}


def test_schedule_types_by_the_named_workflow(tmp_path: Path) -> None:
    app = _app(tmp_path, "  - { invoke: !ref untyped, inputs: !cel \"inputs\" }")
    assert command_inputs(["qty=2"], [], workflow_typing(app, "order")) == {"qty": 2}
    assert command_inputs(["qty=2"], [], workflow_typing(app, "untyped")) == {"qty": "2"}


def test_input_json_is_always_json_and_wins_over_input(tmp_path: Path) -> None:
    got = command_inputs(["n=1", "id=x"], ["n=[1, {\"a\": true}]", "flag=true"], {})
    assert got == {"n": [1, {"a": True}], "id": "x", "flag": True}
    with pytest.raises(TeloError) as err:
        command_inputs([], ["n=not json"], {})
    assert err.value.code == Code.INPUT_INVALID and "--input-json n: not JSON" in err.value.message
    with pytest.raises(TeloError) as err:
        command_inputs(["novalue"], [], {})
    assert err.value.code == Code.INPUT_INVALID and "'novalue' is not KEY=VALUE" in err.value.message
