"""A run's stream (issue 18; telo.durable.streams) read while its writer is SIGKILLed: the reader sees every
value once, in offset order, and ends at the close.

A workflow loops :data:`VALUES` turns; each turn runs an idempotent Python effect (a few ms: a window for a kill)
and appends the turn's value to its stream ``rows`` with ``Durable.StreamWrite``; then it closes the stream. A
``telo worker`` executes it and is SIGKILLed at random points (:data:`KILLS` times, restarted each time), while
this process follows the stream (``telo.durable.streams.follow``, what ``telo stream read --follow`` and
``app.stream`` use) from offset 0. Judged: the reader got offsets ``0..VALUES-1`` once each, in order, each with
its turn's value, and then ended; the journal holds exactly one record per offset plus the close; the run
completed. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from telo.durable import messages, streams
from telo.journal.model import Admission
from tests.crash.support import make_spec

VALUES = 120
KILLS = 4
WORKFLOW = "writer"
RUN = "writer:1"

MANIFEST = """\
kind: Telo.Application
metadata: { name: StreamKill }
imports: { Py: python, Durable: durable, Local: durable-local, Journal: %(module)s }
---
kind: Journal.Journal
metadata: { name: runs }
%(journal)s
---
kind: Py.Function
metadata: { name: work }
function: stream_kill_fns:work
idempotent: true
---
kind: Durable.StreamWrite
metadata: { name: emit }
stream: rows
value: !cel "inputs.v"
---
kind: Durable.StreamWrite
metadata: { name: done }
stream: rows
close: true
---
kind: Local.Workflow
metadata: { name: writer }
journal: !ref runs
runId: !cel "inputs.id"
inputs: { id: !cel "inputs.id", n: !cel "inputs.n" }
steps:
  - { name: count, value: 0 }
  - name: loop
    while: !cel "steps.count.result < inputs.n"
    do:
      - { name: w, invoke: !ref work, inputs: { turn: !cel "steps.count.result" } }
      - { name: e, invoke: !ref emit, inputs: { v: !cel "{'turn': steps.count.result, 'x': steps.w.result.x}" } }
      - { name: count, value: !cel "steps.count.result + 1" }
  - { name: end, invoke: !ref done }
"""

FUNCTIONS = """\
import time

def work(inputs):
    time.sleep(0.004)
    return {"x": inputs["turn"] * 7}
"""


def start_worker(manifest: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "telo", "worker", str(manifest), "--interval", "50ms"],
                                cwd=manifest.parent, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_stream_read_across_kills_of_its_writer_sees_every_value_once(kind: str, tmp_path: Path) -> None:
    seed = int(os.environ.get("TELO_CRASH_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    ctx = f"[{kind} seed={seed}]"
    spec = make_spec(kind, tmp_path)
    if kind == "sqlite":
        module, journal = "durable-journal-sqlite", f"path: {json.dumps(spec.location)}"
    else:
        module, journal = "durable-journal-postgres", f"url: {json.dumps(spec.location)}\ntable: {spec.table}"
    manifest = tmp_path / "stream.yaml"
    manifest.write_text(MANIFEST % {"module": module, "journal": journal})
    (tmp_path / "stream_kill_fns.py").write_text(FUNCTIONS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    env.pop("TELO_FAULT", None)
    store = spec.open()
    log = tmp_path / "workers.log"
    seen: list[tuple[int, Any]] = []
    reader_error: list[BaseException] = []

    def read() -> None:
        async def follow() -> None:
            async for item in streams.follow(store, RUN, "rows", 0, poll_s=0.02):
                seen.append(item)

        try:
            asyncio.run(follow())
        except BaseException as exc:  # reported below
            reader_error.append(exc)

    try:
        assert store.admit(Admission.of(RUN, workflow=WORKFLOW, inputs={"id": RUN, "n": VALUES})).admitted
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        worker = start_worker(manifest, env, log)
        kills = 0
        deadline = time.monotonic() + 60
        # One kill in each of KILLS stretches of the stream, at a random value of it plus a few ms of jitter (into
        # the effect, the append, the commit). Timed by the reader's progress, not by the clock: random sleeps
        # between kills let a fast writer finish after one kill (CI saw "only 1 kills landed").
        stretch = (VALUES - 20) // KILLS
        for k in range(KILLS):
            at = 10 + k * stretch + rng.randrange(stretch - 5)
            while len(seen) < at and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.uniform(0, 0.01))
            if worker.poll() is None and len(seen) < VALUES:  # killed while writing
                os.kill(worker.pid, signal.SIGKILL)
                worker.wait()
                kills += 1
                worker = start_worker(manifest, env, log)
        reader.join(60)
        assert not reader.is_alive(), f"{ctx}: the reader did not end (saw {len(seen)} values)"
        assert not reader_error, f"{ctx}: {reader_error[0]!r}"
        record = store.read_run(RUN)
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        assert record is not None and record.status == "completed", f"{ctx}: {record}\n{log.read_text()[-3000:]}"
        assert kills == KILLS, f"{ctx}: only {kills} kills landed while the stream was being written"
        assert [offset for offset, _ in seen] == list(range(VALUES)), f"{ctx}: offsets {seen[:5]}…"
        assert [v for _, v in seen] == [{"turn": n, "x": n * 7} for n in range(VALUES)], ctx
        records = [e for e in messages.logical_entries(store, RUN).values() if e.decision == streams.STREAM_DECISION]
        assert len(records) == VALUES + 1, f"{ctx}: {len(records)} stream records for {VALUES} values and a close"
        page = streams.read(store, RUN, "rows")
        assert page.closed and page.next == VALUES, ctx
    finally:
        store.close()
