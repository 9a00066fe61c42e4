"""Every load error is reported with its position, and all of them together (reference §1, §3)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from telo.manifest import Diagnostic, ManifestLoadError, load_manifest

from .conftest import HEADER, locate

Fail = Callable[..., list[Diagnostic]]


def at(text: str, needle: str, nth: int = 0) -> tuple[int, int]:
    return locate(text, needle, nth)


def found(diags: list[Diagnostic]) -> list[tuple[str, int, int]]:
    return [(d.code, d.pos.line, d.pos.column) for d in diags if d.pos]


BROKEN = """\
kind: Telo.Application
metadata: {name: T}
imports:
  Run: run
  Local: durable-local
  Durable: durable
  Nope: no-such-module
  bad-alias: run
variables:
  port: {env: PORT, type: integer}
targets: [!ref missingTarget]
---
kind: Run.Sequence
metadata: {name: test}
bogus: 1
steps:
  - name: a
    invoke: !ref ghost
  - name: b-c
    value: 1
  - invoke: plainString
  - name: d
    invoke: !ref test
    if: !cel "true"
  - name: e
    retry: {attempts: -1, jitter: some}
    invoke: !ref test
  - name: f
    when: "yes"
    value: 1
  - name: g
---
kind: Run.Sequence
metadata: {name: test}
steps: []
---
kind: Foo.Bar
metadata: {name: x}
---
kind: Local.Nothing
metadata: {name: y}
---
kind: Run.Value
metadata: {name: bad-name}
value: 1
---
kind: Local.Schedule
metadata: {name: sched}
workflow: !ref test
after: 5s
at: 1
---
kind: Durable.Sleep
metadata: {name: nap}
---
kind: Local.Workflow
metadata: {name: wf}
steps:
  - name: x
    invoke: !ref Lib.thing
