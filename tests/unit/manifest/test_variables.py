"""variables/secrets: env, coercion, defaults, JSON-Schema constraints, missing values (reference §1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from telo.manifest import Diagnostic, Manifest

from .conftest import locate

DECL = """
kind: Telo.Application
metadata: {name: V}
variables:
  host: {env: HOST, type: string, default: localhost}
  port: {env: PORT, type: integer, default: 8080, minimum: 1, maximum: 65535}
  ratio: {env: RATIO, type: number, default: 0.5}
  debug: {env: DEBUG, type: boolean, default: false}
  tags: {env: TAGS, type: array, default: [], items: {type: string}}
  limits: {env: LIMITS, type: object, default: {cpu: 1}}
  dir: {env: DIR, type: string, default: /tmp, x-telo-type: Telo.HostPath, description: where}
secrets:
  token: {env: TOKEN, type: string, default: dev, minLength: 3}
"""


def test_defaults(load: Callable[..., Manifest]) -> None:
    app = load(DECL).application
    assert app.variables == {"host": "localhost", "port": 8080, "ratio": 0.5, "debug": False, "tags": [],
                             "limits": {"cpu": 1}, "dir": "/tmp"}
    assert app.secrets == {"token": "dev"}
    assert app.declared_variables["token"].secret and app.declared_variables["port"].env == "PORT"


@pytest.mark.parametrize(
    ("name", "env", "value"),
    [
        ("port", {"PORT": "9000"}, 9000),
        ("port", {"PORT": "0042"}, 42),
        ("ratio", {"RATIO": "2"}, 2),
        ("ratio", {"RATIO": "1.25e1"}, 12.5),
        ("debug", {"DEBUG": "true"}, True),
        ("debug", {"DEBUG": "false"}, False),
        ("tags", {"TAGS": '["a", "b"]'}, ["a", "b"]),
        ("limits", {"LIMITS": '{"cpu": 2, "mem": "1G"}'}, {"cpu": 2, "mem": "1G"}),
        ("host", {"HOST": "  spaced "}, "  spaced "),
    ],
)
def test_env_values_are_coerced(load: Callable[..., Manifest], name: str, env: dict[str, str], value: Any) -> None:
    got = load(DECL, env=env).application.variables[name]
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"PORT": "80.5"}, "PORT = '80.5' is not a valid integer"),
        ({"PORT": "0x10"}, "is not a valid integer"),
        ({"PORT": "70000"}, "65535"),  # the JSON-Schema constraint
        ({"DEBUG": "yes"}, "is not a valid boolean"),
        ({"DEBUG": "1"}, "is not a valid boolean"),
        ({"TAGS": "a,b"}, "is not a valid array"),
        ({"TAGS": '{"a": 1}'}, "is not a valid array"),
        ({"TAGS": "[1]"}, "is not of type 'string'"),
        ({"LIMITS": "[]"}, "is not a valid object"),
        ({"RATIO": "half"}, "is not a valid number"),
    ],
)
def test_bad_env_values(fail: Callable[..., list[Diagnostic]], env: dict[str, str], fragment: str) -> None:
    [d] = fail(DECL, env=env)
    assert d.code == "ERR_MANIFEST_VALIDATION_FAILED" and fragment in d.message


def test_secret_values_never_appear_in_messages(fail: Callable[..., list[Diagnostic]]) -> None:
    [d] = fail(DECL, env={"TOKEN": "xy"})  # too short
    assert "xy" not in d.message and "token" in d.message


def test_missing_values_are_all_reported_at_their_declarations(fail: Callable[..., list[Diagnostic]]) -> None:
    text = (
        "kind: Telo.Application\nmetadata: {name: V}\nvariables:\n"
        "  a: {env: A, type: string}\n  b: {env: B, type: integer}\n  c: {type: string}\n"
        "secrets:\n  s: {env: S, type: string}\n"
    )
    diags = fail(text)
    assert [(d.code, d.pos.line, d.pos.column) for d in diags if d.pos] == [
        ("ERR_MANIFEST_VALIDATION_FAILED", *locate(text, "{env: A")),
        ("ERR_MANIFEST_VALIDATION_FAILED", *locate(text, "{env: B")),
        ("ERR_MANIFEST_VALIDATION_FAILED", *locate(text, "{type: string}")),
        ("ERR_MANIFEST_VALIDATION_FAILED", *locate(text, "{env: S")),
    ]
    assert "environment variable A is not set and there is no default" in diags[0].message
    assert "it has no `env`" in diags[2].message


def test_bad_declarations(fail: Callable[..., list[Diagnostic]]) -> None:
    text = (
        "kind: Telo.Application\nmetadata: {name: V}\nvariables:\n"
        "  bad-name: {env: A, default: x}\n  t: {env: T, type: text, default: x}\n  n: 5\n"
        "  d: {type: integer, default: '3'}\n  e: {default: !cel '1'}\n"
    )
    codes = [d.code for d in fail(text)]
    assert codes == ["ERR_MANIFEST_INVALID_NAME"] + ["ERR_MANIFEST_VALIDATION_FAILED"] * 4


def test_a_reference_outside_a_variables_declaration_is_refused_not_fetched(
        fail: Callable[..., list[Diagnostic]]) -> None:
    [d] = fail("kind: Telo.Application\nmetadata: {name: V}\nvariables:\n"
               "  host: {env: HOST, type: string, default: x, $ref: 'https://schemas.invalid/host.json'}\n")
    assert d.code == "ERR_MANIFEST_VALIDATION_FAILED"
    assert "https://schemas.invalid/host.json" in d.message and "nothing is fetched" in d.message
