"""A queued start's admission and first grant in one journal operation (issue 16; ``Store.admit_granted``,
docs/proposals/admission-control.md "Built so far", the benchmark row): on memory, SQLite and PostgreSQL it admits
the run and grants it only while its queue has room — the limits counted as for any grant — and never grants a
run it did not admit. Through the event loop (SQLite, PostgreSQL: ``admit_granted_async``) the starts of one
moment share the ask, and the grants still stop at the queue's limit; on SQLite they share the admission's commit.

Before this change a queued start admitted its run alone, then asked ``claim_due(only=[run])`` in another
operation (another commit)."""

from __future__ import annotations

import asyncio

import pytest

from telo.clock import FakeClock
from telo.durable.aio import AsyncStore
from telo.journal.claims import Holder
from telo.journal.model import Admission
from telo.journal.queues import QueueLimits
from telo.journal.store import Store

QUEUED_STORES = pytest.mark.parametrize("harness", ["memory", "sqlite", "postgres"], indirect=True)
GROUPED_STORES = pytest.mark.parametrize("harness", ["sqlite", "postgres"], indirect=True)

A = Holder("worker-a", "host-a", 1, 1).to_text()
TTL = 60_000


def queued(run: str, now: int, key: str | None = None) -> Admission:
    return Admission.of(run, status="scheduled", due_at=now, queue="q", queue_key=key, workflow="w",
                        inputs={"run": run})


@QUEUED_STORES
def test_admits_and_grants_while_the_queue_has_room(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    limits = {"q": QueueLimits(concurrency=2)}
    granted = []
    for i in range(3):
        admitted, record = store.admit_granted(queued(f"r{i}", now), A, TTL, now, limits)
        assert admitted.admitted
        granted.append(record)
    assert [r is not None for r in granted] == [True, True, False]  # the third found the queue full
    first = granted[0]
    assert first is not None and first.status == "running" and first.claim is not None
    assert first.claim.holder == A and first.fence == 1 and first.started_at is not None
    left = store.read_run("r2")
    assert left is not None and left.status == "scheduled" and left.claim is None


@QUEUED_STORES
def test_grants_nothing_it_did_not_admit(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    assert store.admit(queued("r0", now)).admitted  # admitted elsewhere, waiting for a slot
    admitted, record = store.admit_granted(queued("r0", now), A, TTL, now, {"q": QueueLimits(concurrency=5)})
    assert not admitted.admitted and record is None
    stored = store.read_run("r0")
    assert stored is not None and stored.status == "scheduled" and stored.claim is None


@QUEUED_STORES
def test_a_key_at_its_limit_and_no_free_worker_slot_grant_nothing(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    keyed = {"q": QueueLimits(key_limit=1)}
    assert store.admit_granted(queued("a0", now, "acme"), A, TTL, now, keyed)[1] is not None
    assert store.admit_granted(queued("a1", now, "acme"), A, TTL, now, keyed)[1] is None
    assert store.admit_granted(queued("b0", now, "bolt"), A, TTL, now, keyed)[1] is not None
    assert store.admit_granted(queued("c0", now), A, TTL, now, {"q": QueueLimits(worker_free=0)})[1] is None


@GROUPED_STORES
def test_starts_of_one_moment_share_the_ask_and_stop_at_the_limit(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    commits = store.stats.commits

    granted: list[str] = []

    async def starts() -> None:
        aio = AsyncStore(store)
        # each start reserved one worker slot of its own (telo.kinds.slot_waits.reserve): the shared ask sums them
        limits = {"q": QueueLimits(concurrency=5, worker_free=1)}
        got = await asyncio.gather(*(aio.admit_granted(queued(f"r{i:02}", now), A, now, limits,
                                                       lambda record, fence: granted.append(record.run))
                                     for i in range(20)))
        assert all(admitted.admitted for admitted in got)

    asyncio.run(starts())
    assert len(granted) == 5 == len(set(granted))
    assert sum(1 for r in store.runs_of_queue("q") if r.status == "running") == 5
    if store.kind == "sqlite":  # admissions and grants in one transaction: one commit for the twenty
        assert store.stats.commits - commits == 1
