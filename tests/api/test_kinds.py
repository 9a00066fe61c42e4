"""@telo.kind: Python functions as manifest kinds — registration, contracts, context, effect policy."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

import pytest

import telo
from telo.api.kinds import definition_of, schema_of_type
from telo.manifest import ManifestLoadError
from telo.specs import BUILTIN_KINDS, BUILTIN_MODULES


class ChargeIn(TypedDict):
    order: str
    amount: float
    note: NotRequired[str]


class ChargeOut(TypedDict):
    receipt: str
    key: str | None


def find_charge(key: str) -> Any:
    return {"receipt": f"found {key}", "key": key} if key.endswith("/steps/charge") else telo.NOT_FOUND


@telo.kind("KindsT.Charge", key_consuming=True, lookup=find_charge)
def charge(inputs: ChargeIn, ctx: telo.StepContext) -> ChargeOut:
    return {"receipt": f"rcpt-{inputs['order']}", "key": ctx.idempotency_key}


@telo.kind("KindsT.Email", inputs={"type": "object", "required": ["to"]}, outputs=str)
async def email(inputs: dict[str, Any]) -> Any:
    await asyncio.sleep(0)
    return f"sent to {inputs['to']}" if inputs["to"] != "nobody" else 42


@telo.kind("KindsT.Plain")
def plain(inputs: Any) -> Any:
    return {"echo": inputs}


MANIFEST = """\
kind: Telo.Application
metadata: { name: KindsTests }
imports: { K: KindsT, Local: durable-local, Journal: durable-journal-sqlite }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: K.Charge
metadata: { name: chargeCard }
---
kind: K.Email
metadata: { name: email }
---
kind: K.Plain
metadata: { name: careful }
onUnconfirmed: fail
---
kind: Local.Workflow
metadata: { name: order }
journal: !ref runs
runId: !cel "'order:' + inputs.order"
inputs: { order: !cel "inputs.order", amount: !cel "inputs.amount", to: !cel "inputs.to" }
steps:
  - { name: charge, invoke: !ref chargeCard, inputs: { order: !cel "inputs.order", amount: !cel "inputs.amount" } }
  - { name: mail, invoke: !ref email, inputs: { to: !cel "inputs.to" } }
  - { name: inline, invoke: { kind: K.Plain }, inputs: { x: 1 } }
