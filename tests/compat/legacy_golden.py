"""The generator of ``tests/compat/golden/legacy/``: file journals telo writes in journal compat ``legacy``
(docs/compat.md), for the Node runtime released before the codec. ``test_legacy_journals.py`` runs it again and
compares byte for byte; to change what legacy mode writes on purpose, regenerate with
``.venv/bin/python -m tests.compat.legacy_golden`` and say why in the commit.

Each run is executed by the engine — the App, a fake clock, a FileStore — so the files hold what a real run in
legacy mode writes: the workflow's and each step's inputs decisions, step entries with their targets, a delivery,
a durable sleep's ``wakeAt`` and its park's ``dueAt``, branch decisions, a run that fails on a value legacy mode
refuses, and a scheduled run's record. Only the claim lines' holder (``<name>@<host>:<pid>:<start>``) is replaced
by a fixed one: upstream readers skip claim lines, and nothing else in a line depends on the machine. The
manifest is loaded as ``/golden/legacy/flow.yaml`` (never read from there), so targets carry that module URL.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from telo.analysis import cel_checker
from telo.api import AsyncApp
from telo.clock import FakeClock
from telo.journal.file import FileStore
from telo.kinds.controllers import CONTROLLERS
from telo.manifest import load_manifest
from telo.runtime.app import Application

GOLDEN = Path(__file__).resolve().parent / "golden" / "legacy"
MODULE = "/golden/legacy/flow.yaml"
HOLDER = "golden@golden-host:1:1"

MANIFEST = """\
kind: Telo.Application
metadata: { name: LegacyGolden }
imports: { Local: durable-local, Durable: durable, Journal: durable-journal-file, Run: run, Timer: timer }
---
kind: Journal.Journal
metadata: { name: journal }
directory: ./journal
---
kind: Run.Value
metadata: { name: stage }
value: !cel "{'stage': inputs.stage}"
---
kind: Run.Value
metadata: { name: count }
value: !cel "size(inputs.items)"
---
kind: Timer.Delay
metadata: { name: pause }
---
kind: Durable.Await
metadata: { name: approval }
token: !cel "'approve:' + inputs.ticket"
---
kind: Durable.Sleep
metadata: { name: nap }
for: 2s
---
kind: Local.Workflow
metadata: { name: approve }
journal: !ref journal
runId: !cel "'approve:' + inputs.ticket"
inputs: { ticket: !cel "inputs.ticket" }
steps:
  - { name: opened, invoke: !ref stage, inputs: { stage: before } }
  - { name: waitForApproval, invoke: !ref approval, inputs: { ticket: !cel "inputs.ticket" } }
  - name: closed
    invoke: !ref stage
    inputs: { stage: !cel "'after ' + steps.waitForApproval.result.approvedBy" }
---
kind: Local.Workflow
metadata: { name: sleeper }
journal: !ref journal
runId: !cel "'sleeper:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - { name: work, invoke: !ref pause, inputs: { duration: 1ms, value: { payload: 1.5 } } }
  - { name: nap, invoke: !ref nap }
  - { name: woke, value: !cel "steps.nap.result.wokeAt" }
---
kind: Local.Workflow
metadata: { name: values }
journal: !ref journal
runId: !cel "'values:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - name: gate
    if: !cel "inputs.id == 'v1'"
    then: [ { name: chosen, value: then } ]
    else: [ { name: chosen, value: else } ]
  - name: pick
    switch: !cel "'b'"
    cases:
      a: [ { name: picked, value: a } ]
      b: [ { name: picked, value: b } ]
  - name: kinds
    value:
      none: null
      flag: true
      text: "ünï \\u0001 tab\\t \\"quoted\\""
      half: 1.5
      whole: 3.0
      negativeZero: -0.0
      big: 1.0e+21
      tiny: 1.0e-7
      list: [ 1.5, two, null, { nested: [ true ] } ]
      tagLike: { "$telo": int, value: "1" }
      empty: {}
  - { name: echo, invoke: !ref stage, inputs: { stage: !cel "steps.kinds.result" } }
---
kind: Local.Workflow
metadata: { name: refused }
journal: !ref journal
runId: !cel "'refused:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - { name: before, invoke: !ref stage, inputs: { stage: counting } }
  - { name: count, invoke: !ref count, inputs: { items: [ a, b, c ] } }
  - { name: after, invoke: !ref stage, inputs: { stage: never } }
"""


async def _write(directory: Path, mode: str) -> None:
    clock = FakeClock()
    store = FileStore(str(directory), clock=clock)
    manifest = load_manifest(Path(MODULE), text=MANIFEST, cel_checker=cel_checker)
    app = AsyncApp(Application(manifest, controllers=CONTROLLERS, clock=clock), journal=store,
                   journal_compat=mode)
    try:
        parked = await app.run("approve", {"ticket": "t1"})
        assert parked.status == "parked", parked
        assert (await app.deliver("approve:t1", {"approvedBy": "ada"})).delivered
        assert (await app.wait("approve:t1", timeout=30)).status == "completed"

        assert (await app.run("sleeper", {"id": "s1"})).status == "parked"
        clock.advance(seconds=2)
        assert await app.run_due() == 1
        assert (await app.wait("sleeper:s1", timeout=30)).status == "completed"

        assert (await app.run("values", {"id": "v1"})).status == "completed"
        refused = await app.run("refused", {"id": "r1"})  # an int: legacy mode refuses it, the run fails
        assert refused.status == ("failed" if mode == "legacy" else "completed"), refused
        assert (await app.schedule("approve", {"ticket": "t2"}, after=60)).scheduled
    finally:
        await app.close()
        store.close()


def _normalised(data: bytes) -> bytes:
    """The file with each claim line's holder replaced by :data:`HOLDER` (the one machine-specific member)."""
    out = []
    for line in data.splitlines(keepends=True):
        obj = json.loads(line)
        if obj.get("type") == "claim" and obj.get("holder") is not None:
            obj["holder"] = HOLDER
            line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        out.append(line)
    return b"".join(out)


def generate(directory: Path, mode: str = "legacy") -> list[Path]:
    """Write the golden runs into ``directory`` (which must not hold journals yet) in journal compat ``mode``
    (``typed``: the same runs as telo writes them by default); returns the files."""
    directory.mkdir(parents=True, exist_ok=True)
    asyncio.run(_write(directory, mode))
    files = sorted(directory.glob("*.ndjson"))
    for path in files:
        path.write_bytes(_normalised(path.read_bytes()))
    return files


if __name__ == "__main__":
    for old in GOLDEN.glob("*.ndjson"):
        old.unlink()
    for written in generate(GOLDEN):
        print(written.relative_to(Path.cwd()) if written.is_relative_to(Path.cwd()) else written)
