"""What `telo check` and every load refuse in steps (issue 15, "`telo check` and loading"): unknown step fields,
references to steps no body declares, step names CEL cannot read, a YAML error's cascade, and CEL error
positions that disagree. Each test failed before its fix."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from telo.analysis import check
from telo.manifest import Diagnostic, load_manifest

from .conftest import HEADER, locate

Fail = Callable[..., list[Diagnostic]]
Write = Callable[..., Path]

WORKFLOW = HEADER + """\
---
kind: Journal.Journal
metadata: {name: runs}
directory: ./runs
---
kind: Run.Value
metadata: {name: f}
value: 1
---
kind: Local.Workflow
metadata: {name: wf}
journal: !ref runs
steps:
  - name: charge
    invoke: !ref f
%s"""


def errors(found: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in found if d.severity == "error"]


# --- unknown step fields ------------------------------------------------------------------------------------

def test_a_misspelt_step_field_is_refused_where_it_is_written_with_the_field_it_meant(fail: Fail) -> None:
    text = WORKFLOW % "    retyr: {attempts: 5}\n  - name: ship\n    invoke: !ref f\n    timeOut: 1000\n"
    found = fail(text)
    assert [(d.code, d.hint) for d in found] == [
        ("ERR_MANIFEST_VALIDATION_FAILED", "did you mean 'retry'?"),
        ("ERR_MANIFEST_VALIDATION_FAILED", "did you mean 'timeout'?"),
    ]
    assert "unknown field 'retyr' on step 'charge'" in found[0].message
    assert (found[0].pos.line, found[0].pos.column) == locate(text, "retyr")  # type: ignore[union-attr]
    assert (found[1].pos.line, found[1].pos.column) == locate(text, "timeOut")  # type: ignore[union-attr]


def test_unknown_fields_are_refused_in_nested_bodies_too(fail: Fail) -> None:
    text = WORKFLOW % ("  - name: branch\n    if: !cel \"true\"\n    then:\n"
                       "      - {name: inner, invoke: !ref f, onUnconfirmd: park}\n")
    found = fail(text)
    assert len(found) == 1 and "unknown field 'onUnconfirmd' on step 'inner'" in found[0].message
    assert found[0].hint == "did you mean 'onUnconfirmed'?"


def test_max_iterations_on_a_while_step_is_accepted_as_upstream_does(write: Write) -> None:
    text = WORKFLOW % ("  - name: poll\n    while: !cel \"false\"\n    maxIterations: 3\n"
                       "    do: [{name: again, invoke: !ref f}]\n")
    assert errors(load_manifest(write(text), env={}).diagnostics) == []


def test_two_step_kinds_are_one_error_not_also_an_unknown_field(fail: Fail) -> None:
    found = fail(WORKFLOW % "    value: 1\n")
    assert [d.code for d in found] == ["ERR_MANIFEST_INVALID_STEP"]


# --- steps.<name> of no step --------------------------------------------------------------------------------

def test_reading_a_step_no_body_declares_is_an_error_at_the_reference(write: Write) -> None:
    text = WORKFLOW % "  - name: ship\n    invoke: !ref f\n    inputs: {parcel: !cel \"1 + steps.chrage.result\"}\n"
    found = errors(check(write(text)))
    assert [d.code for d in found] == ["ERR_MANIFEST_CEL"]
    assert "reads steps.chrage, but no step of this body is named 'chrage'" in found[0].message
    assert found[0].hint == "did you mean steps.charge?"
    assert (found[0].pos.line, found[0].pos.column) == locate(text, "steps.chrage")  # type: ignore[union-attr]


def test_steps_anywhere_in_the_body_may_be_read_and_has_of_a_missing_one_only_warns(write: Write) -> None:
    # One flat map per body (reference §2): a step inside a branch, a later step read by a polling loop
    # under has(), and a has() of a step the body lacks (always false; upstream's suites test isolation so).
    text = WORKFLOW % """\
  - name: poll
    while: !cel "!has(steps.done) || steps.done.result != 1"
    do:
      - name: branch
        if: !cel "steps.charge.result == 1"
        then: [{name: inner, invoke: !ref f}]
      - {name: done, invoke: !ref f, inputs: {x: !cel "steps.inner.result"}}
  - {name: probe, invoke: !ref f, inputs: {x: !cel "has(steps.elsewhere)"}}
"""
    found = check(write(text))
    assert errors(found) == []
    assert [(d.code, d.severity) for d in found] == [("UNDECLARED_STEP", "warning")]


def test_outputs_and_inline_bodies_are_checked_against_their_own_steps(write: Write) -> None:
    text = HEADER + """\
---
kind: Run.Value
metadata: {name: f}
value: 1
---
kind: Run.Sequence
metadata: {name: seq}
steps:
  - {name: a, invoke: !ref f}
  - name: each
    invoke:
      kind: Run.Iteration
      collection: [1, 2]
      steps: [{name: inner, invoke: !ref f, inputs: {x: !cel "steps.a.result"}}]
outputs: {total: !cel "steps.b.result"}
"""
    found = errors(check(write(text)))
    assert [d.code for d in found] == ["ERR_MANIFEST_CEL"]  # steps.a inside the inline body reads its owner's
    assert "`outputs` of Run.Sequence 'seq' reads steps.b" in found[0].message


def test_a_cel_keyword_cannot_name_a_step_and_a_reserved_word_warns(write: Write, fail: Fail) -> None:
    found = fail(WORKFLOW % "  - {name: in, invoke: !ref f}\n")
    assert [d.code for d in found] == ["ERR_INVALID_STEP_NAME"] and "CEL keyword" in found[0].message
    found = fail(WORKFLOW % "  - {name: loop, invoke: !ref f}\n  - {name: loop, invoke: !ref f}\n")
    assert [d.code for d in found] == ["ERR_DUPLICATE_STEP_NAME"]  # a reserved name is still checked for twins
    warned = load_manifest(write(WORKFLOW % "  - {name: loop, invoke: !ref f}\n", "one.yaml"), env={}).diagnostics
    assert [(d.code, d.severity) for d in warned] == [("RESERVED_STEP_NAME", "warning")]


# --- a YAML error first, without its cascade ----------------------------------------------------------------

def test_a_yaml_syntax_error_is_reported_first_and_alone(write: Write) -> None:
    # The bad flow mapping cuts the stream: the workflow after it is not read, and `!ref wf` above it would
    # read as unknown — the cascade, not the author's mistake.
    text = HEADER + """\
targets: [!ref wf]
---
kind: Run.Value
metadata: {name: f}
value: {a: 1
---
kind: Run.Sequence
metadata: {name: wf}
steps: [{name: a, invoke: !ref f}]
"""
    found = check(write(text))
    assert [d.code for d in found] == ["ERR_MANIFEST_YAML"]
    assert "documents after it were not read" in (found[0].hint or "")


# --- CEL positions ------------------------------------------------------------------------------------------

def test_a_cel_error_names_one_position_in_its_message_and_its_location(write: Write) -> None:
    text = WORKFLOW % "  - {name: ship, invoke: !ref f, inputs: {x: !cel \"steps.charge.result + undefinedVar\"}}\n"
    (found,) = check(write(text))
    where = re.search(r"at \S+:(\d+):(\d+) does not compile", found.message)
    assert where is not None, found.message
    assert (int(where[1]), int(where[2])) == (found.pos.line, found.pos.column)  # type: ignore[union-attr]
    assert (found.pos.line, found.pos.column) == locate(text, "undefinedVar")  # type: ignore[union-attr]
