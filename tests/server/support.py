"""Shared by the dashboard tests: a manifest that parks on a delivery, journals built entry by entry, and the
`telo` command line."""

from __future__ import annotations

from telo.journal.model import Admission, Entry, Parked
from telo.journal.store import Store

# A workflow that greets, parks on an approval token, then greets whoever approved (as tests/durable/test_digest).
MANIFEST = """\
kind: Telo.Application
metadata: { name: Dashboard }
imports: { Local: durable-local, Durable: durable, Journal: durable-journal-sqlite, Run: run }
targets:
  - name: start
    invoke: !ref flow
    inputs: { id: !cel "inputs.id" }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./journal.db
---
kind: Run.Value
metadata: { name: greet }
value: !cel "'hello ' + inputs.who"
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

GREET = {"kind": "Run.Value", "name": "greet"}


def parked_run(store: Store, run: str, token: str, *, workflow: str = "flow") -> None:
    """A run as the manifest above leaves it after its first execution: greeted, parked on ``token``."""
    store.admit(Admission.of(run, workflow=workflow, inputs={"id": run}))
    store.append(run, Entry.decided("inputs", "inputs", {"id": run}))
    store.append(run, Entry.decided("steps/first/inputs", "inputs", {"who": "ada"}))
    store.append(run, Entry.step("steps/first", GREET, "hello ada"))
    store.append(run, Entry.decided("steps/wait/inputs", "inputs", {"id": run}))
    store.append(run, Entry.decided("steps/wait/token", "value", token))
    store.park(run, Parked("steps/wait", "approval", token))
