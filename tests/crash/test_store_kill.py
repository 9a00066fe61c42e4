"""kill -9 during appends: whatever a store acknowledged survives a SIGKILL of the writing process.

For each durable store, a chain of child processes (:mod:`tests.crash.child_appender`) works through one
deterministic op plan (:mod:`tests.crash.plan`) over two runs: typed step entries with targets, decisions,
parks with a delivery at the park path and the unpark, and claim renewals. Each child prints an ack line
once a call has RETURNED; the parent SIGKILLs it at a random moment — a few ms after it opened the store,
after a random number of acks, or around the time it opens the store — and the next child resumes at the
first unacknowledged op (first writer wins makes redoing an op that did land harmless).

After every kill a FRESH store instance must open; every acknowledged entry must be there with exactly its
record and its acknowledged seq, in plan order, with at most the one in-flight entry after them; entries come
in seq order with unique paths; each run record reads with a status the acks allow; and an append works.
A final child that is not killed runs the plan further and the runs then hold exactly the planned entries.

The kill schedule is random; its seed is in every failure message, and ``TELO_CRASH_SEED=<n>`` replays it.
"""

from __future__ import annotations

import itertools
import os
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from telo.journal.model import Admission, Entry, RunRecord
from telo.journal.store import Store
from tests.crash.plan import RUNS, Op, _generated, plan, status_after
from tests.crash.support import KINDS, Child, StoreSpec, make_spec

KILLS = 50  # SIGKILLs of a child that had opened the store and was working, per store
LINE_TIMEOUT_S = 30.0  # no output for this long means the child hangs (a lock never released, …)
APPENDER = "tests.crash.child_appender"


@dataclass
class Progress:
    """What the parent knows from the ack lines of every child so far."""

    next_op: int = 0  # ops 0..next_op-1 were acknowledged; op next_op may have landed unacknowledged
    admitted: set[str] = field(default_factory=set)
    seqs: dict[tuple[str, str], int] = field(default_factory=dict)  # (run, path) -> acknowledged seq
    last_seq: dict[str, int] = field(default_factory=dict)
    probes: int = 0  # entries the parent appended to the probe run after kills


@dataclass
class KillStats:
    counted: int = 0  # killed after `ready`: the store was open and the child at work
    before_ready: int = 0  # killed during interpreter start or while opening the store
    ready_latency: list[float] = field(default_factory=list)
    verify_s: list[float] = field(default_factory=list)


def _absorb(lines: list[str], progress: Progress, ctx: str) -> bool:
    """Check the child's lines against the plan and advance ``progress``; True if it printed ``ready``."""
    ready = False
    for line in lines:
        if line == "ready":
            ready = True
        elif line == "finished":
            pass
        elif line.startswith("admitted "):
            progress.admitted.add(line.removeprefix("admitted "))
        elif line.startswith(("ack ", "done ")):
            op = plan(progress.next_op + 1)[progress.next_op]
            word, rest = line.split(" ", 1)
            if word == "ack":
                path, seq_text = rest.rsplit(" ", 1)
                assert op.kind == "append" and op.entry is not None and op.entry.path == path, (
                    f"{ctx}: ack {line!r} does not match op {progress.next_op} {op!r}"
                )
                seq = int(seq_text)
                previous = progress.last_seq.get(op.run)
                assert previous is None or seq > previous, (
                    f"{ctx}: run {op.run!r} acked seq {seq} for {path!r} after seq {previous}"
                )
                progress.seqs[(op.run, path)] = seq
                progress.last_seq[op.run] = seq
            else:
                kind, run = rest.split(" ", 1)
                assert (op.kind, op.run) == (kind, run), f"{ctx}: {line!r} does not match op {op!r}"
            progress.next_op += 1
        else:
            raise AssertionError(f"{ctx}: unexpected child output {line!r}")
    return ready


