"""``telo queues set`` changes a running worker's limits without a restart (issue 16; docs/proposals/
admission-control.md "Visibility"), on SQLite and PostgreSQL.

One ``telo worker`` (able to run 10 at once) works through 40 due runs of a ``Local.Queue`` with ``concurrency:
1``, each ~200 ms of work. A sampler thread reads the journal every ~10 ms and counts the queue's runs holding a
slot (``running`` under a live claim). Once a few runs are done, ``telo queues set … --concurrency 3`` writes the
override row; the worker — the same process throughout, never restarted — reads it at a claim within about a
second (telo.kinds.queue_overrides) and from then on holds up to 3 slots. Judged from the journal and the
ledger, never from timing: before the command started, never more than 1 held; afterwards up to 3, never more;
every run's work done once, all by the one worker process.

Before this change there was no ``telo queues set`` (and no override a worker read): the limits were the
manifest's, read when the worker started, and the worker ran the 40 runs one at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from telo.clock import SYSTEM_CLOCK
from telo.journal.rules import claim_is_live
from tests.faults.support import JOURNALS, Payments
from tests.faults.test_queue_workers import MANIFEST, admit_queued, intervals, most_at_once

RUNS = 40


@dataclass
class Samples:
    """(monotonic s, slots held) read from the journal every ~10 ms until stopped."""

    flow: Payments
    seen: list[tuple[float, int]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with self.flow.open() as store:
            while not self.stop.is_set():
                now = SYSTEM_CLOCK.now_ms()
                held = sum(1 for r in store.runs_of_queue("q") if r.status == "running" and claim_is_live(r.claim, now))
                self.seen.append((time.monotonic(), held))
                time.sleep(0.01)

    def most(self, since: float = 0.0, until: float = float("inf")) -> int:
        return max((n for at, n in self.seen if since <= at < until), default=0)


@pytest.fixture
def flow(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Payments]:
    kind = request.param
    made = Payments(kind, tmp_path / kind)
    module, location = JOURNALS[kind]
    made.manifest.write_text(MANIFEST.format(module=module, location=location, limits="concurrency: 1"))
    made.env["QUEUE_LEDGER"] = str(made.ledger)
    made.env["QUEUE_WORK_MS"] = "200"
    yield made
    made.close()


@pytest.mark.parametrize("flow", ["sqlite", "postgres"], indirect=True)
def test_queues_set_raises_a_running_workers_concurrency_without_a_restart(flow: Payments) -> None:
    runs = admit_queued(flow, RUNS)
    samples = Samples(flow)
    sampler = threading.Thread(target=samples.run, daemon=True)
    sampler.start()
    worker = flow.start("worker", str(flow.manifest), "--interval", "100ms", "--until-idle", "--concurrency", "10",
                        label="worker")
    try:
        deadline = time.monotonic() + 30
        while flow.ledger.read_text().count(" end ") < 4:  # the worker is well under way, one run at a time
            assert time.monotonic() < deadline and worker.popen.poll() is None, worker.output()
            time.sleep(0.01)
        asked = time.monotonic()
        out = flow.cli("queues", "set", str(flow.manifest), "q", "--concurrency", "3", "--by", "test")
        assert out.returncode == 0, out.stdout + out.stderr
        assert "override: concurrency 3 (manifest: 1); set by test at " in out.stdout, out.stdout
        assert worker.wait(60) == 0, worker.output()
    finally:
        samples.stop.set()
        sampler.join(10)
    for run in runs:
        assert flow.record(run).status == "completed", run
    before, after = samples.most(until=asked), samples.most(since=asked)
    assert len(samples.seen) > 50 and before == 1, (before, len(samples.seen))
    assert after == 3, (after, samples.seen[-200:])  # the new limit reached, by the process that ran before
    spans = intervals(flow)
    assert sorted(run for _, _, run, _ in spans) == runs  # each run's work exactly once
    assert {line.split(" ")[3] for line in flow.ledger.read_text().splitlines()} == {str(worker.pid)}
    assert most_at_once([s for s in spans if s[0] < int(asked * 1e9)]) == 1  # (monotonic ns: the ledger's clock)
    assert most_at_once(spans) == 3
