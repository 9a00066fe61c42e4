"""Fairness across workers on one queue (issue 16's bar: "with 4 workers each runs 15–35 % of 400 runs"), on SQLite
and PostgreSQL.

400 short runs (~40 ms of work each) of a workflow on a ``Local.Queue`` with ``concurrency: 4`` are admitted as a
start admits them, due only once four ``telo worker`` processes (each able to run 10 at once) have opened the
journal. The ledger the step writes (``tests/faults/workflows/queued_work.py``: start and end lines with the pid)
says which process ran each run: every run exactly once, never more than 4 at once, and each worker between
15 % and 35 % of them — with ``--until-idle`` (the worker's own claim loop) and serving until stopped (the
resumer's loop).

Observed before (runs per worker of the 400, ``--until-idle``, a quiet machine; telo.kinds.fair_share has the
fix): SQLite 0 / 0 / 400 / 0, 0 / 0 / 76 / 324, 19 / 131 / 52 / 198, 102 / 182 / 58 / 58; PostgreSQL
58 / 75 / 250 / 17, 100 / 145 / 50 / 105, 214 / 24 / 119 / 43 — a worker whose queued run ended claimed the freed
slot again at once, while the others only looked at their next sweep (every 100 ms), so whoever filled the
queue's four slots first kept most of them. After: 24–27 % each, every run, on both journals.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from telo.clock import SYSTEM_CLOCK
from telo.journal.model import Admission
from tests.faults.support import JOURNALS, Payments, Proc
from tests.queue_manifests import fault_header, queued_work_flow

KINDS = ("sqlite", "postgres")
RUNS = 400
WORKERS = 4
CONCURRENCY = 4
LOW, HIGH = 0.15, 0.35  # the bar, per worker


@pytest.fixture
def fair(tmp_path: Path) -> Iterator[Callable[[str], Payments]]:
    made: list[Payments] = []

    def make(kind: str) -> Payments:
        flow = Payments(kind, tmp_path / kind)
        module, location = JOURNALS[kind]
        flow.manifest.write_text(fault_header("Fair", module, location, queues={"q": f"concurrency: {CONCURRENCY}"})
                                 + queued_work_flow("work", "q"))
        flow.env["QUEUE_LEDGER"] = str(flow.ledger)  # (queued_work.py is on its PYTHONPATH: tests/faults/workflows)
        flow.env["QUEUE_WORK_MS"] = "40"
        made.append(flow)
        return flow

    yield make
    for flow in made:
        flow.close()


def admit(flow: Payments, due_ms: int) -> list[str]:
    """What starts of the queued workflow admit (scheduled, the queue recorded), due at ``due_ms``."""
    runs = [f"f-{i:03d}" for i in range(RUNS)]
    with flow.open() as store:
        for run in runs:
            assert store.admit(Admission.of(run, status="scheduled", due_at=due_ms, inputs={"id": run, "tenant": "t"},
                                            workflow="work", queue="q")).admitted
    return runs


def journal_open(flow: Payments, proc: Proc) -> bool:
    """Has ``proc`` opened the journal (SQLite: the file; PostgreSQL: a socket — its first connection)?"""
    try:
        targets = [os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{proc.pid}/fd")]
    except OSError:
        return False
    if flow.kind == "sqlite":
        return flow.spec.location in targets
    return any(t.startswith("socket:") for t in targets)


def bring_due(flow: Payments) -> None:
    """Every run of the queue due now, in one statement: all workers are up, none gets a head start."""
    now = SYSTEM_CLOCK.now_ms()
    if flow.kind == "sqlite":
        import sqlite3

        with sqlite3.connect(flow.spec.location, timeout=30) as conn:
            conn.execute("UPDATE telo_durable_runs SET due_at = ? WHERE queue = 'q'", (now,))
        return
    import psycopg
    from psycopg import sql

    assert flow.spec.table is not None
    with psycopg.connect(flow.spec.location, autocommit=True) as pg:
        pg.execute(sql.SQL("UPDATE {} SET due_at = %s WHERE queue = 'q'").format(
            sql.Identifier(f"{flow.spec.table.lower()}_runs")), (now,))


def shares(flow: Payments, workers: list[Proc]) -> tuple[list[int], int]:
    """Runs each worker ran (in ``workers``' order), and the most runs in progress at once."""
    ends: Counter[int] = Counter()
    events: list[tuple[int, int]] = []
    seen: Counter[str] = Counter()
    for raw in flow.ledger.read_text().splitlines():
        run, _, what, pid, ns = raw.split(" ")
        events.append((int(ns), 1 if what == "start" else -1))
        if what == "end":
            ends[int(pid)] += 1
            seen[run] += 1
    assert len(seen) == RUNS and set(seen.values()) == {1}, "each run's work exactly once"
    most = now = 0
    for _, change in sorted(events):  # an end before a start at the same ns
        now += change
        most = max(most, now)
    return [ends[w.pid] for w in workers], most


@pytest.mark.parametrize("mode", ["until-idle", "serving"])
@pytest.mark.parametrize("kind", KINDS)
def test_four_workers_share_a_queue(kind: str, mode: str, fair: Callable[[str], Payments]) -> None:
    """``until-idle``: ``telo worker --until-idle`` (its own claim loop, telo.operations.worker); ``serving``: a
    worker serving until stopped (the resumer's loop, which on PostgreSQL also listens for wake-ups)."""
    flow = fair(kind)
    # Due well within --until-idle's horizon (the workers wait for it) but only when brought forward.
    runs = admit(flow, SYSTEM_CLOCK.now_ms() + 45_000)
    idle = ["--until-idle"] if mode == "until-idle" else []
    workers = [flow.start("worker", str(flow.manifest), "--interval", "100ms", *idle, "--concurrency", "10",
                          label=f"w{i}") for i in range(WORKERS)]
    deadline = time.monotonic() + 40
    while not all(journal_open(flow, w) for w in workers):
        assert time.monotonic() < deadline, "the workers did not open the journal within 40 s"
        time.sleep(0.05)
    time.sleep(0.3)  # past each one's first sweep
    bring_due(flow)
    if mode == "serving":
        deadline = time.monotonic() + 120
        while flow.ledger.read_text().count(" end ") < RUNS:
            assert time.monotonic() < deadline, "the workers did not run every run within 120 s"
            time.sleep(0.05)
        for worker in workers:
            worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(120) == (0 if mode == "until-idle" else 128 + signal.SIGTERM), worker.output()
    for run in (runs[0], runs[-1]):
        assert flow.record(run).status == "completed", run
    counts, most = shares(flow, workers)
    said = f"{kind}, {mode}: runs per worker {counts} ({' / '.join(f'{c / RUNS:.0%}' for c in counts)})"
    print(f"{said}, at most {most} at once")
    assert most <= CONCURRENCY
    assert all(LOW * RUNS <= c <= HIGH * RUNS for c in counts), said