def _verify(spec: StoreSpec, progress: Progress, ctx: str, *, in_flight: bool = True) -> None:
    """A fresh instance sees everything acknowledged, nothing beyond the in-flight op, and still appends."""
    ops = plan(progress.next_op + 1)
    done, pending = ops[: progress.next_op], ops[progress.next_op] if in_flight else None
    store = spec.open()  # must not raise: a crash leaves nothing a fresh open refuses
    try:
        for run in RUNS:
            record = store.read_run(run)
            entries = store.read_entries(run)
            if record is None:
                assert run not in progress.admitted, f"{ctx}: admitted run {run!r} is gone"
                assert entries == [], f"{ctx}: run {run!r} has no record but entries {entries[:3]!r}"
                continue
            _check_entries(run, entries, done, pending, progress, ctx)
            _check_status(store, run, record, done, pending, ctx)
        # The store still takes writes after the crash (its torn tail, lock or transaction recovered).
        store.admit(Admission.of("probe"))
        path = f"after-kill/{progress.probes}"
        stored = store.append("probe", Entry.decided(path, "value", progress.probes))
        assert stored.path == path and stored.decode("probe") == progress.probes, f"{ctx}: probe {stored!r}"
        progress.probes += 1
        probe_paths = [e.path for e in store.read_entries("probe")]
        assert probe_paths == [f"after-kill/{n}" for n in range(progress.probes)], f"{ctx}: {probe_paths}"
    finally:
        store.close()


def _check_entries(
    run: str, entries: list[Entry], done: tuple[Op, ...], pending: Op | None, progress: Progress, ctx: str
) -> None:
    seqs = [e.seq for e in entries]
    assert all(s is not None for s in seqs), f"{ctx}: run {run!r} has an entry without seq"
    assert all(a < b for a, b in itertools.pairwise(seqs)), f"{ctx}: {run!r} seqs not increasing"
    paths = [e.path for e in entries]
    assert len(set(paths)) == len(paths), f"{ctx}: run {run!r} lists a path twice"
    expected = [op.entry for op in done if op.run == run and op.entry is not None]
    extra = pending.entry if pending is not None and pending.run == run else None
    allowed = {len(expected)} | ({len(expected) + 1} if extra is not None else set())
    assert len(entries) in allowed, (
        f"{ctx}: run {run!r} has {len(entries)} entries, acks allow {sorted(allowed)}; "
        f"missing: {[e.path for e in expected if e.path not in set(paths)][:5]}, "
        f"unexpected: {[p for p in paths if p not in {e.path for e in expected}][:5]}"
    )
    for got, want in zip(entries, [*expected, extra], strict=False):
        assert want is not None
        assert got.same_record(want), (
            f"{ctx}: run {run!r} entry at seq {got.seq}: stored {got!r}, acknowledged {want!r}"
        )
        acked = progress.seqs.get((run, want.path))
        assert acked is None or got.seq == acked, (
            f"{ctx}: run {run!r} entry {want.path!r} was acked with seq {acked}, now has seq {got.seq}"
        )


def _check_status(
    store: Store, run: str, record: RunRecord, done: tuple[Op, ...], pending: Op | None, ctx: str
) -> None:
    status, parked = record.status, record.parked
    allowed = [status_after(done, run)]
    if pending is not None and pending.run == run and pending.kind in ("park", "unpark"):
        allowed.append(status_after((*done, pending), run))
    got = (status, None if parked is None else (parked.path, parked.token, parked.at))
    want = [(s, None if p is None else (p.path, p.token, p.at)) for s, p in allowed]
    assert got in want, f"{ctx}: run {run!r} reads {got}, acks allow {want}"
    if parked is not None and parked.token is not None:
        by_token = store.run_parked_on(parked.token)
        assert by_token is not None and by_token.run == run, f"{ctx}: run_parked_on -> {by_token!r}"


