"""Keyed admissions in the journal (issue 16, step 4 of docs/proposals/admission-control.md;
:mod:`telo.journal.keyed`): on memory, SQLite and PostgreSQL an admission with a ``dedup_key`` admits nothing while
a live run of its queue holds the key (the store answers with that run: the start attaches, or refuses, or skips —
the kind decides), ``supersede`` cancels that run first (``singleton: {mode: cancel-running}``), and a
``debounce_key`` gives an unstarted run of the key the admission's inputs and due time. Racing admissions of one
key make one run (threads on separate store instances here; real processes: tests/faults/test_queue_admission_race.py).

Before this change an admission carried no key: every one of these admitted a run of its own."""

from __future__ import annotations

import threading

import pytest

from telo.clock import FakeClock
from telo.errors import Code
from telo.journal.claims import Fence, Holder
from telo.journal.model import CODEC_VERSION, Admission, Outcome, Parked
from telo.journal.queues import QueueLimits
from telo.journal.store import Store
from tests.stores.conftest import StoreHarness

KEYED_STORES = pytest.mark.parametrize("harness", ["memory", "sqlite", "postgres"], indirect=True)
RACING_STORES = pytest.mark.parametrize("harness", ["sqlite", "postgres"], indirect=True)

A = Holder("worker-a", "host-a", 1, 1).to_text()
TTL = 60_000


def dedup(run: str, key: str, *, queue: str = "q", supersede: bool = False, inputs: object = None) -> Admission:
    return Admission.of(run, status="scheduled", due_at=0, queue=queue, workflow="w", inputs=inputs or {"run": run},
                        dedup_key=key, supersede=supersede)


def debounce(run: str, key: str, due: int, inputs: object, *, workflow: str = "w", tenant: str | None = None,
             priority: int | None = None) -> Admission:
    return Admission.of(run, status="scheduled", due_at=due, queue="q", workflow=workflow, inputs=inputs,
                        debounce_key=key, queue_key=tenant, priority=priority)


@KEYED_STORES
def test_a_live_dedup_key_answers_a_second_admission_with_its_run(store: Store) -> None:
    first = store.admit(dedup("r1", "order-7"))
    assert first.admitted and first.record.dedup_key == "order-7"
    second = store.admit(dedup("r2", "order-7", inputs={"other": True}))
    assert not second.admitted and second.record.run == "r1"  # the live run: the start attaches or is refused
    assert second.record.decoded_inputs() == {"run": "r1"}  # untouched
    assert store.read_run("r2") is None
    assert store.admit(dedup("r3", "order-7", queue="other")).admitted  # a key is its queue's
    assert store.admit(dedup("r4", "order-8")).admitted
    stored = store.read_run("r1")
    assert stored is not None and stored.dedup_key == "order-7" and stored.queue == "q"


@KEYED_STORES
def test_a_dedup_key_is_held_until_its_run_settles(store: Store, clock: FakeClock) -> None:
    assert store.admit(dedup("r1", "k")).admitted
    granted = store.claim_due(A, TTL, clock.now_ms(), 1, queues={"q": QueueLimits()})
    assert [r.run for r in granted] == ["r1"]
    assert store.admit(dedup("r2", "k")).record.run == "r1"  # running: still live
    store.park("r1", Parked("steps/sleep", at=clock.now_ms() + 1000))
    assert store.admit(dedup("r2", "k")).record.run == "r1"  # parked: still live
    store.complete("r1", Outcome.completed(1))
    again = store.admit(dedup("r2", "k"))
    assert again.admitted and again.record.run == "r2"  # settled: a new admission admits a new run
    assert not store.admit(dedup("r3", "k")).admitted


@KEYED_STORES
def test_the_same_run_id_is_answered_before_any_key(store: Store) -> None:
    assert store.admit(dedup("r1", "k")).admitted
    store.complete("r1", Outcome.completed(1))
    same = store.admit(dedup("r1", "k2"))
    assert not same.admitted and same.record.run == "r1" and same.record.status == "completed"


