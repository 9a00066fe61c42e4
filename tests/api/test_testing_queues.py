"""``telo.testing.assert_never_more_than`` (issue 16): a user's own test asserts a ``Local.Queue``'s limit by
sampling the journal while runs execute — it passes on a queue that keeps its limit (and reports the peak it
saw), and fails, naming the runs, when more slots are held than asserted: a tighter assertion than the queue's
limit, or runs started past the queue (as an upstream process sharing the journal would, ignoring queues).
On SQLite and PostgreSQL. Before this helper, such a test had to poll the journal by hand."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import telo
from telo.api import App
from telo.errors import TeloError
from telo.journal.claims import Holder
from telo.journal.model import Admission
from telo.testing import assert_never_more_than
from tests.pg_support import fresh_prefix, pg_url
from tests.queue_manifests import POSTGRES, SQLITE, header


@telo.kind("QueueSampleT.Work", idempotent=True)
async def work(inputs: dict[str, Any]) -> str:
    await asyncio.sleep(0.08)  # long enough for several samples to see it hold its slot
    return f"did {inputs['id']}"


FLOW = """\
---
kind: W.Work
metadata: { name: work }
---
kind: Local.Workflow
metadata: { name: flow }
journal: !ref runs
queue: !ref q
runId: !cel "'flow:' + inputs.id"
inputs: { id: !cel "inputs.id", tenant: !cel "inputs.tenant" }
steps:
  - { name: work, invoke: !ref work, inputs: { id: !cel "inputs.id" } }
"""
RULES = 'concurrency: 2\nconcurrencyKey: { key: !cel "inputs.tenant", limit: 1 }'


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    if request.param == "sqlite":
        module, location = SQLITE, "path: ./runs.db"
    else:
        module, location = POSTGRES, f"url: {json.dumps(pg_url())}\ntable: {fresh_prefix()}"
    manifest = tmp_path / "m.yaml"
    manifest.write_text(header("QueueSamples", module, location, version=None, imports={"W": "QueueSampleT"},
                               queues={"q": RULES}) + FLOW)
    with telo.load(manifest) as loaded:
        yield loaded


def run_all(app: App, batch: str, tenants: list[str]) -> None:
    refs = [app.start("flow", {"id": f"{batch}{i}", "tenant": t}) for i, t in enumerate(tenants)]
    assert [app.wait(r, timeout=60).status for r in refs] == ["completed"] * len(refs)


def test_it_passes_on_a_queue_that_keeps_its_limit_and_reports_the_peak(app: App) -> None:
    with assert_never_more_than(app, "q", 2) as samples:
        run_all(app, "r", ["a", "b", "c", "d", "a", "b"])
    assert samples.peak == 2  # the limit was reached, never passed
    assert samples.samples > 5
    with assert_never_more_than(app, "q", 1, per_key=True) as per_key:  # every tenant: one at a time
        run_all(app, "k", ["a", "a", "b", "b"])
    assert per_key.peak == 1
    with assert_never_more_than(app, "q", 1, key="a") as one_key:
        run_all(app, "one", ["a", "a", "b"])
    assert one_key.peak == 1


def test_it_fails_when_more_slots_are_held_than_asserted(app: App) -> None:
    tighter = r"queue 'q' held 2 slots at once, more than 1 \(sample \d+\); its running and parked runs then: " \
        r"flow:r\d, flow:r\d"
    with pytest.raises(AssertionError, match=tighter), assert_never_more_than(app, "q", 1):
        run_all(app, "r", ["a", "b", "c", "d"])
    per_key = "key 'a' of queue 'q' held 2 slots at once, more than 1"
    with pytest.raises(AssertionError, match=per_key), assert_never_more_than(app, "q", 1, per_key=True):
        rogue_runs(journal(app), ["a", "a"], hold_s=0.1)


def journal(app: App) -> Any:
    app.runs(limit=1)  # (the app starts: its journal opens)
    return app.application.resources["runs"].store  # type: ignore[attr-defined]


def rogue_runs(store: Any, keys: list[str], hold_s: float) -> None:
    """Runs of the queue started without its grant — as an upstream process sharing the journal (which ignores
    queues) or a bug would: claimed and set running at once, on another thread, for ``hold_s``, then cancelled."""
    rogue = Holder("upstream", "another-host", 9, 9).to_text()
    now = int(time.time() * 1000)
    runs = [f"rogue-{i}" for i in range(len(keys))]
    for run, key in zip(runs, keys, strict=True):
        store.admit(Admission.of(run, status="scheduled", due_at=now, workflow="flow", queue="q", queue_key=key))

    def start_past_the_queue() -> None:
        time.sleep(0.05)
        for run in runs:
            assert store.claim(run, rogue, 60_000, int(time.time() * 1000)) is not None
            store.update_run(run, status="running", due_at=None)
        time.sleep(hold_s)
        for run in runs:
            store.update_run(run, status="cancelled")

    thread = threading.Thread(target=start_past_the_queue)
    thread.start()
    thread.join()


def test_it_catches_runs_started_past_the_queue(app: App) -> None:
    """Three run at once in a queue of two: the helper sees it from the journal, whoever executes them."""
    store = journal(app)
    caught = r"held 3 slots at once, more than 2 .*rogue-0, rogue-1, rogue-2"
    with pytest.raises(AssertionError, match=caught), assert_never_more_than(app, "q", 2):
        rogue_runs(store, ["t0", "t1", "t2"], hold_s=0.1)


def test_an_unknown_queue_is_refused_naming_the_queues(app: App) -> None:
    with pytest.raises(TeloError) as refused, assert_never_more_than(app, "nope", 1):
        pass
    assert refused.value.code == "ERR_QUEUE_NOT_FOUND" and refused.value.hint == "its queues: q"
