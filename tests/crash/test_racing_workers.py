"""Four ``telo worker`` processes race over one journal (a SQLite file, a file-journal directory, a PostgreSQL
database) and 200 runs of the crash workflow, while the test SIGKILLs a random worker every 0.2–0.8 s and
starts a replacement at once.

The runs are admitted up front with their inputs (as a start does); the workers claim and continue them —
each continues up to ``DEFAULT_CONCURRENCY`` runs at a time, with a fan-out of 3 inside each — through a 200 ms
durable sleep and an await, which a deliverer thread answers (:func:`telo.durable.waits.deliver`) as soon as
a run parks on it. Killing stops after 30 kills or when 80 % of the runs completed, so the rest complete
without kills; the workers must then still be alive (none ended on its own) and are killed at the end.

The ledger (one fsynced line per effect execution: key, step, pid, time) proves that no step executed twice
while its run was claimed by a live worker: an effect repeats only when every earlier execution was by a
worker the test killed, and only after that kill was sent (workflows/harness.py: ``check_ledger``). Every
run completes with the delivered payload. The runs a killed worker held — read off the claims right after
the kill — are taken over by another worker within seconds, although the dead worker's claims still read
live for ~60 s: on one host a claim whose holder process is gone is free at once (telo/journal/claims.py).

The kill schedule is random: its seed is in failure messages and ``TELO_CRASH_SEED=<n>`` replays it.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from telo.clock import SYSTEM_CLOCK
from telo.durable.slots import DEFAULT_CONCURRENCY
from telo.journal.claims import Fence, Holder
from telo.journal.model import Admission, RunFilter, RunRecord
from telo.journal.store import Store
from telo.kinds.resumer import Resumer
from tests.crash.support import KINDS, make_spec
from tests.crash.workflows.harness import (
    WORKFLOW,
    Flow,
    Proc,
    check_completed,
    check_ledger,
    deliver_parked,
)

WORKERS = 4
RUNS = 200
KILL_EVERY_S = (0.2, 0.8)
KILL_UNTIL = 0.8  # stop killing once this share of the runs completed ...
MAX_KILLS = 30  # ... or after this many kills
# A third of the 60 s claim TTL: only the dead-holder rule can explain a takeover this fast. (It is usually
# well under a second; the next sweep of a live worker may wait for the runs of its current sweep.)
TAKEOVER_MAX_S = 20.0
DEADLINE_S = 240.0
EFFECT_MS = "5"


@dataclass
class Takeover:
    run: str
    holder: str
    killed_ns: int
    claim_until: int  # epoch ms the dead worker's claim reads live until
    taken_ns: int | None = None
    by: str | None = None  # the new holder, or the status the run reached


@dataclass
class Race:
    flow: Flow
    store: Store
    rng: random.Random
    ctx: str
    workers: list[Proc] = field(default_factory=list)
    takeovers: list[Takeover] = field(default_factory=list)
    kills: int = 0

    def start_worker(self) -> None:
        self.workers.append(self.flow.start(*self.flow.worker_args("100ms", until_idle=False),
                                            label=f"worker-{len(self.workers) + 1}"))

    def live(self) -> list[Proc]:
        for proc in self.workers:
            if proc.killed_ns is None:
                code = proc.poll()
                assert code is None, f"{self.ctx}: {proc.label} (pid {proc.pid}) exited {code}:\n{proc.output()}"
        return [p for p in self.workers if p.killed_ns is None]

    def kill_one(self) -> None:
        # A random worker among those holding a run right now (any live one if none does): a kill of a worker
        # still starting up, or between sweeps, exercises no takeover — and on a fast machine the 200 runs
        # take only a few seconds, so a handful of such kills could leave the takeover path unexercised.
        live = self.live()
        holders = [Holder.parse(r.claim.holder) for r in self.running() if r.claim is not None]
        busy = [p for p in live if p.pid in {h.pid for h in holders if h is not None}]
        victim = self.rng.choice(busy or live)
        assert self.flow.kill(victim), f"{self.ctx}: {victim.label} was not running"
        self.kills += 1
        self.start_worker()  # a replacement, as a supervisor would start
        # The runs the dead worker held: their claims name its pid and still read live.
        for record in self.running():
            holder = Holder.parse(record.claim.holder) if record.claim is not None else None
            if holder is not None and holder.pid == victim.pid and record.claim is not None:
                assert victim.killed_ns is not None
                self.takeovers.append(Takeover(record.run, record.claim.holder, victim.killed_ns,
                                               record.claim.until))

    def running(self) -> list[RunRecord]:
        return self.store.list_runs(RunFilter(status="running", limit=RUNS + 1)).runs

    def watch_takeovers(self) -> None:
        for t in self.takeovers:
            if t.taken_ns is not None:
                continue
            record = self.store.read_run(t.run)
            assert record is not None
            if record.status != "running":
                t.taken_ns, t.by = time.monotonic_ns(), record.status
            elif record.claim is not None and record.claim.holder != t.holder:
                t.taken_ns, t.by = time.monotonic_ns(), record.claim.holder
            if t.taken_ns is not None:
                assert SYSTEM_CLOCK.now_ms() < t.claim_until, f"{self.ctx}: {t.run} was taken over only after the lapse"

    def completed(self) -> int:
        return len(self.store.list_runs(RunFilter(status="completed", limit=RUNS + 1)).runs)


@pytest.mark.parametrize("kind", KINDS)
def test_racing_workers(kind: str, tmp_path: Path) -> None:
    seed = int(os.environ.get("TELO_CRASH_SEED") or random.randrange(2**32))
    ctx = f"[{kind} seed={seed}]"
    spec = make_spec(kind, tmp_path)
    flow = Flow(spec, tmp_path)
    flow.env["CRASH_EFFECT_MS"] = EFFECT_MS
    store, deliverer_store = spec.open(), spec.open()
    race = Race(flow, store, random.Random(seed), ctx)
    runs = [f"race-{i:03d}" for i in range(RUNS)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def deliverer() -> None:
        try:
            while not stop.is_set():
                deliver_parked(deliverer_store)
                stop.wait(0.05)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    thread = threading.Thread(target=deliverer, daemon=True)
    try:
        for i, run in enumerate(runs):
            assert store.admit(Admission.of(run, workflow=WORKFLOW, inputs={"id": run, "n": i})).admitted
        began = time.monotonic()
        thread.start()
        for _ in range(WORKERS):
            race.start_worker()
        next_kill = time.monotonic() + race.rng.uniform(*KILL_EVERY_S)
        next_poll = 0.0
        done = 0
        while done < RUNS:
            now = time.monotonic()
            assert now - began < DEADLINE_S, f"{ctx}: {done}/{RUNS} runs completed in {DEADLINE_S} s"
            assert not errors, f"{ctx}: the deliverer failed: {errors[0]!r}"
            race.live()
            if now >= next_poll:
                done = race.completed()
                next_poll = now + 0.2
            if now >= next_kill and done < KILL_UNTIL * RUNS and race.kills < MAX_KILLS:
                race.kill_one()
                next_kill = now + race.rng.uniform(*KILL_EVERY_S)
            race.watch_takeovers()
            time.sleep(0.02)
        elapsed = time.monotonic() - began
        assert len(race.live()) == WORKERS, ctx  # every worker not killed by the test is still running
        # While the last workers still run: no claim is left on a completed run but a killed worker's.
        check_completed(store, runs, ctx, dead_claims=True)
        deadline = time.monotonic() + TAKEOVER_MAX_S
        while any(t.taken_ns is None for t in race.takeovers) and time.monotonic() < deadline:
            race.watch_takeovers()
            time.sleep(0.02)
    finally:
        stop.set()
        thread.join(10)
        flow.close()  # SIGKILLs the workers still running
    try:
        assert not errors, f"{ctx}: the deliverer failed: {errors[0]!r}"
        report = check_ledger(flow, store, runs, ctx, max_runs=DEFAULT_CONCURRENCY)
        stuck = [t for t in race.takeovers if t.taken_ns is None]
        assert not stuck, f"{ctx}: runs of killed workers never taken over: {stuck}"
        delays = sorted((t.taken_ns - t.killed_ns) / 1e9 for t in race.takeovers if t.taken_ns is not None)
        assert race.takeovers, f"{ctx}: {race.kills} kills, none of a worker holding a run"
        assert delays[-1] < TAKEOVER_MAX_S, f"{ctx}: takeover delays {delays} s (claims live for 60 s)"
        print(f"\n{ctx}: {RUNS} runs by {len(race.workers)} workers ({race.kills} killed) in {elapsed:.0f} s; "
              f"{len(race.takeovers)} held runs taken over after {delays[0]:.2f}–{delays[-1]:.2f} s "
              f"(median {delays[len(delays) // 2]:.2f} s); {report.lines} effect executions, "
              f"{len(report.repeated)} re-driven after a kill")
    finally:
        store.close()
        deliverer_store.close()



@pytest.mark.parametrize("kind", KINDS)
def test_a_stale_sweep_does_not_execute_a_settled_run(kind: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker may be granted a run that is settled by the time it reads it (a claim guards execution;
    stores do not refuse one on a settled run, and a store's own rule for what is due may differ — an upstream
    process sharing the journal). The worker must then leave the run alone — not replay its body and settle it
    a second time (for a failed run, re-execute the failed step). Here the grant is stale on purpose."""
    import asyncio

    from telo.durable.aio import AsyncStore
    from telo.kinds.controllers import load_application
    from telo.kinds.workflow import Workflow
    from telo.operations.worker import _ref

    spec = make_spec(kind, tmp_path)
    flow = Flow(spec, tmp_path)
    store = spec.open()
    run = "stale-1"
    try:
        flow.telo(*flow.run_args(run, 1))
        flow.deliver(run)
        flow.telo(*flow.worker_args())
        before = store.read_run(run)
        assert before is not None and before.status == "completed"
        ledger = flow.ledger_lines()

        async def stale_claim_due(self: AsyncStore, holder: str, now_ms: int, limit: int,
                                  **filters: object) -> list[tuple[RunRecord, Fence]]:
            fence = await self.claim(run, holder, now_ms)
            record = await self.read_run(run)
            return [] if fence is None or record is None else [(record, fence)]

        async def sweep() -> int:
            app = load_application(flow.manifest, env=flow.env)
            await app.start()
            try:
                wf = app.resources[WORKFLOW]
                assert isinstance(wf, Workflow)
                resumer = Resumer(app, "stale", {"workflow": _ref(wf), "interval": "1s"}, None)
                monkeypatch.setattr(AsyncStore, "claim_due", stale_claim_due)
                return await resumer.sweep()
            finally:
                await app.close()

        assert asyncio.run(sweep()) == 0
        after = store.read_run(run)
        # The stale claim was granted (a fencing token spent) and released; nothing else may differ.
        assert after is not None and after.fence == before.fence + 1
        assert replace(after, fence=before.fence) == before, (
            f"[{kind}] the settled run was touched:\nbefore {before!r}\nafter  {after!r}")
        assert flow.ledger_lines() == ledger
    finally:
        flow.close()
        store.close()
