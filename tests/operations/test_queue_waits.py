"""Why a queued run waits (issue 16, "Visibility"): ``telo.operations.queues.why_waiting`` names the limits that
hold it — from the same counts the grant uses — and, with none of them full, a ``workerConcurrency`` every
process is at, the runs ahead of it taking the room there is, or nothing (a worker's next sweep starts it).
The CLI tests (tests/cli/test_queues.py) show the concurrency, key and rate limits through ``telo status``;
these cover the rest on the memory store, exactly."""

from __future__ import annotations

from telo.clock import FakeClock
from telo.journal.claims import Holder
from telo.journal.memory import MemoryStore
from telo.journal.model import Admission, Parked
from telo.operations.queues import QueueConfig, why_waiting

NOW = 1_800_000_000_000


def store_with(running: list[str], waiting: int, *, parked: int = 0) -> MemoryStore:
    """``running``: the hosts of live claims (one run each); then ``waiting`` runs due now, oldest first."""
    store = MemoryStore(clock=FakeClock(start_ms=NOW))
    for i, host in enumerate(running):
        store.admit(Admission.of(f"run-{i}", status="scheduled", due_at=NOW - 1_000, queue="q"))
        assert store.claim(f"run-{i}", Holder("w", host, 100 + i, 1).to_text(), 60_000, NOW) is not None
        store.update_run(f"run-{i}", status="running", due_at=None)
    for i in range(parked):
        store.admit(Admission.of(f"parked-{i}", status="scheduled", due_at=NOW - 900, queue="q"))
        store.park(f"parked-{i}", Parked("steps/wait", "approval", f"tok-{i}"))
    for i in range(waiting):
        store.admit(Admission.of(f"wait-{i}", status="scheduled", due_at=NOW - 500 + i, queue="q"))
    return store


def why(store: MemoryStore, run: str, config: QueueConfig | None) -> dict[str, object]:
    record = store.read_run(run)
    assert record is not None
    return why_waiting(store, record, config, now_ms=NOW)


def test_with_every_process_at_its_worker_limit_workerconcurrency_holds_it() -> None:
    store = store_with(["host-a", "host-b"], 1)
    config = QueueConfig("q", "runs", concurrency=5, worker_concurrency=1)
    shown = why(store, "wait-0", config)
    assert (shown["position"], shown["running"], shown["holding"]) == (1, 2, 2)
    assert shown["heldBy"] == [{"limit": "workerConcurrency", "max": 1, "processes": 2}]


def test_runs_ahead_taking_the_room_hold_it_and_with_room_nothing_does() -> None:
    store = store_with(["host-a"], 3)
    config = QueueConfig("q", "runs", concurrency=3)
    assert why(store, "wait-2", config)["heldBy"] == [{"limit": "ahead", "ahead": 2, "room": 2}]
    first = why(store, "wait-0", config)
    assert (first["position"], first["waitingForSlot"], first["heldBy"]) == (1, 3, [])  # a sweep starts it


def test_parked_runs_hold_slots_only_when_the_queue_says_so() -> None:
    store = store_with(["host-a"], 1, parked=1)
    free = why(store, "wait-0", QueueConfig("q", "runs", concurrency=2))
    assert (free["holding"], free["parked"], free["heldBy"]) == (1, 1, [])
    held = why(store, "wait-0", QueueConfig("q", "runs", concurrency=2, hold_parked=True))
    assert held["holding"] == 2
    assert held["heldBy"] == [{"limit": "concurrency", "holding": 2, "max": 2}]


def test_without_limits_or_before_its_time_no_limit_is_claimed() -> None:
    store = store_with(["host-a"], 1)
    bare = why(store, "wait-0", None)
    assert bare == {"name": "q", "running": 1, "parked": 0, "position": 1, "waitingForSlot": 1}
    store.admit(Admission.of("later", status="scheduled", due_at=NOW + 60_000, queue="q"))
    assert why(store, "later", QueueConfig("q", "runs", concurrency=1)) == {"name": "q", "running": 1, "parked": 0}
