"""Claims under a real race: worker processes sweep one journal, and a run is only ever executed by one.

Workers (:mod:`tests.crash.child_worker`) loop ``due_runs`` → ``claim`` → execute, writing ``start`` and
``end`` lines to a shared fsynced ledger while they hold the claim, then ``complete`` the run. From the
ledger the parent checks, per run, that no two holders' [start, end] intervals overlap — a worker that was
SIGKILLed mid-execution has its interval end at the moment the parent sent the signal, so a takeover
before the kill would show — that every run completed, and (without kills) that every run was executed
exactly once.

- killed workers: the runs a dead worker held are taken over AT ONCE (claims.py: the holder process is gone
  from this host), long before its claim would lapse — the TTL is set far above the latency allowed;
- a holder on another host cannot be observed: its claim is refused until the TTL passes, then taken over.

The kill schedule is random; its seed is in failure messages, and ``TELO_CRASH_SEED=<n>`` replays it.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from telo.clock import SYSTEM_CLOCK
from telo.journal.claims import Holder
from telo.journal.model import Admission, RunFilter
from telo.journal.store import Store
from tests.crash.support import KINDS, Child, StoreSpec, make_spec

WORKER = "tests.crash.child_worker"
RACE_RUNS = [f"race-{i:03d}" for i in range(200)]
SHORT_TTL_MS = 2_000
# With kills the TTL is long on purpose: a takeover within TAKEOVER_MAX_S can only be the dead-holder rule,
# never a lapse, so the test proves the immediate takeover rather than waiting it out.
KILL_TTL_MS = 30_000
TAKEOVER_MAX_S = 5.0
WORK_MS = 10.0
DEADLINE_S = 90.0
MAX_KILLS = 5


@dataclass
class Interval:
    run: str
    holder: str
    start_ns: int
    start_wall_ms: int
    end_ns: int | None = None


@dataclass
class Fleet:
    """The worker processes of one test, all reaped by :meth:`close` (called from a ``finally``)."""

    spec: StoreSpec
    tmp_path: Path
    ttl_ms: int
    ledger: Path = field(init=False)
    stop_file: Path = field(init=False)
    children: dict[str, Child] = field(default_factory=dict)
    holders: dict[str, str] = field(default_factory=dict)  # holder text -> worker name
    killed: dict[str, int] = field(default_factory=dict)  # holder text -> monotonic ns the SIGKILL was sent

    def __post_init__(self) -> None:
        self.ledger = self.tmp_path / "ledger.txt"
        self.stop_file = self.tmp_path / "stop"

    def start(self, name: str) -> None:
        argv = [*self.spec.argv(), "--name", name, "--ledger", str(self.ledger), "--stop-file",
                str(self.stop_file), "--ttl-ms", str(self.ttl_ms), "--work-ms", str(WORK_MS)]
        self.children[name] = Child(WORKER, argv, self.tmp_path / f"{name}.err")

    def pump(self) -> Iterator[tuple[str, str]]:
        """Lines the workers printed since the last call; fails if a worker ended on its own."""
        for name, child in list(self.children.items()):
            while not child.lines.empty():
                line = child.lines.get_nowait()
                if line is None:
                    assert child.proc.wait() == 0 or self._is_killed(child), (
                        f"worker {name} exited with {child.proc.returncode}:\n{child.stderr_text()}"
                    )
                    continue
                if line.startswith("ready "):
                    self.holders[line.removeprefix("ready ")] = name
                yield name, line

    def _is_killed(self, child: Child) -> bool:
        return child.proc.returncode == -9

    def kill(self, name: str) -> None:
        child = self.children[name]
        holder = next(h for h, n in self.holders.items() if n == name)
        assert child.proc.poll() is None, f"worker {name} is not running"
        self.killed[holder] = time.monotonic_ns()  # before the signal: the process is dead only later
        child.kill()
        assert child.proc.returncode == -9

    def stop(self) -> None:
        """Let the live workers finish their round and exit; each must exit cleanly."""
        self.stop_file.touch()
        for name, child in self.children.items():
            if child.proc.returncode == -9:
                continue
            try:
                status = child.proc.wait(timeout=20)
            except Exception as exc:
                raise AssertionError(f"worker {name} did not stop:\n{child.stderr_text()}") from exc
            assert status == 0, f"worker {name} exited with {status}:\n{child.stderr_text()}"

    def close(self) -> None:
        for child in self.children.values():
            child.reap()

    def intervals(self) -> dict[str, list[Interval]]:
        """The ledger as per-run execution intervals in start order."""
        by_run: dict[str, list[Interval]] = defaultdict(list)
        open_: dict[tuple[str, str], Interval] = {}
        for raw in self.ledger.read_text().splitlines():
            word, run, holder, ns, wall = raw.split(" ")
            assert word != "lost", f"ledger: {raw!r} — a live claim was taken over"
            if word == "start":
                assert (run, holder) not in open_, f"ledger: {holder} started {run} twice"
                open_[(run, holder)] = iv = Interval(run, holder, int(ns), int(wall))
                by_run[run].append(iv)
            else:
                assert word == "end", raw
                open_.pop((run, holder)).end_ns = int(ns)
        for ivs in by_run.values():
            ivs.sort(key=lambda iv: iv.start_ns)
        return by_run


def _admit_all(store: Store, runs: list[str]) -> None:
    for run in runs:
        assert store.admit(Admission.of(run, workflow="race")).admitted


def _completed(store: Store, limit: int) -> int:
    return len(store.list_runs(RunFilter(status="completed", limit=limit)).runs)


def _check_no_overlap(fleet: Fleet, by_run: dict[str, list[Interval]], ctx: str) -> list[float]:
    """Per run, each interval ends (or its holder was killed) before the next starts; returns takeover delays."""
    takeovers: list[float] = []
    for run, ivs in by_run.items():
        for a, b in itertools.pairwise(ivs):
            if a.end_ns is None:
                assert a.holder in fleet.killed, f"{ctx}: {a.holder} left {run} open but was never killed"
                end = fleet.killed[a.holder]
                takeovers.append((b.start_ns - end) / 1e9)
            else:
                end = a.end_ns
            assert end <= b.start_ns, (
                f"{ctx}: run {run}: {b.holder} started {(end - b.start_ns) / 1e6:.3f} ms before "
                f"{a.holder}'s execution ended{' (by SIGKILL)' if a.end_ns is None else ''}"
            )
        assert ivs[-1].end_ns is not None, f"{ctx}: run {run}: last execution by {ivs[-1].holder} never ended"
    return takeovers


def _check_completed(
    store: Store, fleet: Fleet, by_run: dict[str, list[Interval]], runs: list[str], ctx: str
) -> None:
    for run in runs:
        record = store.read_run(run)
        assert record is not None and record.status == "completed", f"{ctx}: {run} reads {record!r}"
        assert record.claim is None, f"{ctx}: completed {run} still claimed: {record.claim!r}"
        assert run in by_run, f"{ctx}: {run} completed without an execution in the ledger"
        # The completer is the holder of the last execution (it wrote `end` just before completing).
        assert record.decoded_result() == {"by": fleet.holders[by_run[run][-1].holder]}, (
            f"{ctx}: {run} completed by {record.decoded_result()!r}, last executed by {by_run[run][-1].holder}"
        )


def _wait_all_completed(
    store: Store, fleet: Fleet, total: int, ctx: str, on_line: Callable[[str, str], None] | None = None
) -> None:
    deadline = time.monotonic() + DEADLINE_S
    next_poll = 0.0
    while True:
        for name, line in fleet.pump():
            if on_line is not None:
                on_line(name, line)
        now = time.monotonic()
        if now >= next_poll:
            if _completed(store, total + 1) == total:
                return
            next_poll = now + 0.2
        assert now < deadline, f"{ctx}: only {_completed(store, total + 1)}/{total} runs completed in {DEADLINE_S} s"
        time.sleep(0.001)


@pytest.mark.parametrize("kind", KINDS)
def test_four_workers_execute_each_run_exactly_once(kind: str, tmp_path: Path) -> None:
    spec = make_spec(kind, tmp_path)
    ctx = f"[{kind}]"
    store = spec.open()
    fleet = Fleet(spec, tmp_path, SHORT_TTL_MS)
    try:
        _admit_all(store, RACE_RUNS)
        began = time.monotonic()
        for n in range(1, 5):
            fleet.start(f"w{n}")
        _wait_all_completed(store, fleet, len(RACE_RUNS), ctx)
        elapsed = time.monotonic() - began
        fleet.stop()
        list(fleet.pump())  # the `ready` lines of workers that were slow to start, for the holder names
        by_run = fleet.intervals()
        _check_no_overlap(fleet, by_run, ctx)
        for run in RACE_RUNS:
            assert len(by_run[run]) == 1, f"{ctx}: {run} executed {len(by_run[run])} times: {by_run[run]}"
        _check_completed(store, fleet, by_run, RACE_RUNS, ctx)
        per_worker = sorted(sum(1 for ivs in by_run.values() if ivs[0].holder == h) for h in fleet.holders)
        print(f"\n{kind}: 200 runs by 4 workers in {elapsed:.1f} s, runs per worker {per_worker}")
    finally:
        fleet.close()
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_runs_of_killed_workers_are_taken_over_at_once(kind: str, tmp_path: Path) -> None:
    spec = make_spec(kind, tmp_path)
    seed = int(os.environ.get("TELO_CRASH_SEED") or random.randrange(2**32))
    rng = random.Random(seed)
    ctx = f"[{kind} seed={seed}]"
    store = spec.open()
    fleet = Fleet(spec, tmp_path, KILL_TTL_MS)
    # Kill when the n-th `start` line (over all workers) arrives, until two kills have cut an execution
    # (a kill can land after the worker already wrote `end`, on a loaded machine); at most MAX_KILLS.
    next_kill = rng.randint(20, 100)
    starts, cuts = 0, 0  # cuts: kills that (by the ledger right after) caught the announced run mid-way
    kill_starts: list[int] = []
    replacements = iter(f"w{n}" for n in range(5, 5 + MAX_KILLS))

    def on_line(name: str, line: str) -> None:
        nonlocal starts, cuts, next_kill
        if not line.startswith("start "):
            return
        starts += 1
        if starts != next_kill or cuts >= 2 or len(fleet.killed) >= MAX_KILLS:
            return
        if fleet.children[name].proc.poll() is not None:
            next_kill += 1
            return
        # A few ms into the execution: the worker holds the claim, is sleeping, renewing or writing `end`.
        time.sleep(rng.uniform(0, WORK_MS / 2000))
        fleet.kill(name)
        kill_starts.append(starts)
        holder = next(h for h, n in fleet.holders.items() if n == name)
        ended = f"end {line.removeprefix('start ')} {holder} "
        cuts += not any(raw.startswith(ended) for raw in fleet.ledger.read_text().splitlines())
        next_kill = starts + rng.randint(5, 40)
        fleet.start(next(replacements))  # a NEW holder name (and process), as a restarted worker has

    try:
        _admit_all(store, RACE_RUNS)
        for n in range(1, 5):
            fleet.start(f"w{n}")
        _wait_all_completed(store, fleet, len(RACE_RUNS), ctx, on_line)
        fleet.stop()
        list(fleet.pump())
        by_run = fleet.intervals()
        takeovers = _check_no_overlap(fleet, by_run, ctx)
        # The kills cut executions mid-way (each cut one is followed by another holder's, or the overlap
        # check above failed) ...
        assert takeovers, f"{ctx}: {len(fleet.killed)} kills at starts {kill_starts} cut no execution"
        # ... and another worker took them over immediately, not after the 30 s claim lapsed.
        assert max(takeovers) < TAKEOVER_MAX_S, f"{ctx}: takeover delays {takeovers} s (TTL {KILL_TTL_MS} ms)"
        _check_completed(store, fleet, by_run, RACE_RUNS, ctx)
        for run, ivs in by_run.items():
            if all(iv.end_ns is not None for iv in ivs):
                assert len(ivs) == 1 or any(iv.holder in fleet.killed for iv in ivs), f"{ctx}: {run}: {ivs}"
        print(f"\n{kind}: killed {len(fleet.killed)} workers at starts {kill_starts}; "
              f"cut executions taken over after {[round(t * 1000) for t in takeovers]} ms")
    finally:
        fleet.close()
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_remote_holders_claim_is_taken_over_only_after_it_lapses(kind: str, tmp_path: Path) -> None:
    spec = make_spec(kind, tmp_path)
    ctx = f"[{kind}]"
    runs = [f"lapse-{i:02d}" for i in range(20)]
    remote_runs = runs[::4]
    # A holder on another host: nothing here can tell whether it still runs, so only its TTL frees the run.
    remote = Holder("remote", "other-host", 1, 1).to_text()
    me = Holder.for_this_process("probe").to_text()
    store = spec.open()
    fleet = Fleet(spec, tmp_path, SHORT_TTL_MS)
    try:
        _admit_all(store, runs)
        t0 = SYSTEM_CLOCK.now_ms()
        for run in remote_runs:
            assert store.claim(run, remote, SHORT_TTL_MS, t0)
        until = t0 + SHORT_TTL_MS
        for run in remote_runs:
            assert not store.claim(run, me, SHORT_TTL_MS, t0 + 1), f"{ctx}: live remote claim of {run} taken"
            assert not store.claim(run, me, SHORT_TTL_MS, until - 1), f"{ctx}: {run} taken 1 ms before lapse"
        assert not set(store.due_runs(until - 1, 100)) & set(remote_runs)
        assert set(remote_runs) <= set(store.due_runs(until, 100)), f"{ctx}: lapsed claims not due"

        fleet.start("w1")
        fleet.start("w2")
        # While the remote claims are live the workers finish everything else and leave those alone.
        while SYSTEM_CLOCK.now_ms() < until - 300:
            list(fleet.pump())
            time.sleep(0.01)
        for run in remote_runs:
            record = store.read_run(run)
            assert record is not None and record.status == "running", f"{ctx}: {run} reads {record!r}"
            assert record.claim is not None and record.claim.holder == remote, f"{ctx}: {record.claim!r}"
        _wait_all_completed(store, fleet, len(runs), ctx)
        fleet.stop()
        list(fleet.pump())
        by_run = fleet.intervals()
        _check_no_overlap(fleet, by_run, ctx)
        _check_completed(store, fleet, by_run, runs, ctx)
        for run in remote_runs:
            assert [len(by_run[run])] == [1] and by_run[run][0].start_wall_ms >= until, (
                f"{ctx}: {run} executed at {[iv.start_wall_ms - until for iv in by_run[run]]} ms after the lapse"
            )
    finally:
        fleet.close()
        store.close()
