"""wait_for_event (telo events get --wait, app.event(wait=), DurableLocal.Event) read the events, THEN the run's
status (issue 18 review, bug 4): a run that published and settled between the two reads was reported as having
published nothing (ERR_DURABLE_EVENT_NOT_SET, exit 1) although the event was in the journal. The status is read
first now."""
from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import telo
from telo.clock import FakeClock
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
        if self.calls == 2:  # the second read of the run: the run settles between the wait's two reads
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


def test_readers_waits_are_real_time_under_a_fake_clock(tmp_path: Path) -> None:
    """``app.event(wait=)``, ``app.stream(wait=)`` and ``DurableLocal.Event``'s ``wait`` measured their deadline on
    the app's clock (issue 18 review, bug 8): under a ``FakeClock`` that nobody advances they never ended. A
    reader waits in real time, as ``app.wait`` and ``app.result`` do."""
    (tmp_path / "app.yaml").write_text(MANIFEST)
    tm.RELEASE.clear()
    outcome: dict[str, Any] = {}

    def read(app: telo.App) -> None:
        outcome["event"] = app.event("late:2", "never", wait="50ms")

        async def follow() -> list[Any]:
            return [v async for v in app.aio.stream("late:2", "none", wait="50ms")]

        outcome["stream"] = app._call(follow())

    with telo.load(tmp_path / "app.yaml", clock=FakeClock()) as app:
        app.start("late", {"id": "2"})  # holds at `h`: running, so the reads wait
        reader = threading.Thread(target=read, args=(app,), daemon=True)
        reader.start()
        reader.join(10)
        finished = not reader.is_alive()
        tm.RELEASE.set()
    tm.RELEASE.clear()
    assert finished, "a reader's wait under a FakeClock did not end within 10 s"
    assert outcome == {"event": None, "stream": []}
