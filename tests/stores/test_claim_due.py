"""Fair claiming (issue 14): ``Store.claim_due`` grants a worker at most the due runs it asked for, in due
order, starts them, and leaves the rest to other workers — on every store, with the due rule of ``due_runs``.

Before, a sweep listed up to 100 due runs and claimed every one of them: four workers sharing 100 due runs
found one worker holding all 100 while three idled."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable

from telo.clock import FakeClock, process_start_ticks
from telo.journal.claims import Fence, Holder, this_host
from telo.journal.model import Admission, Claim, Entry, Parked, RunRecord
from telo.journal.store import Store

A = Holder("worker-a", "host-a", 1, 1).to_text()
B = Holder("worker-b", "host-b", 2, 2).to_text()
TTL = 60_000


def admit(store: Store, run: str, **kw: object) -> None:
    assert store.admit(Admission.of(run, **kw)).admitted  # type: ignore[arg-type]


def test_a_worker_gets_what_it_asks_for_and_the_rest_stays_due(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    for i in range(10):
        admit(store, f"r{i}", status="scheduled", due_at=now - 100 + i)
    first = store.claim_due(A, TTL, now, 4)
    assert [r.run for r in first] == ["r0", "r1", "r2", "r3"]  # due order
    second = store.claim_due(B, TTL, now, 4)
    assert [r.run for r in second] == ["r4", "r5", "r6", "r7"]
    assert store.due_runs(now, 100) == ["r8", "r9"]  # the rest is left for others
    for granted in first:  # started, as written: an ordinary claim, which its fence renews
        assert granted.status == "running" and granted.due_at is None and granted.fence >= 1
        assert granted.claim == Claim(A, now + TTL)
        assert store.read_run(granted.run) == granted
        assert store.renew(granted.run, Fence(A, granted.fence), TTL, now + 1)
    assert store.claim_due(A, TTL, now, 0) == []


def test_claims_the_due_runs_only_with_the_due_rule(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    admit(store, "running")
    admit(store, "later", status="scheduled", due_at=now + 1_000)
    admit(store, "parked-token")
    store.park("parked-token", Parked("steps/w", "r", "t"))
    admit(store, "delivered")
    store.park("delivered", Parked("steps/w", "r", "t2"))
    store.append("delivered", Entry.step("steps/w", None, {"ok": True}))
    admit(store, "held")
    assert store.claim("held", B, TTL, now)
    got = {r.run: r for r in store.claim_due(A, TTL, now, 100)}
    assert set(got) == {"running", "delivered"}
    assert got["delivered"].parked is None and got["delivered"].status == "running"  # its park lifted
    assert store.claim_due(A, TTL, now, 100) == []  # its own live claims are not granted again
    later = {r.run: r for r in store.claim_due(A, TTL, now + 1_000, 100)}
    assert set(later) == {"later"} and later["later"].status == "running"  # a scheduled run starts


def test_filters_only_workflows_and_skip(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    admit(store, "a1", workflow="a")
    admit(store, "a2", workflow="a")
    admit(store, "b1", workflow="b")
    admit(store, "anon")  # no workflow recorded (an upstream admission): any workflow's worker may take it
    assert [r.run for r in store.claim_due(A, TTL, now, 10, only=["a2", "b1"])] == ["a2", "b1"]
    assert {r.run for r in store.claim_due(A, TTL, now, 10, workflows=["a"], skip={"anon"})} == {"a1"}
    assert [(r.run, r.fence) for r in store.claim_due(A, TTL, now, 10, workflows=["a"])] == [("anon", 1)]


def test_a_dead_local_holders_runs_are_claimed_at_once(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    admit(store, "r")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = Holder("old-worker", this_host(), child.pid, process_start_ticks(child.pid)).to_text()
        assert store.claim("r", dead, TTL, now) == 1
        assert store.claim_due(B, TTL, now + 1, 10) == []  # alive: its claim stands
    finally:
        child.kill()
        child.wait()
    assert [(r.run, r.fence) for r in store.claim_due(B, TTL, now + 2, 10)] == [("r", 2)]  # gone: taken at once


def test_concurrent_workers_are_granted_disjoint_runs(store: Store, reopen: Callable[[], Store],
                                                      clock: FakeClock) -> None:
    """Four workers (store instances of their own, as processes would have) claim at once: every due run goes
    to exactly one of them, and none is granted more than it asked for."""
    now = clock.now_ms()
    for i in range(60):
        admit(store, f"r{i:02d}")
    workers = [reopen() for _ in range(4)]
    holders = [Holder(f"w{i}", f"host-{i}", i + 10, 1).to_text() for i in range(4)]
    got: list[list[RunRecord]] = [[] for _ in workers]
    start = threading.Barrier(len(workers))

    def work(i: int) -> None:
        start.wait()
        for _ in range(5):
            got[i] += workers[i].claim_due(holders[i], TTL, now, 4)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    runs = [r.run for mine in got for r in mine]
    assert sorted(runs) == [f"r{i:02d}" for i in range(60)]  # each exactly once
    assert all(len(mine) <= 20 for mine in got)


def test_renew_many_extends_only_the_claims_still_their_fences(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    for run in ("a", "b", "c"):
        admit(store, run)
    granted = {r.run: r.fence for r in store.claim_due(A, TTL, now, 3)}
    assert store.claim("c", B, TTL, now + TTL) is not None  # c lapsed and went to B
    renewed = store.renew_many([("a", Fence(A, granted["a"]), now + 5 * TTL),
                                ("b", Fence(A, granted["b"] + 1), now + 5 * TTL),  # a token never granted
                                ("c", Fence(A, granted["c"]), now + 5 * TTL),
                                ("ghost", Fence(A, 1), now + 5 * TTL)])
    assert renewed == [True, False, False, False]
    for run, until in (("a", now + 5 * TTL), ("b", now + TTL), ("c", now + 2 * TTL)):
        record = store.read_run(run)
        assert record is not None and record.claim is not None and record.claim.until == until, run
    assert store.renew_many([]) == []
