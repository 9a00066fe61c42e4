"""Admission control in the journal (issue 16): ``Store.claim_due`` grants a queued run only while its queue's
limits leave room, counted in the granting transaction — on memory, SQLite and PostgreSQL (the file journal
refuses queues at load: tests/durable/test_queue_kind.py).

A run holds a slot while it is ``running`` under a live claim (and, with ``holdSlotWhileParked``, while it is
parked); a lapsed claim holds nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from telo.clock import FakeClock
from telo.journal.claims import Fence, Holder
from telo.journal.model import Admission, Outcome, Parked, RunRecord
from telo.journal.queues import QueueLimits
from telo.journal.store import Store

QUEUED_STORES = pytest.mark.parametrize("harness", ["memory", "sqlite", "postgres"], indirect=True)
RACING_STORES = pytest.mark.parametrize("harness", ["sqlite", "postgres"], indirect=True)

A = Holder("worker-a", "host-a", 1, 1).to_text()
B = Holder("worker-b", "host-b", 2, 2).to_text()
TTL = 60_000


def enqueue(store: Store, run: str, now: int, queue: str = "q", key: str | None = None, **kw: object) -> None:
    """What a start of a queued workflow admits: scheduled, due now, with its queue and key."""
    admission = Admission.of(run, status="scheduled", due_at=now, queue=queue, queue_key=key,  # type: ignore[arg-type]
                             **kw)
    assert store.admit(admission).admitted


def runs(granted: list[RunRecord]) -> list[str]:
    return [r.run for r in granted]


@QUEUED_STORES
def test_grants_at_most_the_queues_concurrency(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    for i in range(6):
        enqueue(store, f"r{i}", now - 10 + i)
    queues = {"q": QueueLimits(concurrency=2)}
    assert store.claim_due(A, TTL, now, 10) == []  # a claimer that knows no queue starts no queued run
    first = store.claim_due(A, TTL, now, 10, queues=queues)
    assert runs(first) == ["r0", "r1"]  # FIFO by admission
    assert all(r.status == "running" and r.queue == "q" for r in first)
    assert store.claim_due(B, TTL, now, 10, queues=queues) == []  # full, whoever asks
    store.complete("r0", Outcome.completed(1), fence=Fence(A, first[0].fence))
    assert runs(store.claim_due(B, TTL, now, 10, queues=queues)) == ["r2"]  # a settled run freed its slot
    record = store.read_run("r5")
    assert record is not None and record.status == "scheduled" and record.queue == "q"


@QUEUED_STORES
def test_a_key_holds_at_most_its_limit(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    for i, tenant in enumerate(["acme", "acme", "acme", "bolt", "bolt", "corp"]):
        enqueue(store, f"r{i}", now - 10 + i, key=tenant)
    queues = {"q": QueueLimits(concurrency=10, key_limit=1)}
    granted = store.claim_due(A, TTL, now, 10, queues=queues)
    assert runs(granted) == ["r0", "r3", "r5"]  # one per tenant, the blocked ones passed over
    assert [r.queue_key for r in granted] == ["acme", "bolt", "corp"]
    assert store.claim_due(B, TTL, now, 10, queues=queues) == []
    store.complete("r3", Outcome.completed(1), fence=Fence(A, granted[1].fence))
    assert runs(store.claim_due(B, TTL, now, 10, queues=queues)) == ["r4"]  # bolt's next


@QUEUED_STORES
def test_a_lapsed_claim_frees_its_slot(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    for i in range(3):
        enqueue(store, f"r{i}", now - 10 + i)
    queues = {"q": QueueLimits(concurrency=1)}
    assert runs(store.claim_due(A, TTL, now, 5, queues=queues)) == ["r0"]
    assert store.claim_due(B, TTL, now + TTL - 1, 5, queues=queues) == []  # A's claim is live
    # A went silent: its claim lapsed, so r0 holds nothing, and is due again (running, unclaimed) — first in
    # due order, it competes for the one slot like any other run and is granted it
    assert runs(store.claim_due(B, TTL, now + TTL, 5, queues=queues)) == ["r0"]
    assert store.claim_due(A, TTL, now + TTL, 5, queues=queues) == []


@QUEUED_STORES
def test_parked_runs_hold_their_slot_only_when_the_queue_says_so(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    for i in range(4):
        enqueue(store, f"r{i}", now - 10 + i)
    free = {"q": QueueLimits(concurrency=1)}
    granted = store.claim_due(A, TTL, now, 5, queues=free)
    store.park("r0", Parked("steps/wait", "approval", "tok-0"), fence=Fence(A, granted[0].fence))
    store.release("r0", A)
    assert runs(store.claim_due(A, TTL, now, 5, queues=free)) == ["r1"]  # r0's slot came back as it parked
    store.complete("r1", Outcome.completed(None))
    held = {"q": QueueLimits(concurrency=1, hold_parked=True)}
    assert store.claim_due(A, TTL, now, 5, queues=held) == []  # parked r0 holds the one slot: r2 waits
    granted = store.claim_due(B, TTL, now, 5, only=["r0"], queues=held)
    assert granted == []  # (r0 is not due: it waits for a delivery)
    store.update_run("r0", due_at=now)  # its time comes (a timed park, e.g. the await's timeout)
    got = store.claim_due(B, TTL, now, 5, queues=held)
    assert runs(got) == ["r0"]  # granted without room: it held its slot all along
    assert store.claim_due(A, TTL, now, 5, queues=held) == []  # and holds it running
    store.complete("r0", Outcome.completed(None), fence=Fence(B, got[0].fence))
    assert runs(store.claim_due(A, TTL, now, 5, queues=held)) == ["r2"]


@QUEUED_STORES
def test_blocked_queued_runs_starve_nothing_else(store: Store, clock: FakeClock) -> None:
    """A queue at its limit, with many runs waiting ahead in due order, keeps neither unqueued due runs nor
    another queue's from being claimed in the same sweep."""
    now = clock.now_ms()
    for i in range(30):
        enqueue(store, f"full-{i:02d}", now - 1_000 + i, queue="full")
    assert runs(store.claim_due(B, TTL, now, 1, queues={"full": QueueLimits(concurrency=1)})) == ["full-00"]
    assert store.admit(Admission.of("plain", status="scheduled", due_at=now)).admitted
    enqueue(store, "other-0", now, queue="other")
    queues = {"full": QueueLimits(concurrency=1), "other": QueueLimits(concurrency=5)}
    assert sorted(runs(store.claim_due(A, TTL, now, 3, queues=queues))) == ["other-0", "plain"]