def _drive(child: Child, mode: str, rng: random.Random, stats: KillStats) -> tuple[list[str], bool]:
    """Run the child until the kill moment of ``mode``, SIGKILL it; returns (lines read, saw ready)."""
    lines: list[str] = []
    started = time.monotonic()

    def next_line(timeout: float) -> str:
        line = child.lines.get(timeout=timeout)
        if line is None:
            raise AssertionError(f"child exited on its own (status {child.proc.wait()}):\n{child.stderr_text()}")
        lines.append(line)
        return line

    if mode == "open":
        # Around the moment the store is being opened (or the run admitted): recovery must survive a kill too.
        typical = statistics.median(stats.ready_latency) if stats.ready_latency else 0.3
        time.sleep(rng.uniform(0.7, 1.15) * typical)
    else:
        while next_line(LINE_TIMEOUT_S) != "ready":
            pass
        stats.ready_latency.append(time.monotonic() - started)
        if mode == "delay":
            time.sleep(rng.uniform(0.005, 0.080))
        else:
            wanted = rng.choice([rng.randint(1, 5), rng.randint(1, 60)])
            seen = 0
            while seen < wanted:
                line = next_line(LINE_TIMEOUT_S)
                seen += line.startswith(("ack ", "done "))
    assert child.proc.poll() is None, f"child exited on its own ({child.proc.returncode}):\n{child.stderr_text()}"
    child.kill()
    assert child.proc.returncode == -9, f"child ended with {child.proc.returncode}, not by SIGKILL"
    lines += child.reap()
    return lines, "ready" in lines


@pytest.mark.parametrize("kind", KINDS)
def test_kill_9_during_appends_loses_no_acknowledged_entry(kind: str, tmp_path: Path) -> None:
    spec = make_spec(kind, tmp_path)
    seed = int(os.environ.get("TELO_CRASH_SEED") or random.randrange(2**32))
    rng = random.Random(seed)
    progress, stats = Progress(), KillStats()
    began = time.monotonic()
    iteration = 0
    while stats.counted < KILLS:
        ctx = f"[{kind} seed={seed} iteration={iteration} next_op={progress.next_op}]"
        mode = rng.choices(["acks", "delay", "open"], weights=[45, 45, 10])[0]
        argv = [*spec.argv(), "--start", str(progress.next_op), "--name", f"appender-{iteration}"]
        child = Child(APPENDER, argv, tmp_path / f"appender-{iteration}.err")
        try:
            lines, ready = _drive(child, mode, rng, stats)
        finally:
            child.reap()
        if ready:
            stats.counted += 1
        else:
            stats.before_ready += 1
        _absorb(lines, progress, ctx)
        t = time.monotonic()
        _verify(spec, progress, ctx)
        stats.verify_s.append(time.monotonic() - t)
        iteration += 1

    # A last child that is not killed: the plan continues, and the runs hold exactly the planned entries.
    stop = progress.next_op + 40
    ctx = f"[{kind} seed={seed} final child, ops {progress.next_op}..{stop}]"
    child = Child(APPENDER, [*spec.argv(), "--start", str(progress.next_op), "--stop", str(stop)],
                  tmp_path / "appender-final.err")
    try:
        status = child.proc.wait(timeout=60)
    finally:
        lines = child.reap()
    assert status == 0, f"{ctx}: exit {status}\n{child.stderr_text()}"
    assert lines[-1] == "finished", f"{ctx}: {lines[-3:]}"
    _absorb(lines, progress, ctx)
    assert progress.next_op == stop
    _verify(spec, progress, ctx, in_flight=False)
    appended = sum(1 for op in plan(stop) if op.kind == "append")
    assert len(progress.seqs) == appended and set(progress.admitted) == set(RUNS)
    assert stats.counted >= KILLS
    print(
        f"\n{kind}: {stats.counted} kills at work + {stats.before_ready} before ready, seed {seed}, "
        f"{stop} ops ({appended} entries), ready after {statistics.median(stats.ready_latency) * 1000:.0f} ms, "
        f"verify {statistics.median(stats.verify_s) * 1000:.0f} ms, total {time.monotonic() - began:.1f} s"
    )


def test_plan_is_deterministic_and_paths_are_unique_per_run() -> None:
    # The parent and every child must agree on op i, and first-writer-wins must never merge two ops.
    first, again = plan(3000), _generated.__wrapped__(1500)
    assert first[:1500] == again
    for run in RUNS:
        paths = [op.entry.path for op in first if op.run == run and op.entry is not None]
        assert len(paths) == len(set(paths))
    assert {op.kind for op in first} == {"append", "park", "unpark", "claim"}

