"""Durable schedules under faults, with real ``telo worker`` processes (issue 17): three workers serve a
schedule ticking every second while the process deciding its ticks is paused (SIGSTOP) past its lease and
woken, and the next one is killed (SIGKILL). Judged from the journal and from the ledger the effect writes itself
(workflows/ticked.py): every tick from the first to the last is decided once and fired, every fired tick has
one run, and no tick's effect ran twice."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from telo.journal.store import Store
from telo.kinds import schedule_ledger as ledger
from telo.kinds.cron import tick_text
from tests.faults.support import JOURNALS, Payments, Proc

MANIFEST = """\
kind: Telo.Application
metadata: {{ name: Ticks, version: 1.0.0 }}
imports: {{ Py: python, Local: durable-local, Journal: {module}, Schedule: scheduler }}
variables:
  journal: {{ env: FAULT_JOURNAL, type: string }}
  table: {{ env: FAULT_TABLE, type: string }}
---
kind: Journal.Journal
metadata: {{ name: runs }}
{location}
claimTtl: 2s
---
kind: Py.Function
metadata: {{ name: effect }}
function: ticked:effect
---
kind: Local.Workflow
metadata: {{ name: job }}
journal: !ref runs
inputs: {{ tick: !cel "inputs.tick" }}
steps:
  - {{ name: effect, invoke: !ref effect, inputs: {{ tick: !cel "inputs.tick" }} }}
---
kind: Schedule.Cron
metadata: {{ name: every }}
cron: "* * * * * *"
invoke: !ref job
overlap: allow
"""


@pytest.fixture
def flow(tmp_path: Path) -> Iterator[Callable[[str], Payments]]:
    made: list[Payments] = []

    def make(kind: str) -> Payments:
        made.append(Payments(kind, tmp_path / kind, ttl="2s"))
        module, location = JOURNALS[kind]
        made[-1].manifest.write_text(MANIFEST.format(module=module, location=location))
        return made[-1]

    yield make
    for f in made:
        f.close()


def holder_pid(store: Store) -> int | None:
    """The pid of the process holding the schedule's ledger (its claim's holder text names it)."""
    record = store.read_run(ledger.ledger_id("every"))
    if record is None or record.claim is None:
        return None
    from telo.journal.claims import Holder

    holder = Holder.parse(record.claim.holder)
    return None if holder is None else holder.pid


def wait_for_holder(store: Store, procs: list[Proc], other_than: int | None, timeout: float = 20) -> Proc:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = holder_pid(store)
        found = [p for p in procs if p.pid == pid and pid != other_than]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no worker but {other_than} took the schedule over within {timeout} s")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_three_workers_fire_every_tick_once_through_a_paused_and_a_killed_holder(
        kind: str, flow: Callable[[str], Payments]) -> None:
    f = flow(kind)
    procs = [f.worker(label=f"w{i}", until_idle=False) for i in range(3)]
    with f.open() as store:
        first = wait_for_holder(store, procs, None)
        time.sleep(2)
        f.pause(first)  # past its 2 s lease: another worker must take the schedule over
        second = wait_for_holder(store, procs, first.pid)
        time.sleep(1.5)
        first.signal(signal.SIGCONT)  # woken, it must find its lease gone and decide nothing
        time.sleep(1.5)
        second.signal(signal.SIGKILL)
        wait_for_holder(store, [p for p in procs if p is not second], second.pid)
        time.sleep(2)
    for proc in procs:
        proc.signal(signal.SIGTERM)
    for proc in procs:
        if proc is not second:
            assert proc.wait(60) == 128 + signal.SIGTERM, proc.output()  # (drained: what a stopped worker exits)
    with f.open() as store:
        entries = [e for e in store.read_entries(ledger.ledger_id("every")) if e.path.startswith("ticks/")]
        decided = [ledger.parse_instant(e.path[len("ticks/"):]) for e in entries]
        actions = Counter(e.decision for e in entries)
        records = {t: store.read_run(ledger.tick_run_id("every", t)) for t in decided}
    # every second from the first tick to the last is decided, once (one entry per path), and fired
    assert decided == list(range(decided[0], decided[-1] + 1000, 1000)), f"gaps in {[tick_text(t) for t in decided]}"
    assert actions == {"fire": len(decided)} and len(decided) >= 8
    assert all(r is not None for r in records.values())
    seen = Counter(line.split(" ")[0] for line in f.ledger.read_text().splitlines())
    assert max(seen.values()) == 1, f"a tick's effect ran twice: {[t for t, n in seen.items() if n > 1]}"
    completed = [t for t, r in records.items() if r is not None and r.status == "completed"]
    assert len(completed) >= len(decided) - 4  # (the last ticks may still wait when the workers stop)
    assert all(seen[tick_text(t)] == 1 for t in completed)