@KEYED_STORES
def test_supersede_cancels_the_live_run_of_the_key_and_admits(store: Store, clock: FakeClock) -> None:
    assert store.admit(dedup("r1", "k")).admitted
    granted = store.claim_due(A, TTL, clock.now_ms(), 1, queues={"q": QueueLimits()})
    newer = store.admit(dedup("r2", "k", supersede=True))
    assert newer.admitted and newer.superseded == ("r1",)
    old = store.read_run("r1")
    assert old is not None and old.status == "cancelled" and old.claim is None  # as `telo cancel` leaves it
    assert old.error is not None and old.error["code"] == Code.DURABLE_RUN_CANCELLED and "r2" in old.error["message"]
    with pytest.raises(Exception) as exc:  # its execution is fenced out: its next write is refused
        store.complete("r1", Outcome.completed(1), fence=Fence(A, granted[0].fence))
    assert getattr(exc.value, "code", None) == Code.DURABLE_CLAIM_LOST
    latest = store.admit(dedup("r3", "k", supersede=True))
    assert latest.admitted and latest.superseded == ("r2",)
    statuses = {r: store.read_run(r).status for r in ("r1", "r2", "r3")}  # type: ignore[union-attr]
    assert statuses == {"r1": "cancelled", "r2": "cancelled", "r3": "scheduled"}


@KEYED_STORES
def test_a_debounce_gives_the_unstarted_run_the_latest_inputs_and_due_time(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    first = store.admit(debounce("d1", "user-1", now + 5000, {"n": 1}, tenant="acme", priority=3))
    assert first.admitted and first.record.due_at == now + 5000
    latest = {"n": 2, "raw": b"\x00\xff", "ratio": 0.5}  # (values only the typed-frame codec keeps exactly)
    second = store.admit(debounce("d2", "user-1", now + 7000, latest, tenant="bolt", priority=1))
    assert not second.admitted and second.record.run == "d1"
    record = store.read_run("d1")
    assert record is not None and store.read_run("d2") is None
    assert record.decoded_inputs() == latest and record.inputs_v == CODEC_VERSION
    assert record.inputs == second.record.inputs
    assert (record.due_at, record.queue_key, record.priority) == (now + 7000, "bolt", 1)  # evaluated over them
    assert (record.status, record.started_at, record.debounce_key) == ("scheduled", None, "user-1")
    assert store.claim_due(A, TTL, now + 6999, 5, queues={"q": QueueLimits()}) == []  # not due before its time
    other = store.admit(debounce("d3", "user-1", now + 7000, {"n": 3}, workflow="another"))
    assert other.admitted  # another workflow's run: its body would read other inputs
    assert store.admit(debounce("d4", "user-2", now + 7000, {"n": 4})).admitted


@KEYED_STORES
def test_a_debounce_after_the_run_started_admits_a_new_run(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    assert store.admit(debounce("d1", "k", now, {"n": 1})).admitted
    granted = store.claim_due(A, TTL, now, 5, queues={"q": QueueLimits()})
    assert [r.run for r in granted] == ["d1"] and granted[0].decoded_inputs() == {"n": 1}
    later = store.admit(debounce("d2", "k", now + 1000, {"n": 2}))
    assert later.admitted  # the first one started: its inputs are its own, a newer start waits anew
    assert store.admit(debounce("d3", "k", now + 2000, {"n": 3})).record.run == "d2"
    started = store.read_run("d1")
    assert started is not None and started.decoded_inputs() == {"n": 1}


@RACING_STORES
def test_racing_admissions_of_one_key_make_one_run(harness: StoreHarness) -> None:
    """Eight threads, each on a store instance of its own (its own connection and writer), admit the same dedup
    key, then the same debounce key, at once: one run of each, and every admission answered with it."""
    stores = [harness.open() for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    answers: list[tuple[str, str]] = []
    lock = threading.Lock()

    def admit(i: int, store: Store) -> None:
        barrier.wait()
        got = store.admit(dedup(f"r{i}", "k"))
        barrier.wait()
        bounced = store.admit(debounce(f"d{i}", "k", 10_000, {"i": i}))
        with lock:
            answers.append((got.record.run, bounced.record.run))

    threads = [threading.Thread(target=admit, args=(i, s)) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(answers) == 8
    assert len({d for d, _ in answers}) == 1 and len({b for _, b in answers}) == 1
    runs = [r for r in stores[0].iter_all_runs()]
    assert len([r for r in runs if r.dedup_key == "k"]) == 1
    debounced = [r for r in runs if r.debounce_key == "k"]
    assert len(debounced) == 1 and debounced[0].decoded_inputs()["i"] in range(8)
