"""Reading a queue's state (issue 16, "Visibility"): ``Store.queue_snapshot`` and ``Store.queue_names`` give the
same answers on memory, SQLite and PostgreSQL — what ``telo queues``, ``telo status`` and the dashboard show.

A queued run is counted by state (waiting = scheduled and due, later, running under a live claim, unclaimed,
parked, parkedDue) and key; a run's position is read from the runs before it in grant order (a run due again
first, then priority, then due time, then id); the oldest waiting runs come in that order; a rate window's
starts are counted, and when the window is full, when it frees. Before these reads existed, nothing of a
queue could be read but its running and parked runs' records (``runs_of_queue``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from telo.clock import FakeClock
from telo.journal.claims import Fence, Holder, process_start_ticks, this_host
from telo.journal.model import Admission, Outcome, Parked
from telo.journal.queue_reads import QueueSnapshot
from telo.journal.queues import QueueLimits
from telo.journal.store import Store

QUEUED_STORES = pytest.mark.parametrize("harness", ["memory", "sqlite", "postgres"], indirect=True)

A = Holder("worker-a", "host-a", 1, 1).to_text()
TTL = 60_000


def enqueue(store: Store, run: str, due: int, key: str | None = None, *, queue: str = "q",
            priority: int | None = None) -> None:
    assert store.admit(Admission.of(run, status="scheduled", due_at=due, queue=queue, queue_key=key,
                                    priority=priority)).admitted


def counts(snap: QueueSnapshot) -> dict[tuple[str, str | None], int]:
    """(state, key) -> runs, holders summed."""
    out: dict[tuple[str, str | None], int] = {}
    for c in snap.counts:
        out[(c.state, c.key)] = out.get((c.state, c.key), 0) + c.count
    return out


@QUEUED_STORES
def test_a_snapshot_counts_the_queues_live_runs_by_state_and_key(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    for i, key in enumerate(["acme", "acme", "acme", "bolt", "bolt"]):
        enqueue(store, f"r{i}", now - 100 + i, key)
    enqueue(store, "soon", now + 60_000, "acme")  # scheduled for later
    enqueue(store, "elsewhere", now, "acme", queue="other")
    store.admit(Admission.of("plain", status="scheduled", due_at=now))  # no queue
    granted = store.claim_due(A, TTL, now, 10, queues={"q": QueueLimits(concurrency=3, key_limit=2)})
    assert [r.run for r in granted] == ["plain", "r0", "r1", "r3"]
    store.park("r1", Parked("steps/wait", "approval", "tok"), fence=Fence(A, granted[2].fence))
    store.release("r1", A)
    store.complete("r3", Outcome.completed(None), fence=Fence(A, granted[3].fence))  # settled: not counted
    snap = store.queue_snapshot("q", now)
    assert counts(snap) == {("running", "acme"): 1, ("parked", "acme"): 1, ("waiting", "acme"): 1,
                            ("waiting", "bolt"): 1, ("later", "acme"): 1}
    assert [(c.holder, c.count) for c in snap.counts if c.state == "running"] == [(A, 1)]
    assert snap.ahead == () and snap.oldest == () and snap.dead == () and snap.started is None
    assert store.queue_names() == ["other", "q"]
    # its claim lapsed: running, but holding nothing — due again, it waits for a slot
    assert counts(store.queue_snapshot("q", now + TTL))[("unclaimed", "acme")] == 1
    # a parked run whose wake time passed waits for a slot again (unless parked runs hold theirs)
    store.update_run("r1", due_at=now + 5)
    assert counts(store.queue_snapshot("q", now + 5))[("parkedDue", "acme")] == 1


@QUEUED_STORES
def test_position_and_oldest_follow_the_grant_order(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    enqueue(store, "b-old", now - 50, "b")
    enqueue(store, "a-mid", now - 40, "a")
    enqueue(store, "a-new", now - 30, "a")
    enqueue(store, "urgent", now - 10, "b", priority=-5)  # a lower priority goes first, whenever admitted
    enqueue(store, "later", now + 10_000, "a")
    record = store.read_run("a-new")
    assert record is not None
    snap = store.queue_snapshot("q", now, ahead_of=record, oldest=10)
    assert [r.run for r in snap.oldest] == ["urgent", "b-old", "a-mid", "a-new"]  # not `later`: not due
    ahead = {(c.state, c.key): c.count for c in snap.ahead}
    assert ahead == {("waiting", "b"): 2, ("waiting", "a"): 1}  # position 4, the second of its key
    urgent = store.read_run("urgent")
    assert urgent is not None and store.queue_snapshot("q", now, ahead_of=urgent).ahead == ()
    assert [r.run for r in store.queue_snapshot("q", now, oldest=2).oldest] == ["urgent", "b-old"]


@QUEUED_STORES
def test_a_run_due_again_is_first_and_a_dead_holders_runs_hold_nothing(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    for i in range(3):
        enqueue(store, f"r{i}", now - 10 + i)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = Holder("gone", this_host(), child.pid, process_start_ticks(child.pid)).to_text()
        got = store.claim_due(dead, TTL, now, 1, queues={"q": QueueLimits(concurrency=1)})
        assert [r.run for r in got] == ["r0"]
        assert counts(store.queue_snapshot("q", now))[("running", None)] == 1  # alive: it holds its slot
    finally:
        child.kill()
        child.wait()
    r2 = store.read_run("r2")
    assert r2 is not None
    snap = store.queue_snapshot("q", now, ahead_of=r2, oldest=5)
    assert counts(snap) == {("unclaimed", None): 1, ("waiting", None): 2}  # the dead holder holds nothing
    assert snap.dead == (dead,)
    assert [r.run for r in snap.oldest] == ["r0", "r1", "r2"]  # due again: first in grant order
    assert {(c.state, c.count) for c in snap.ahead} == {("unclaimed", 1), ("waiting", 1)}


@QUEUED_STORES
def test_a_rate_window_counts_its_starts_and_says_when_it_frees(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    for i in range(4):
        enqueue(store, f"r{i}", now - 10 + i)
    for i, at in enumerate([now - 90_000, now - 30_000, now - 20_000]):  # started 90 s, 30 s, 20 s ago
        store.update_run(f"r{i}", started_at=at, status="completed", due_at=None)
    snap = store.queue_snapshot("q", now, rate=(2, 60_000))
    assert (snap.started, snap.frees_at) == (2, now - 30_000 + 60_000)  # full until the 30-s-old start leaves
    snap = store.queue_snapshot("q", now, rate=(3, 60_000))
    assert (snap.started, snap.frees_at) == (2, None)  # room for one more
    snap = store.queue_snapshot("q", now, rate=(1, 60_000))
    assert (snap.started, snap.frees_at) == (2, now - 20_000 + 60_000)  # both must leave: the newer frees it