"""


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_a_decorated_function_is_a_kind_a_manifest_imports() -> None:
    with telo.load(MANIFEST, journal="memory:") as app:
        result = app.run("order", {"order": "A-1", "amount": 9.5, "to": "ada@example.com"})
        assert result.ok, result.error
        assert result.step("charge") == {"receipt": "rcpt-A-1", "key": "order:A-1/steps/charge"}
        assert result.step("mail") == "sent to ada@example.com"
        assert result.step("inline") == {"echo": {"x": 1}}
        targets = {e.path: e.target for e in app.journal("order:A-1") if e.kind == "step"}
        assert targets["steps/charge"] is not None and targets["steps/charge"]["kind"] == "KindsT.Charge"
    assert charge({"order": "B", "amount": 1.0}, telo.StepContext(None, None, 1, None))["receipt"] == "rcpt-B"


def test_contracts_are_checked_at_dispatch() -> None:
    with telo.load(MANIFEST, journal="memory:") as app:
        wrong_amount = app.run("order", {"order": "A-2", "amount": "lots", "to": "x"})
        assert wrong_amount.error is not None and wrong_amount.error.code == "ERR_INPUT_INVALID"
        wrong_output = app.run("order", {"order": "A-3", "amount": 1.0, "to": "nobody"})
        assert wrong_output.error is not None and wrong_output.error.code == "ERR_OUTPUT_INVALID"


def test_contracts_come_from_the_annotations() -> None:
    d = definition_of(charge)
    assert d is not None and d.canonical == "KindsT.Charge"
    assert d.inputs == {"type": "object", "required": ["amount", "order"], "properties": {
        "order": {"type": "string"}, "amount": {"type": "number"}, "note": {"type": "string"}}}
    assert d.outputs == {"type": "object", "required": ["key", "receipt"], "properties": {
        "receipt": {"type": "string"}, "key": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}
    plain_def = definition_of(plain)
    assert plain_def is not None and plain_def.inputs is None and plain_def.outputs is None  # Any: no contract
    email_def = definition_of(email)
    assert email_def is not None and email_def.outputs == {"type": "string"}


def test_schema_of_type_covers_the_simple_types() -> None:
    assert schema_of_type(bool) == {"type": "boolean"}
    assert schema_of_type(int) == {"type": "integer"}
    assert schema_of_type(list[int]) == {"type": "array", "items": {"type": "integer"}}
    assert schema_of_type(dict[str, float]) == {"type": "object", "additionalProperties": {"type": "number"}}
    assert schema_of_type(Literal["a", "b"]) == {"enum": ["a", "b"]}
    assert schema_of_type(int | None) == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert schema_of_type(Any) == {}
    with pytest.raises(TypeError):
        schema_of_type(dict[int, str])
    with pytest.raises(TypeError):
        schema_of_type(Path)
    with pytest.raises(TypeError, match="JSON schema dict"):
        telo.kind("KindsT.Bad", inputs=Path)(plain)


def test_the_effect_policy_follows_the_declaration() -> None:
    with telo.load(MANIFEST, journal="memory:") as app:
        app.run("order", {"order": "P-1", "amount": 1.0, "to": "x"})  # starts the app: resources exist
        resources = app.application.resources
        charge_policy = resources["chargeCard"].effect_policy()  # type: ignore[attr-defined]
        assert charge_policy.mode == "redrive" and charge_policy.lookup is not None
        assert asyncio.run(charge_policy.lookup("r/steps/charge")) == {"receipt": "found r/steps/charge",
                                                                       "key": "r/steps/charge"}
        assert asyncio.run(charge_policy.lookup("r/steps/other")) is telo.NOT_FOUND
        assert resources["email"].effect_policy().mode == "park"  # type: ignore[attr-defined]
        assert resources["careful"].effect_policy().mode == "fail"  # type: ignore[attr-defined]


def test_registration_joins_the_loader_tables_and_refuses_built_in_names() -> None:
    assert "KindsT" in BUILTIN_MODULES and "KindsT.Charge" in BUILTIN_KINDS
    with pytest.raises(ValueError, match="built-in"):
        telo.kind("Run.Mine")(plain)
    with pytest.raises(ValueError, match="built-in"):
        telo.kind("Telo.Mine")(plain)
    with pytest.raises(ValueError, match=r"Module\.Kind"):
        telo.kind("nodot")(plain)
    with pytest.raises(ValueError, match="on_unconfirmed"):
        telo.kind("KindsT.X", on_unconfirmed="maybe")


def test_re_registering_a_kind_replaces_it() -> None:
    @telo.kind("KindsT2.Thing")
    def first(inputs: Any) -> str:
        return "first"

    @telo.kind("KindsT2.Thing")
    def second(inputs: Any) -> str:
        return "second"

    @telo.kind("KindsT2.Other")
    def other(inputs: Any) -> str:
        return "other"

    manifest = MANIFEST.replace("imports: {", "imports: { T2: KindsT2,") + (
        "---\nkind: T2.Thing\nmetadata: { name: thing }\n---\nkind: T2.Other\nmetadata: { name: other }\n")
    with telo.load(manifest, journal="memory:") as app:
        from telo.builder import invoke

        app.workflow("w", [invoke("a", "thing"), invoke("b", "other")])
        result = app.run("w")
    assert (result.step("a"), result.step("b")) == ("second", "other")


def test_an_unknown_kind_is_a_load_error() -> None:
    with pytest.raises(ManifestLoadError, match="no kind 'Nope'"):
        telo.load(MANIFEST + "---\nkind: K.Nope\nmetadata: { name: n }\n")
