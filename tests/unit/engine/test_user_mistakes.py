"""A manifest's mistake is reported with a code that names it, never as INTERNAL_ERROR (a bug in telo)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from telo.engine.context import derive, entered, root
from telo.engine.interpreter import Services, error_shape, run_steps
from telo.engine.steps import compile_steps
from telo.errors import TeloError
from tests.unit.engine.fakes import DictCompiler


def run(raw: list[dict[str, Any]]) -> dict[str, Any]:
    steps = compile_steps(raw, DictCompiler(), where="test")
    scope: dict[str, Any] = {"inputs": {}, "steps": {}}

    async def go() -> None:
        with entered(derive(root(), handle=None, path=None)):
            await run_steps(steps, scope, Services())

    asyncio.run(go())
    return scope


def test_a_switch_with_no_matching_case_and_no_default_is_err_no_match() -> None:
    with pytest.raises(TeloError) as caught:
        run([{"name": "route", "switch": lambda s: "cash", "cases": {"card": []}}])
    err = caught.value
    assert err.code == "ERR_NO_MATCH"  # as Run.Choice with no match and no default
    assert err.data == {"step": "route", "key": "cash"} and err.hint == "add a `default:` branch"
    shape = error_shape(err, "route")  # what a catch sees
    assert shape["code"] == "ERR_NO_MATCH" and type(shape["code"]) is str


def test_what_a_catch_sees_of_a_code_is_an_exact_string() -> None:
    """error.code reaches a CEL scope (and, in a durable run, the journal): exact str, never a Code member."""
    scope = run([{"name": "t", "try": [{"name": "sw", "switch": lambda s: 1, "cases": {}}],
                  "catch": [{"name": "seen", "value": lambda s: s["error"]["code"]}]}])
    seen = scope["steps"]["seen"]["result"]
    assert seen == "ERR_NO_MATCH" and type(seen) is str
