"""Fair claiming across real worker processes (issue 14).

Observed before: four workers sharing 100 due runs — one worker took all 100 while three idled (each sweep
listed up to 100 due runs and claimed every one it could). Now ``telo worker --concurrency N`` executes at most
N runs at once and claims no more than it can run; the rest stay due for the other workers.

Forty runs are admitted ``scheduled`` a moment ahead, four ``telo worker --concurrency 5 --until-idle`` processes
start meanwhile, and each run's ``prepare`` takes 400 ms. The ledger the effects write (``prepare`` first,
``notify`` last, with the pid) shows each run executed exactly once, no worker ever with more than five runs
in flight, and every worker with a share of the work.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

import pytest

from telo.clock import SYSTEM_CLOCK
from telo.journal.model import Admission
from tests.faults.conftest import KINDS
from tests.faults.support import Line, Payments

RUNS = 40
WORKERS = 4
CONCURRENCY = 5


def most_in_flight(lines: list[Line]) -> int:
    """The most runs one process had between its ``prepare`` and its ``notify`` at any moment."""
    events: list[tuple[int, int]] = []
    for line in lines:
        if line.step == "prepare":
            events.append((line.ns, 1))
        elif line.step == "notify":
            events.append((line.ns, -1))
    most = now = 0
    for _, change in sorted(events, key=lambda e: (e[0], e[1])):  # an end before a start at the same ns
        now += change
        most = max(most, now)
    return most


@pytest.mark.parametrize("kind", KINDS)
def test_workers_share_due_runs_and_none_runs_more_than_its_concurrency(
        kind: str, payments: Callable[..., Payments]) -> None:
    flow = payments(kind, ttl="30s")
    runs = [f"fair-{i:02d}" for i in range(RUNS)]
    due = SYSTEM_CLOCK.now_ms() + 3_000  # after the workers have started
    with flow.open() as store:
        for run in runs:
            assert store.admit(Admission.of(run, status="scheduled", due_at=due, inputs={"id": run},
                                            workflow="pay")).admitted
    workers = [flow.start("worker", str(flow.manifest), "--interval", "100ms", "--until-idle",
                          "--concurrency", str(CONCURRENCY), label=f"w{i}", env={"FAULT_PREPARE_MS": "400"})
               for i in range(WORKERS)]
    for worker in workers:
        assert worker.wait(120) == 0, worker.output()
    for run in runs:
        assert flow.record(run).status == "completed", run
    lines = flow.lines()
    by_step: dict[str, list[str]] = defaultdict(list)
    for line in lines:
        by_step[line.step].append(line.key.split("/")[0])
    for step in ("prepare", "charge", "notify"):
        assert sorted(by_step[step]) == runs, f"{step}: every run exactly once"
    by_pid: dict[int, list[Line]] = defaultdict(list)
    for line in lines:
        by_pid[line.pid].append(line)
    assert set(by_pid) == {w.pid for w in workers}, "every worker executed runs"
    for pid, mine in by_pid.items():
        assert most_in_flight(mine) <= CONCURRENCY, f"worker {pid} had more than {CONCURRENCY} runs in flight"
        assert sum(1 for line in mine if line.step == "notify") >= RUNS // WORKERS // 2, \
            {p: sum(1 for x in m if x.step == "notify") for p, m in by_pid.items()}


def test_a_wake_up_starts_each_run_once_and_at_once(payments: Callable[..., Payments]) -> None:
    """PostgreSQL: two idle workers sweeping once a minute are woken by the NOTIFY of each run admitted due;
    each woken worker claims the named run alone, and of the two exactly one gets it (``SKIP LOCKED``)."""
    flow = payments("postgres", ttl="30s")
    workers = [flow.start("worker", str(flow.manifest), "--interval", "60s", "--concurrency", "4", label=f"w{i}")
               for i in range(2)]
    runs = [f"woken-{i}" for i in range(6)]
    try:
        with flow.open() as store:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and len(_listeners(flow)) < 2:
                time.sleep(0.05)
            assert len(_listeners(flow)) == 2, "the workers did not LISTEN"
            time.sleep(1.0)  # past their first sweep, which found nothing
            started = time.monotonic()
            for run in runs:
                assert store.admit(Admission.of(run, status="scheduled", due_at=SYSTEM_CLOCK.now_ms(),
                                                inputs={"id": run}, workflow="pay")).admitted
            while time.monotonic() - started < 20 and \
                    any(store.read_run(run).status != "completed" for run in runs):  # type: ignore[union-attr]
                time.sleep(0.05)
            took = time.monotonic() - started
        assert took < 20, "woken runs did not complete: the workers waited for their next sweep"
        notified = [line.key.split("/")[0] for line in flow.lines() if line.step == "notify"]
        assert sorted(notified) == runs  # each exactly once
    finally:
        for worker in workers:
            worker.signal(15)
        for worker in workers:
            assert worker.wait(60) == 143, worker.output()


def _listeners(flow: Payments) -> list[int]:
    import psycopg

    channel = f"{flow.spec.table}_wake".lower()
    with psycopg.connect(flow.spec.location, autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE query = %s", (f'LISTEN "{channel}"',)).fetchall()
    return [r[0] for r in rows]
