"""The event-log guarantees on every store: typed events, recovery, compaction, restore and fork."""

from __future__ import annotations

import itertools

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from telo.clock import FakeClock
from telo.errors import TeloError
from telo.journal import eventlog, snapshot_rows
from telo.journal.eventlog import EventKind
from telo.journal.model import Admission, Entry, Outcome, Parked
from telo.journal.store import Store
from telo.values.equality import equal

TARGET = {"kind": "Python.Function", "name": "charge", "module": "file:///app.yaml"}
_ids = itertools.count()


def _run_with_steps(store: Store, n: int, run: str = "r1") -> list[Entry]:
    store.admit(Admission.of(run, inputs={"order": "A-1"}, workflow="order"))
    out = [store.append(run, Entry.decided("inputs", "inputs", {"order": "A-1"}))]
    for i in range(n):
        out.append(store.append(run, Entry.decided(f"steps/s{i}/inputs", "inputs", {"i": i})))
        out.append(store.append(run, Entry.step(f"steps/s{i}", TARGET, {"done": i})))
    return out


def test_events_are_typed_and_keyed(store: Store) -> None:
    _run_with_steps(store, 1)
    store.append("r1", Entry.decided("steps/s1/retry[0]", "value", 1_000))
    store.append("r1", Entry.step("steps/wait", None, {"approved": True}))
    store.park("r1", Parked("steps/next", "approval", "tok"))
    evs = eventlog.events(store, "r1")
    kinds = [(e.path, e.kind) for e in evs]
    assert kinds == [
        ("inputs", EventKind.TRANSACTION),
        ("steps/s0/inputs", EventKind.EFFECT_INTENT),
        ("steps/s0", EventKind.EFFECT_RECEIPT),
        ("steps/s1/retry[0]", EventKind.RETRY_DECISION),
        ("steps/wait", EventKind.TRANSACTION),
        ("steps/next", EventKind.INTERRUPT),
    ]
    assert evs[1].idempotency_key == evs[2].idempotency_key == "r1/steps/s0"
    seqs = [e.seq for e in evs if e.seq is not None]
    assert seqs == sorted(seqs)


def test_recover_rebuilds_entries_record_version_and_hash(store: Store) -> None:
    stored = _run_with_steps(store, 3)
    state = eventlog.recover(store, "r1")
    assert state.record == store.read_run("r1")
    assert list(state.entries) == [e.path for e in stored]
    assert state.version == stored[-1].seq
    assert state.epoch == 0 and state.hash.startswith("sha256-")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 6), cut=st.integers(0, 20), extra=st.integers(0, 3), twice=st.booleans())
def test_recovery_from_the_compacted_log_equals_recovery_from_the_full_log(
    store: Store, n: int, cut: int, extra: int, twice: bool
) -> None:
    run = f"prop-{next(_ids)}"
    _run_with_steps(store, n, run)
    before = eventlog.recover(store, run)
    eventlog.compact(store, run)
    full = dict(before.entries)
    for i in range(extra):
        stored = store.append(run, Entry.step(f"steps/after{i}", TARGET, i))
        full.setdefault(stored.path, stored)
    if twice:
        eventlog.compact(store, run)
    after = eventlog.recover(store, run)
    assert {p: (e.value, e.v, e.kind) for p, e in after.entries.items()} == {
        p: (e.value, e.v, e.kind) for p, e in full.items()
    }
    assert after.hash == snapshot_rows.state_hash(full)
    # the compacted log holds the snapshot and what came after it only
    assert len(store.read_entries(run)) == (1 if twice else 1 + extra)
    # first writer still wins over a compacted path
    assert equal(eventlog.recover(store, run).entries.get("inputs", Entry.decided("inputs", "inputs", 0))
                 .decode(run), {"order": "A-1"})


def test_a_crash_between_snapshot_and_truncation_recovers_the_same(store: Store) -> None:
    _run_with_steps(store, 2)
    before = eventlog.recover(store, "r1")
    entries, epoch, version = eventlog.fold("r1", store.read_entries("r1"))
    # the snapshot is appended, the truncation never happens
    store.append("r1", Entry.decided(f"@snapshot[{version}]", "snapshot",
                                     snapshot_rows.snapshot_value(entries, epoch, version)))
    assert eventlog.recover(store, "r1").hash == before.hash


