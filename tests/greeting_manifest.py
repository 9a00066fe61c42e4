"""The manifest several durable tests build on: an application whose ``start`` target invokes a workflow, its
SQLite journal ``runs``, the ``greet`` value and the ``approval`` wait — and the workflow that greets, parks on
the approval, then greets whoever approved. Each test adds its own documents (:func:`manifest`)."""

from __future__ import annotations

from string import Template

_HEAD = Template("""\
kind: Telo.Application
metadata: { name: $name }
imports: { Local: durable-local, Durable: durable, Journal: durable-journal-sqlite, Run: run }
targets:
  - name: start
    invoke: !ref $start
    inputs: { id: !cel "inputs.id" }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./journal.db
---
kind: Run.Value
metadata: { name: greet }
value: !cel "'hello ' + inputs.who"
""")

APPROVAL = """\
kind: Durable.Await
metadata: { name: approval }
token: !cel "'go:' + inputs.id"
"""

# greet ada, wait for the approval token 'go:<id>', greet whoever approved
GREET_AND_WAIT = """\
kind: Local.Workflow
metadata: { name: flow }
journal: !ref runs
runId: !cel "'flow:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - name: first
    invoke: !ref greet
    inputs: { who: ada }
  - name: wait
    invoke: !ref approval
    inputs: { id: !cel "inputs.id" }
  - name: last
    invoke: !ref greet
    inputs: { who: !cel "steps.wait.result.by" }
"""


def manifest(name: str, *documents: str, start: str = "flow") -> str:
    """The application ``name`` (its ``start`` target invoking ``start``), the journal and ``greet``, then
    ``documents`` in order, each a YAML document of its own."""
    return "---\n".join((_HEAD.substitute(name=name, start=start), *documents))
