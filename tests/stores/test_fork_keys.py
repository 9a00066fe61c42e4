"""A fork that keeps the original's idempotency keys (``telo fork --keep-keys``; event-log spec §2, §6), on
every store: the decision is in the fork's journal (its ``@forked`` record, a snapshot's copy once compacted),
so a store opened afresh over the same journal reads it back — as another worker continuing the fork would."""

from __future__ import annotations

import pytest

from telo.errors import TeloError
from telo.journal import eventlog
from telo.journal.lineage import Origin
from telo.journal.model import Admission, Entry
from telo.journal.store import Store
from telo.operations import actions
from tests.stores.conftest import StoreHarness

TARGET = {"kind": "Python.Function", "name": "charge", "module": "file:///app.yaml"}


def _run_with_steps(store: Store, run: str, n: int) -> None:
    store.admit(Admission.of(run, inputs={"order": "A-1"}, workflow="order"))
    store.append(run, Entry.decided("inputs", "inputs", {"order": "A-1"}))
    for i in range(n):
        store.append(run, Entry.decided(f"steps/s{i}/inputs", "inputs", {"i": i}))
        store.append(run, Entry.step(f"steps/s{i}", TARGET, {"done": i}))


def _after(store: Store, run: str, path: str) -> int:
    return max(c.seq for c in eventlog.checkpoints(store, run) if c.path == path)


def _keys(store: Store, run: str) -> set[str | None]:
    return {e.idempotency_key for e in eventlog.events(store, run) if e.idempotency_key is not None}


def test_the_keep_keys_decision_is_read_back_by_another_store_object(harness: StoreHarness) -> None:
    store = harness.open()
    _run_with_steps(store, "r1", 2)
    cp = _after(store, "r1", "steps/s0")
    kept = actions.fork(store, "r1", cp, "r1-kept", keep_keys=True)
    own = actions.fork(store, "r1", cp, "r1-own")
    assert (kept.keys, own.keys) == ("r1", None)
    assert kept.to_json() == {"run": "r1-kept", "forkedFrom": "r1", "checkpoint": cp, "status": "running",
                              "keepsKeysOf": "r1"}
    assert "keepsKeysOf" not in own.to_json()

    again = harness.open()  # a fresh store object over the same journal (memory: the same one)
    state = eventlog.recover(again, "r1-kept")
    assert state.key_run == "r1" and state.origin == Origin("r1", cp, "r1")
    assert eventlog.recover(again, "r1-own").key_run == "r1-own"
    assert eventlog.recover(again, "r1").key_run == "r1" and eventlog.recover(again, "r1").origin is None

    # The fork's own steps, once it executes them, are keyed by the original; `telo runs journal` says so.
    again.append("r1-kept", Entry.decided("steps/s1/inputs", "inputs", {"i": 1}))
    again.append("r1-kept", Entry.step("steps/s1", TARGET, {"done": "again"}))
    assert _keys(again, "r1-kept") == {"r1/steps/s0", "r1/steps/s1"}
    again.append("r1-own", Entry.step("steps/s1", TARGET, {"done": "again"}))
    assert _keys(again, "r1-own") == {"r1-own/steps/s0", "r1-own/steps/s1"}

    # A fork of that fork, keeping keys, keeps the ROOT's; without keep_keys it has its own.
    deeper = actions.fork(again, "r1-kept", _after(again, "r1-kept", "steps/s1"), "r1-kept2", keep_keys=True)
    assert deeper.keys == "r1" and eventlog.recover(harness.open(), "r1-kept2").key_run == "r1"
    fresh = actions.fork(again, "r1-kept", _after(again, "r1-kept", "steps/s1"), "r1-kept-own")
    assert fresh.keys is None and eventlog.recover(again, "r1-kept-own").key_run == "r1-kept-own"


def test_compaction_keeps_the_decision_it_truncates(harness: StoreHarness) -> None:
    store = harness.open()
    _run_with_steps(store, "r1", 2)
    actions.fork(store, "r1", _after(store, "r1", "steps/s1"), "r1-kept", keep_keys=True)
    eventlog.compact(store, "r1-kept")
    again = harness.open()
    assert not any(e.path == eventlog.FORKED for e in again.read_entries("r1-kept"))  # truncated ...
    assert eventlog.recover(again, "r1-kept").origin == Origin("r1", _after(store, "r1", "steps/s1"), "r1")
    # ... and a fork of the compacted fork still finds the root through the snapshot.
    start = eventlog.checkpoints(again, "r1-kept")[0].seq
    assert actions.fork(again, "r1-kept", start, "r1-kept2", keep_keys=True).keys == "r1"


def test_a_damaged_fork_record_is_a_catalogued_error(harness: StoreHarness) -> None:
    store = harness.open()
    store.admit(Admission.of("bad", inputs={}, workflow="order"))
    store.append("bad", Entry.decided(eventlog.FORKED, "fork", {"from": "r1", "keys": 7}))
    with pytest.raises(TeloError) as caught:
        eventlog.recover(store, "bad")
    assert caught.value.code == "ERR_DURABLE_JOURNAL_CORRUPT"
    assert "@forked" in caught.value.message and caught.value.hint and "telo runs journal" in caught.value.hint