def test_restore_is_a_new_record_and_the_next_execution_continues_from_it(store: Store) -> None:
    stored = _run_with_steps(store, 3)
    store.complete("r1", Outcome.completed({"ok": True}))
    cps = eventlog.checkpoints(store, "r1")
    assert [c.path for c in cps] == ["(start)", "steps/s0", "steps/s1", "steps/s2"]
    s0 = cps[1].seq
    state = eventlog.restore(store, "r1", s0, reason="redo after s0")
    assert state.epoch == 1
    assert list(state.entries) == ["inputs", "steps/s0/inputs", "steps/s0"]
    rec = store.read_run("r1")
    assert rec is not None and rec.status == "running" and rec.result is None
    # history is never rewritten: every earlier record is still in the log
    raw = store.read_entries("r1")
    assert [e.path for e in raw[: len(stored)]] == [e.path for e in stored]
    # the next execution writes s1 again; it lands in the new epoch and wins there
    again = store.append("r1", Entry.step(state.storage_path("steps/s1"), TARGET, {"done": "again"}))
    assert again.path == "@epoch[1]/steps/s1"
    after = eventlog.recover(store, "r1")
    assert equal(after.entries["steps/s1"].decode("r1"), {"done": "again"})
    assert "steps/s2" not in after.entries
    # a late write from the abandoned epoch is ignored
    store.append("r1", Entry.step("steps/s9", TARGET, "stale"))
    assert "steps/s9" not in eventlog.recover(store, "r1").entries


def test_restore_twice_and_to_a_checkpoint_of_an_abandoned_epoch(store: Store) -> None:
    _run_with_steps(store, 2)
    cps = eventlog.checkpoints(store, "r1")
    eventlog.restore(store, "r1", cps[0].seq)  # back to the start
    assert set(eventlog.recover(store, "r1").entries) == set()
    store.append("r1", Entry.step("@epoch[1]/steps/s0", TARGET, "new"))
    eventlog.restore(store, "r1", cps[2].seq)  # a checkpoint of epoch 0
    state = eventlog.recover(store, "r1")
    assert state.epoch == 2
    assert equal(state.entries["steps/s1"].decode("r1"), {"done": 1})


def test_fork_copies_the_prefix_and_leaves_the_original_untouched(store: Store) -> None:
    _run_with_steps(store, 3)
    store.complete("r1", Outcome.completed("orig"))
    before = (store.read_run("r1"), store.read_entries("r1"))
    cp = eventlog.checkpoints(store, "r1")[2].seq  # after steps/s1
    forked = eventlog.fork(store, "r1", cp, "r1-fork")
    assert (store.read_run("r1"), store.read_entries("r1")) == before
    assert list(forked.entries) == ["inputs", "steps/s0/inputs", "steps/s0", "steps/s1/inputs", "steps/s1"]
    rec = store.read_run("r1-fork")
    assert rec is not None and rec.status == "running" and rec.workflow == "order"
    assert equal(rec.decoded_inputs(), {"order": "A-1"})
    with pytest.raises(TeloError) as exc:
        eventlog.fork(store, "r1", cp, "r1-fork")
    assert exc.value.code == "ERR_DURABLE_RUN_EXISTS"


def test_unknown_checkpoint_says_how_to_list_them(store: Store) -> None:
    _run_with_steps(store, 1)
    for op in (lambda: eventlog.restore(store, "r1", 999), lambda: eventlog.fork(store, "r1", 999, "x")):
        with pytest.raises(TeloError) as exc:
            op()
        assert exc.value.code == "ERR_CHECKPOINT_NOT_FOUND"
        assert exc.value.hint is not None and "telo runs checkpoints r1" in exc.value.hint


def test_restore_refuses_a_run_that_is_executing(store: Store, clock: FakeClock) -> None:
    from telo.journal.claims import Holder

    _run_with_steps(store, 1)
    assert store.claim("r1", Holder("w", "elsewhere", 1, 1).to_text(), 60_000, clock.now_ms())
    with pytest.raises(TeloError) as exc:
        eventlog.restore(store, "r1", 0, clock=clock)
    assert exc.value.code == "ERR_RUN_BUSY"
