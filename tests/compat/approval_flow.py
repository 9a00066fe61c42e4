"""The approval flow the journal-compat tests run (tests/compat, tests/unit/journal/test_compat.py,
tests/cli/test_journal_compat_cli.py): a greeting, an await on ``go:<id>``, a greeting of whoever approved."""

from __future__ import annotations

BODY = """\
---
kind: Run.Value
metadata: { name: greet }
value: %(greet)s
---
kind: Durable.Await
metadata: { name: approval }
token: !cel "'go:' + inputs.id"
---
kind: Local.Workflow
metadata: { name: flow }
journal: !ref runs
runId: !cel "'flow:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - { name: first, invoke: !ref greet, inputs: { who: ada } }
  - { name: wait, invoke: !ref approval, inputs: { id: !cel "inputs.id" } }
  - { name: last, invoke: !ref greet, inputs: { who: !cel "steps.wait.result.by" } }
"""
GREETING = "!cel \"'hello ' + inputs.who\""


def approval_flow(name: str, journal: str, journal_fields: str, *, targets: str = "", greet: str = GREETING) -> str:
    """The manifest: application ``name``, the journal module ``journal`` (``durable-journal-file`` …) with
    ``journal_fields`` (``directory: ./journal``), optional ``targets:`` lines, and the greeting's value."""
    return (f"kind: Telo.Application\nmetadata: {{ name: {name} }}\n"
            f"imports: {{ Local: durable-local, Durable: durable, Journal: {journal}, Run: run }}\n{targets}"
            f"---\nkind: Journal.Journal\nmetadata: {{ name: runs }}\n{journal_fields}\n"
            + BODY % {"greet": greet})
