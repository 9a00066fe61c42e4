"""A queue's limits hold across real worker processes (issue 16), on SQLite and PostgreSQL.

Forty-odd runs of a workflow in a ``Local.Queue`` are admitted as a start admits them (``scheduled``, due now,
with the queue and its key), and four ``telo worker`` processes race for them, each able to run 10 at once. Each
run's one step writes a ``start`` and an ``end`` line to a ledger around ~100 ms of work. Two witnesses, neither
a timing assertion:

- a sampler thread reads the journal every ~10 ms and counts the queue's runs holding a slot (``running``
  under a live claim): never more than ``concurrency`` — or, keyed, two of one tenant;
- the ledger's own start/end intervals never overlap more than ``concurrency`` (one per tenant, keyed).

Then a worker is killed (``kill -9``) in the middle of a run: its slot comes back (a dead local holder holds
nothing) and the other workers finish every run.

Before this change the queue did not exist (``Local.Queue`` is an unknown kind), and no claim knew limits: four
workers ran up to 40 runs at once.

A ``rateLimit`` is judged from the journal alone: the ``started_at`` each run's first grant recorded (the
database's clock on PostgreSQL) — no window of the period holds more starts than the limit. ``priority`` with one
worker and ``concurrency: 1``: the runs start in priority order, ties in admission order. (Before step 3 of the
proposal, ``rateLimit`` and ``priority`` were unknown fields, and the due runs started in admission order.)
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from telo.clock import SYSTEM_CLOCK
from telo.journal.model import Admission
from telo.journal.rules import claim_is_live
from tests.faults.support import JOURNALS, Payments, Proc
from tests.queue_manifests import fault_header, queued_work_flow

KINDS = ("sqlite", "postgres")
RUNS = 44
TENANTS = ("acme", "bolt", "corp", "dyne")


def manifest(module: str, location: str, limits: str) -> str:
    """The queue ``q`` with ``limits`` on the fault journal (``JOURNALS``' ``module`` and ``location``), and the
    workflow ``work`` of it."""
    return fault_header("Queued", module, location, queues={"q": limits}) + queued_work_flow("work", "q")


# The same as a str.format template of (module, location, limits), as tests/faults/test_queue_override.py uses it.
MANIFEST = manifest("{module}", "{location}", "{limits}")


@dataclass
class Sampler:
    """Reads the journal every ~10 ms: the most runs of the queue holding a slot at once, overall and per key."""

    flow: Payments
    most: int = 0
    most_per_key: int = 0
    samples: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with self.flow.open() as store:
            while not self.stop.is_set():
                now = SYSTEM_CLOCK.now_ms()
                holding = [r for r in store.runs_of_queue("q")
                           if r.status == "running" and claim_is_live(r.claim, now)]
                per_key: dict[str | None, int] = {}
                for r in holding:
                    per_key[r.queue_key] = per_key.get(r.queue_key, 0) + 1
                self.most = max(self.most, len(holding))
                self.most_per_key = max([self.most_per_key, *per_key.values()])
                self.samples += 1
                time.sleep(0.01)


@pytest.fixture
def queued(tmp_path: Path) -> Iterator[Callable[[str, str], Payments]]:
    made: list[Payments] = []

    def make(kind: str, limits: str) -> Payments:
        flow = Payments(kind, tmp_path / f"{kind}-{len(made)}")
        module, location = JOURNALS[kind]
        flow.manifest.write_text(manifest(module, location, limits))
        flow.env["QUEUE_LEDGER"] = str(flow.ledger)  # (queued_work.py is on its PYTHONPATH: tests/faults/workflows)
        made.append(flow)
        return flow

    yield make
    for flow in made:
        flow.close()


def admit_queued(flow: Payments, count: int) -> list[str]:
    """What starts of the queued workflow admit: scheduled, due now, the queue and the key (inputs.tenant)."""
    runs = [f"q-{i:02d}" for i in range(count)]
    now = SYSTEM_CLOCK.now_ms()
    with flow.open() as store:
        for i, run in enumerate(runs):
            tenant = TENANTS[i % len(TENANTS)]
            assert store.admit(Admission.of(run, status="scheduled", due_at=now, inputs={"id": run, "tenant": tenant},
                                            workflow="work", queue="q", queue_key=tenant)).admitted
    return runs


def intervals(flow: Payments, killed_at: dict[int, int] | None = None) -> list[tuple[int, int, str, str]]:
    """(start ns, end ns, run, tenant) of each execution of the step in the ledger; one cut short by a kill
    ends at the kill."""
    open_: dict[tuple[str, int], tuple[int, str]] = {}
    out: list[tuple[int, int, str, str]] = []
    for raw in flow.ledger.read_text().splitlines():
        run, tenant, what, pid, ns = raw.split(" ")
        if what == "start":
            open_[(run, int(pid))] = (int(ns), tenant)
        else:
            start, _ = open_.pop((run, int(pid)))
            out.append((start, int(ns), run, tenant))
    for (run, pid), (start, tenant) in open_.items():
        assert killed_at is not None and pid in killed_at, f"{run}: a step of a live process never ended"
        out.append((start, killed_at[pid], run, tenant))
    return out


def most_at_once(spans: list[tuple[int, int, str, str]], tenant: str | None = None) -> int:
    events = sorted([(s, 1) for s, _, _, t in spans if tenant in (None, t)]
                    + [(e, -1) for _, e, _, t in spans if tenant in (None, t)])  # an end before a start at one ns
    most = now = 0
    for _, change in events:
        now += change
        most = max(most, now)
    return most


def settle(flow: Payments, runs: list[str], procs: list[Proc], sampler: Sampler, thread: threading.Thread
           ) -> list[tuple[int, int, str, str]]:
    """Wait for ``procs`` to exit 0, stop the sampler, check every run completed; the step's intervals."""
    for proc in procs:
        assert proc.wait(180) == 0, proc.output()
    sampler.stop.set()
    thread.join(10)
    for run in runs:
        assert flow.record(run).status == "completed", run
    return intervals(flow)


def race(flow: Payments, workers: int = 4) -> tuple[list[Proc], Sampler, threading.Thread]:
    sampler = Sampler(flow)
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    procs = [flow.start("worker", str(flow.manifest), "--interval", "100ms", "--until-idle", "--concurrency", "10",
                        label=f"w{i}") for i in range(workers)]
    return procs, sampler, thread


@pytest.mark.parametrize("kind", KINDS)
def test_four_workers_never_run_more_than_the_queue_allows(kind: str, queued: Callable[[str, str], Payments]) -> None:
    flow = queued(kind, "concurrency: 3")
    runs = admit_queued(flow, RUNS)
    procs, sampler, thread = race(flow)
    spans = settle(flow, runs, procs, sampler, thread)
    assert sorted(run for _, _, run, _ in spans) == runs  # each run's work exactly once
    assert sampler.samples > 20 and 1 <= sampler.most <= 3, (sampler.most, sampler.samples)
    assert most_at_once(spans) <= 3
    assert most_at_once(spans) >= 2  # (the queue did let runs overlap: the limit, not a serialisation)


@pytest.mark.parametrize("kind", KINDS)
def test_a_key_never_runs_twice_at_once(kind: str, queued: Callable[[str, str], Payments]) -> None:
    flow = queued(kind, 'concurrency: 10\nconcurrencyKey: { key: !cel "inputs.tenant", limit: 1 }')
    runs = admit_queued(flow, RUNS)
    procs, sampler, thread = race(flow)
    spans = settle(flow, runs, procs, sampler, thread)
    assert sorted(run for _, _, run, _ in spans) == runs
    assert sampler.samples > 20 and sampler.most_per_key == 1, (sampler.most_per_key, sampler.samples)
    for tenant in TENANTS:
        assert most_at_once(spans, tenant) == 1, tenant
    assert most_at_once(spans) <= len(TENANTS)


@pytest.mark.parametrize("kind", KINDS)
def test_a_killed_workers_slots_come_back(kind: str, queued: Callable[[str, str], Payments]) -> None:
    """``kill -9`` of a worker in the middle of a run: its claim names a dead process of this host, which holds
    no slot, so the queue's slots come back and the other workers finish every run, the killed one's too."""
    flow = queued(kind, "concurrency: 3")
    flow.env["QUEUE_WORK_MS"] = "150"
    runs = admit_queued(flow, RUNS)
    procs, sampler, thread = race(flow)
    by_pid = {proc.pid: proc for proc in procs}
    deadline = time.monotonic() + 60
    victim: Proc | None = None
    while victim is None and time.monotonic() < deadline:  # a worker inside a run's step
        lines = [raw.split(" ") for raw in flow.ledger.read_text().splitlines()]
        ended = {(r, int(p)) for r, _, w, p, _ in lines if w == "end"}
        # the step that started last: the most of its 150 ms still ahead, so the kill lands inside it
        inside = [(r, int(p)) for r, _, w, p, _ in lines if w == "start" and (r, int(p)) not in ended]
        if inside:
            cut_run, pid = inside[-1]
            victim = by_pid[pid]
        else:
            time.sleep(0.005)
    assert victim is not None, "no worker ever ran a step"
    killed_ns = time.monotonic_ns()
    victim.signal(signal.SIGKILL)
    assert victim.wait(30) == -signal.SIGKILL
    for proc in procs:
        if proc is not victim:
            assert proc.wait(180) == 0, proc.output()
    sampler.stop.set()
    thread.join(10)
    for run in runs:
        assert flow.record(run).status == "completed", run
    spans = intervals(flow, {victim.pid: killed_ns})
    assert {run for _, _, run, _ in spans} == set(runs)
    lines = [raw.split(" ") for raw in flow.ledger.read_text().splitlines()]
    cut = {r for r, _, w, p, _ in lines if w == "start" and int(p) == victim.pid} \
        - {r for r, _, w, p, _ in lines if w == "end" and int(p) == victim.pid}
    assert cut_run in cut  # killed inside its step
    for run in cut:  # each run cut short was redone by another worker: its slot came back
        assert sum(1 for _, _, r, _ in spans if r == run) == 2, run
    assert sampler.most <= 3 and most_at_once(spans) <= 3



@pytest.mark.parametrize("kind", KINDS)
def test_four_workers_never_start_more_than_the_rate_allows(kind: str, queued: Callable[[str, str], Payments]) -> None:
    """``rateLimit: 3 per 1s`` and four workers racing for 12 runs due at once: from the journal's start times,
    no window of one second holds more than 3 starts — and one holds 3 (the limit bound, not a trickle)."""
    flow = queued(kind, "rateLimit: { limit: 3, period: 1s }")
    flow.env["QUEUE_WORK_MS"] = "20"
    runs = admit_queued(flow, 12)
    procs, sampler, thread = race(flow)
    spans = settle(flow, runs, procs, sampler, thread)
    assert sorted(run for _, _, run, _ in spans) == runs  # each run's work exactly once
    starts = sorted(flow.record(run).started_at or 0 for run in runs)
    assert all(starts), starts  # every run's first grant recorded its start
    most = max(sum(1 for t in starts if s <= t < s + 1_000) for s in starts)  # the fullest window [s, s + 1 s)
    assert most == 3, starts
    assert starts[-1] - starts[0] >= 3_000, starts  # 12 starts, 3 a second: 3 windows after the first


@pytest.mark.parametrize("kind", KINDS)
def test_one_worker_starts_due_runs_in_priority_order(kind: str, queued: Callable[[str, str], Payments]) -> None:
    """Ten runs due at once, admitted with priorities as a start records them (``Queue.priority_of``: its CEL
    over the inputs; tests/api/test_queue_api.py), one worker and ``concurrency: 1``: the ledger shows them
    started lowest priority first, equal priorities (none recorded reads 0) in admission order."""
    flow = queued(kind, "concurrency: 1")
    flow.env["QUEUE_WORK_MS"] = "20"
    ranks = [3, None, -2, 3, 0, -2, 7, None, 1, 0]
    runs = [f"p-{i:02d}" for i in range(len(ranks))]
    now = SYSTEM_CLOCK.now_ms()
    with flow.open() as store:
        for i, (run, rank) in enumerate(zip(runs, ranks, strict=True)):
            assert store.admit(Admission.of(run, status="scheduled", due_at=now - 100 + i, workflow="work",
                                            inputs={"id": run, "tenant": "acme"}, queue="q",
                                            priority=rank)).admitted
    procs, sampler, thread = race(flow, workers=1)
    spans = settle(flow, runs, procs, sampler, thread)
    started = [run for _, _, run, _ in sorted(spans)]
    assert started == [run for _, run in sorted((rank or 0, run) for run, rank in zip(runs, ranks, strict=True))]
    assert sampler.most <= 1