@QUEUED_STORES
def test_worker_concurrency_limits_what_a_process_is_granted(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    for i in range(6):
        enqueue(store, f"r{i}", now - 10 + i)
    assert runs(store.claim_due(A, TTL, now, 10, queues={"q": QueueLimits(concurrency=5, worker_free=2)})) \
        == ["r0", "r1"]
    assert runs(store.claim_due(B, TTL, now, 10, queues={"q": QueueLimits(concurrency=5, worker_free=4)})) \
        == ["r2", "r3", "r4"]  # the global limit binds first


@RACING_STORES
@pytest.mark.parametrize("key_limit", [None, 1])
def test_racing_claimers_never_exceed_the_limits(store: Store, reopen: Callable[[], Store], clock: FakeClock,
                                                 key_limit: int | None) -> None:
    """Four claimers (store instances of their own, as processes would have) race for a queue of concurrency 3,
    each settling what it was granted and claiming again: no claim ever sees more than 3 holding a slot (or
    two of one key), and every run is granted exactly once."""
    now = clock.now_ms()
    total = 40
    for i in range(total):
        enqueue(store, f"r{i:02d}", now - 100 + i, key=f"k{i % 2}")
    limits = {"q": QueueLimits(concurrency=3, key_limit=key_limit)}
    workers = [reopen() for _ in range(4)]
    holders = [Holder(f"w{i}", f"host-{i}", i + 10, 1).to_text() for i in range(4)]
    granted: list[str] = []
    worst: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(len(workers))

    def holding() -> tuple[int, int]:
        live = [r for r in store.runs_of_queue("q") if r.status == "running" and r.claim is not None]
        return len(live), max([sum(1 for r in live if r.queue_key == k) for k in ("k0", "k1")])

    def work(i: int) -> None:
        start.wait()
        idle = 0
        while idle < 50:
            mine = workers[i].claim_due(holders[i], TTL, now, 2, queues=limits)
            idle = 0 if mine else idle + 1
            with lock:
                granted.extend(runs(mine))
                held, per_key = holding()
                worst.append(held * 10 + per_key)
            for record in mine:
                workers[i].complete(record.run, Outcome.completed(None), fence=Fence(holders[i], record.fence))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(granted) == [f"r{i:02d}" for i in range(total)]  # each exactly once
    assert max(w // 10 for w in worst) <= 3
    if key_limit is not None:
        assert max(w % 10 for w in worst) <= 1


HOUR = 3_600_000


@QUEUED_STORES
def test_a_rate_limit_starts_at_most_its_limit_per_window(store: Store, clock: FakeClock) -> None:
    """``rateLimit`` 3 per hour: a claim starts 3 runs, then none — whoever asks, whether the started runs still
    run or not — until starts leave the window. The window is the journal's clock: the caller's ``now_ms`` on
    memory and SQLite, the database's on PostgreSQL; so the test moves the starts back, not the clock."""
    now = clock.now_ms()
    for i in range(6):
        enqueue(store, f"r{i}", now - 10 + i)
    queues = {"q": QueueLimits(rate_limit=3, rate_period_ms=HOUR)}
    first = store.claim_due(A, TTL, now, 10, queues=queues)
    assert runs(first) == ["r0", "r1", "r2"]
    start = first[0].started_at
    assert start is not None and [r.started_at for r in first] == [start] * 3  # one grant, one journal time
    if store.kind != "postgres":
        assert start == now
    assert store.claim_due(B, TTL, now, 10, queues=queues) == []  # the window is full
    for record in first:
        store.complete(record.run, Outcome.completed(None), fence=Fence(A, record.fence))
    assert store.claim_due(B, TTL, now, 10, queues=queues) == []  # settled, but started within the window
    settled = store.read_run("r0")
    assert settled is not None and settled.started_at == start  # (a completion keeps the start)
    for run in ("r0", "r1"):  # two starts leave the window: exactly one period back is out of it
        store.update_run(run, started_at=start - HOUR)
    assert runs(store.claim_due(B, TTL, now, 10, queues=queues)) == ["r3", "r4"]
    assert store.claim_due(A, TTL, now, 10, queues=queues) == []  # r2, r3, r4 fill it again
    waiting = store.read_run("r5")
    assert waiting is not None and waiting.status == "scheduled" and waiting.started_at is None


@QUEUED_STORES
def test_a_re_grant_spends_no_rate_budget(store: Store, clock: FakeClock) -> None:
    """A run granted again — due after its worker went silent, continuing after a timed park — was started
    already: it is granted with the window full, keeps its first start, and leaves the runs never started
    waiting."""
    now = clock.now_ms()
    for i in range(4):
        enqueue(store, f"r{i}", now - 10 + i)
    queues = {"q": QueueLimits(rate_limit=2, rate_period_ms=HOUR)}
    first = store.claim_due(A, TTL, now, 10, queues=queues)
    assert runs(first) == ["r0", "r1"]
    later = now + TTL  # A's claims lapse: r0 is due again (running, unclaimed) ...
    store.park("r1", Parked("steps/nap", "sleep", None, later), fence=Fence(A, first[1].fence))  # ... r1 sleeps
    store.release("r1", A)
    again = store.claim_due(B, TTL, later, 10, queues=queues)
    assert runs(again) == ["r0", "r1"]  # both, with the window full; r2 and r3 (never started) wait
    assert [r.started_at for r in again] == [r.started_at for r in first]  # the first start stays
    assert store.claim_due(A, TTL, later, 10, queues=queues) == []
    assert [store.read_run(f"r{i}").status for i in (2, 3)] == ["scheduled"] * 2  # type: ignore[union-attr]


@QUEUED_STORES
def test_priority_orders_the_grants_and_ties_go_by_admission(store: Store, clock: FakeClock) -> None:
    """Lower priority first; equal priorities (none recorded reads 0) in admission order — here against the ids'
    order; a run due again after a crash before every run never started, whatever their priorities."""
    now = clock.now_ms()
    enqueue(store, "crashed", now - 100, priority=100)
    queues = {"q": QueueLimits(concurrency=1)}
    assert runs(store.claim_due(A, TTL, now, 1, queues=queues)) == ["crashed"]  # then A goes silent
    admitted = [("z-low", 10), ("y-none", None), ("x-high", -5), ("w-zero", 0), ("v-high", -5)]
    for i, (run, priority) in enumerate(admitted):
        enqueue(store, run, now - 50 + i, priority=priority)
    recorded = store.read_run("x-high")
    assert recorded is not None and recorded.priority == -5
    order = []
    at = now + TTL  # A's claim lapsed
    for _ in range(len(admitted) + 1):
        got = store.claim_due(B, TTL, at, 1, queues=queues)
        assert len(got) == 1, order
        order.append(got[0].run)
        store.complete(got[0].run, Outcome.completed(None), fence=Fence(B, got[0].fence))
    assert order == ["crashed", "x-high", "v-high", "y-none", "w-zero", "z-low"]


@RACING_STORES
def test_racing_claimers_never_start_more_than_the_rate_allows(store: Store, reopen: Callable[[], Store],
                                                                clock: FakeClock) -> None:
    """Four claimers (store instances of their own) race for a queue of ``rateLimit`` 5 per hour and no other
    limit: exactly 5 runs start, each once — no two claimers spend one budget."""
    now = clock.now_ms()
    for i in range(20):
        enqueue(store, f"r{i:02d}", now - 100 + i)
    limits = {"q": QueueLimits(rate_limit=5, rate_period_ms=HOUR)}
    workers = [reopen() for _ in range(4)]
    holders = [Holder(f"w{i}", f"host-{i}", i + 10, 1).to_text() for i in range(4)]
    granted: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(len(workers))

    def work(i: int) -> None:
        start.wait()
        for _ in range(10):
            mine = workers[i].claim_due(holders[i], TTL, now, 2, queues=limits)
            with lock:
                granted.extend(runs(mine))
            for record in mine:
                workers[i].complete(record.run, Outcome.completed(None), fence=Fence(holders[i], record.fence))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(granted) == [f"r{i:02d}" for i in range(5)]  # in order, each once, and no more