"""

EXPECTED = [
    ("ERR_MANIFEST_UNKNOWN_MODULE", "no-such-module"),
    ("ERR_MANIFEST_INVALID_NAME", "bad-alias"),
    ("ERR_MANIFEST_VALIDATION_FAILED", "{env: PORT"),  # variable without value or default
    ("ERR_MANIFEST_UNKNOWN_RESOURCE", "!ref missingTarget"),
    ("ERR_MANIFEST_VALIDATION_FAILED", "bogus"),  # unknown field, at its key
    ("ERR_MANIFEST_UNKNOWN_RESOURCE", "!ref ghost"),
    ("ERR_INVALID_STEP_NAME", "b-c"),
    ("ERR_STEP_NAME_REQUIRED", "invoke: plainString"),
    ("ERR_MANIFEST_BARE_REFERENCE", "plainString"),
    ("ERR_MANIFEST_INVALID_STEP", 'if: !cel "true"'),  # two step kinds; placed at the second key's value
    ("ERR_MANIFEST_VALIDATION_FAILED", "-1, jitter"),
    ("ERR_MANIFEST_VALIDATION_FAILED", "some}"),
    ("ERR_MANIFEST_VALIDATION_FAILED", '"yes"'),  # a predicate literal must be a boolean
    ("ERR_MANIFEST_INVALID_STEP", "name: g"),  # no step kind
    ("ERR_MANIFEST_DUPLICATE_RESOURCE", "test}\nsteps: []"),
    ("ERR_MANIFEST_UNKNOWN_ALIAS", "Foo.Bar"),
    ("ERR_MANIFEST_UNKNOWN_KIND", "Local.Nothing"),
    ("ERR_MANIFEST_INVALID_NAME", "bad-name"),
    ("ERR_MANIFEST_VALIDATION_FAILED", "kind: Local.Schedule"),  # both `after` and `at`
    ("ERR_MANIFEST_REFERENCE_KIND", "!ref test\nafter"),  # a Sequence where a Workflow is required
    ("ERR_MANIFEST_VALIDATION_FAILED", "kind: Durable.Sleep"),  # neither `for` nor `until`
    ("ERR_MANIFEST_VALIDATION_FAILED", "kind: Local.Workflow"),  # missing required `journal`
    ("ERR_MANIFEST_UNKNOWN_ALIAS", "!ref Lib.thing"),
]


def test_every_error_is_reported_together_with_its_position(fail: Fail, write: Callable[..., Path]) -> None:
    path = write(BROKEN)
    text = path.read_text()
    with pytest.raises(ManifestLoadError) as info:
        load_manifest(path, env={})
    err = info.value
    assert err.code == "ERR_MANIFEST_VALIDATION_FAILED"
    expected = sorted((code, *at(text, needle)) for code, needle in EXPECTED)
    assert sorted(found(err.diagnostics)) == expected
    # The message lists each as file:line:col: CODE message, in file order.
    lines = str(err).splitlines()[1:]
    assert len(lines) == len(EXPECTED)
    first = err.diagnostics[0]
    assert lines[0].strip().startswith(f"{path}:{first.pos.line}:{first.pos.column}: {first.code} ")  # type: ignore[union-attr]
    assert err.data["file"] == str(path) and len(err.data["diagnostics"]) == len(EXPECTED)


def test_messages_name_the_problem(fail: Fail) -> None:
    diags = fail(BROKEN)
    text = "\n".join(d.message for d in diags)
    assert "write `!ref plainString`" in text
    assert "missing required field 'journal'" in text
    assert "exactly one of 'for' or 'until' is required" in text
    assert "only one of 'after' or 'at' may be given" in text
    assert "unknown field 'bogus'" in text
    assert "this slot takes a DurableLocal.Workflow, but 'test' is a Run.Sequence" in text
    assert "expected a boolean, got the string \"yes\"" in text


def test_yaml_syntax_error_is_a_diagnostic(fail: Fail) -> None:
    [d] = fail("kind: Telo.Application\nmetadata: {name: x\n")
    assert d.code == "ERR_MANIFEST_YAML" and d.pos is not None and d.pos.line == 3


def test_first_document_must_be_the_application(fail: Fail) -> None:
    diags = fail("kind: Run.Sequence\nmetadata: {name: s}\nsteps: []\n")
    assert diags[0].message.startswith("the first document must be")


def test_header_is_validated(fail: Fail) -> None:
    text = "kind: Telo.Application\nmetadata: {version: 1}\nimports: [run]\n"
    assert sorted(found(fail(text))) == [
        ("ERR_MANIFEST_VALIDATION_FAILED", 2, 11),  # metadata.name missing
        ("ERR_MANIFEST_VALIDATION_FAILED", 3, 10),  # imports is not a mapping (schema)
        ("ERR_MANIFEST_VALIDATION_FAILED", 3, 10),  # ... and cannot be resolved
    ]


def test_abstract_kinds_cannot_be_declared(fail: Fail) -> None:
    [d] = fail(HEADER + "---\nkind: Durable.Run\nmetadata: {name: r}\n")
    assert d.code == "ERR_MANIFEST_UNKNOWN_KIND" and "abstract" in d.message


def test_target_must_be_runnable(fail: Fail) -> None:
    [d] = fail(HEADER + "targets: [!ref v]\n---\nkind: Run.Value\nmetadata: {name: v}\nvalue: 1\n")
    assert "cannot be run" in d.message and d.hint and "invoke" in d.hint


def test_unknown_target_shape(fail: Fail) -> None:
    [d] = fail(HEADER + "targets: [plain]\n")
    assert d.code == "ERR_MANIFEST_VALIDATION_FAILED" and "target 0" in d.message


def test_inline_resource_config_is_validated_at_its_own_position(fail: Fail, write: Callable[..., Path]) -> None:
    text = HEADER + (
        "---\nkind: Run.Sequence\nmetadata: {name: s}\nsteps:\n"
        "  - name: r\n    invoke: {kind: Local.Result, wait: soon}\n"
    )
    diags = fail(text)
    assert sorted(found(diags)) == sorted([
        ("ERR_MANIFEST_VALIDATION_FAILED", *at(text, "{kind: Local.Result")),  # journal missing
        ("ERR_MANIFEST_VALIDATION_FAILED", *at(text, "soon")),  # not a duration
    ])
    assert "Local.Result 'SequenceSSteps0R'" in diags[0].message


def test_inline_name_collision(fail: Fail) -> None:
    text = HEADER + (
        "---\nkind: Run.Value\nmetadata: {name: SequenceSSteps0R}\nvalue: 1\n"
        "---\nkind: Run.Sequence\nmetadata: {name: s}\nsteps:\n  - name: r\n    invoke: {kind: Console.WriteLine}\n"
    )
    [d] = fail(text)
    assert d.code == "ERR_MANIFEST_DUPLICATE_RESOURCE" and "SequenceSSteps0R" in d.message


def test_library_reference_to_unexported_or_builtin(fail: Fail) -> None:
    [d] = fail(HEADER + "---\nkind: Run.Sequence\nmetadata: {name: s}\nsteps:\n"
               "  - {name: a, invoke: !ref Run.thing}\n")
    assert d.code == "ERR_MANIFEST_UNKNOWN_RESOURCE" and "exports no resources" in d.message


def test_did_you_mean(fail: Fail) -> None:
    [d] = fail(HEADER + "---\nkind: Console.WriteLine\nmetadata: {name: announce}\n---\nkind: Run.Sequence\n"
               "metadata: {name: s}\nsteps:\n  - {name: a, invoke: !ref anounce}\n")
    assert d.hint == "did you mean 'announce'?"


def test_nested_step_errors_and_throw_shape(fail: Fail) -> None:
    text = HEADER + (
        "---\nkind: Run.Sequence\nmetadata: {name: s}\nsteps:\n"
        "  - name: w\n    while: true\n    do:\n      - name: t\n        throw: {message: no code}\n"
        "  - name: sw\n    switch: 1\n    cases: {a: [{name: x}]}\n"
        "  - name: tr\n    try: [{name: ok, value: 1}]\n    catch: notalist\n"
    )
    assert sorted(found(fail(text))) == sorted([
        ("ERR_MANIFEST_VALIDATION_FAILED", *at(text, "{message: no code}")),  # throw needs a code
        ("ERR_MANIFEST_INVALID_STEP", *at(text, "{name: x}")),
        ("ERR_MANIFEST_VALIDATION_FAILED", *at(text, "notalist")),
    ])


def test_cel_is_accepted_wherever_a_value_is_expected(load: Callable[..., object]) -> None:
    load(HEADER + (
        "---\nkind: Run.Iteration\nmetadata: {name: it}\ncollection: !cel inputs.items\nconcurrency: !cel '2'\n"
        "steps:\n  - {name: a, value: !cel item, when: !cel 'index > 0'}\n"
        "  - {name: b, throw: !cel \"{'code': 'X'}\"}\n"
    ))


def test_a_cel_expression_is_not_a_reference(fail: Fail) -> None:
    [d] = fail(HEADER + "---\nkind: Local.Resumer\nmetadata: {name: r}\nworkflow: !cel \"'x'\"\n")
    assert "not a CEL expression" in d.message


def test_size_limits_speak_yaml_not_python_reprs(fail: Fail) -> None:
    """Two sources on a Durable.Consume printed the mapping's Python repr, a `Ref(name=…, pos=Pos(…))` included
    (from a user's walk-through)."""
    [d] = fail("""\
kind: Telo.Application
metadata: { name: Sizes }
imports: { Durable: durable, Local: durable-local, Journal: durable-journal-sqlite }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Durable.Consume
metadata: { name: c }
source:
  file: { path: ./x.ndjson }
  stream: { journal: !ref runs, run: abc, name: rows }
steps: []
""")
    assert d.message.endswith("at /source: at most 1 field may be given here, found 2 ('file', 'stream')"), d.message
    assert "Ref(" not in d.message and "{" not in d.message
