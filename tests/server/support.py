"""Shared by the dashboard tests: a manifest that parks on a delivery, journals built entry by entry, and the
`telo` command line."""

from __future__ import annotations

from telo.journal.model import Admission, Entry, Parked
from telo.journal.store import Store
from tests.greeting_manifest import APPROVAL, GREET_AND_WAIT, manifest

# A workflow that greets, parks on an approval token, then greets whoever approved (tests/greeting_manifest).
MANIFEST = manifest("Dashboard", APPROVAL, GREET_AND_WAIT)

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
