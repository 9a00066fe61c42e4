"""wait_for_event (telo events get --wait, app.event(wait=), DurableLocal.Event) reads the events, THEN the run's
status: a run that publishes and settles between the two reads is reported as having published nothing
(ERR_DURABLE_EVENT_NOT_SET, exit 1) — although the event is in the journal. streams.follow re-reads once after
seeing the run settled; wait_for_event does not."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import telo
from telo.durable import messages
from tests.api import test_messages as tm  # registers MsgTest.Hold

MANIFEST = """\
kind: Telo.Application
metadata: { name: Ev }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Durable: durable, T: MsgTest }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: T.Hold
metadata: { name: holdOn }
---
kind: Durable.Publish
metadata: { name: final }
name: final
value: 42
---
kind: Local.Workflow
metadata: { name: late }
journal: !ref runs
runId: !cel "'late:' + inputs.id"
steps:
  - { name: h, invoke: !ref holdOn }
  - { name: q, invoke: !ref final }
"""


class SettlesBetweenReads:
    def __init__(self, store: Any) -> None:
        self._s, self.calls = store, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s, name)

    def read_run(self, run: str) -> Any:
        self.calls += 1
        if self.calls == 2:  # _event_or_settled's status read, after latest_event found nothing
            tm.RELEASE.set()
            deadline = time.monotonic() + 10
            while self._s.read_run(run).status != "completed" and time.monotonic() < deadline:
                time.sleep(0.02)
        return self._s.read_run(run)


def test_an_event_published_just_before_the_run_settles_is_found(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(MANIFEST)
    tm.RELEASE.clear()
    with telo.load(tmp_path / "app.yaml") as app:
        ref = app.start("late", {"id": "1"})
        store = app.aio._store()
        deadline = time.monotonic() + 10
        while store.read_run("late:1") is None and time.monotonic() < deadline:
            time.sleep(0.02)
        found = asyncio.run(messages.wait_for_event(SettlesBetweenReads(store), "late:1", "final", 5000))
        done = app.result(ref, wait=10)
        after = app.event("late:1", "final")
    tm.RELEASE.clear()
    assert done.ok and after is not None and after.value == 42  # it IS published
    assert found is not None, "wait_for_event gave up: the run settled, the event was never re-read"
