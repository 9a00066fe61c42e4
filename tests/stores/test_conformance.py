"""The store protocol's semantics (telo.journal.store), held identically by memory, SQLite, file and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from telo.clock import FakeClock
from telo.errors import ERR_DURABLE_ENTRY_UNDECODABLE, ERR_DURABLE_JOURNAL_CORRUPT, TeloError
from telo.journal.claims import Fence, Holder
from telo.journal.model import NO_VALUE, Admission, Entry, Outcome, Parked, RunFilter
from telo.journal.store import Store
from telo.values import CelMap, Duration, Timestamp, Uint
from telo.values.equality import equal

TARGET = {"kind": "Python.Function", "name": "charge", "module": "file:///app/orders.yaml"}
A = Holder("worker-a", "host-a", 1, 1).to_text()
B = Holder("worker-b", "host-b", 2, 2).to_text()
TTL = 60_000


def admit(store: Store, run: str = "r1", **kw: object) -> None:
    assert store.admit(Admission.of(run, **kw)).admitted  # type: ignore[arg-type]


# --- admission -----------------------------------------------------------------------------------------


def test_admit_records_the_run_before_anything_runs(store: Store, clock: FakeClock) -> None:
    result = store.admit(Admission.of("order:A-1", workflow="order"))
    assert result.admitted
    rec = store.read_run("order:A-1")
    assert rec is not None and rec == result.record
    assert rec.status == "running" and rec.workflow == "order"
    assert rec.created_at == clock.now_ms() and rec.claim is None and rec.parked is None
    assert store.read_entries("order:A-1") == []


def test_second_admit_returns_the_existing_record_unchanged(store: Store) -> None:
    admit(store, "r1", workflow="w")
    again = store.admit(Admission.of("r1", status="scheduled", due_at=5, workflow="other"))
    assert not again.admitted
    assert again.record.status == "running" and again.record.workflow == "w"
    assert store.read_run("r1") == again.record


def test_unknown_run_reads_as_none(store: Store) -> None:
    assert store.read_run("nope") is None
    assert store.read_entries("nope") == []


def test_scheduled_run_keeps_its_typed_inputs(store: Store) -> None:
    inputs = {"big": 2**60 + 1, "u": Uint(7), "b": b"\x00\xff", "t": Timestamp(1768462200, 1),
              "d": Duration(-1, -500000000), "m": {1: "one", 2: "two"}}
    admit(store, "s1", status="scheduled", due_at=1_000, inputs=inputs)
    rec = store.read_run("s1")
    assert rec is not None and rec.status == "scheduled" and rec.due_at == 1_000
    assert rec.inputs_v == 2
    assert equal(rec.decoded_inputs(), inputs)


def test_run_ids_with_any_characters(store: Store) -> None:
    for run in ["onboard:ada@example.com", "a/b\\c", "ünïcode 😀", "x%2Fy", "..", "order:A-4"]:
        admit(store, run)
        store.append(run, Entry.decided("inputs", "inputs", {"run": run}))
        assert store.read_run(run) is not None
        assert equal(store.read_entries(run)[0].decode(run), {"run": run})


# --- entries -------------------------------------------------------------------------------------------


def test_append_assigns_increasing_seq_in_write_order(store: Store) -> None:
    admit(store)
    paths = ["inputs", "steps/a/inputs", "steps/a", "steps/b/@when", "steps/b/if", "steps/b/then/c"]
    stored = [store.append("r1", Entry.decided(p, "value", i)) for i, p in enumerate(paths)]
    seqs = [e.seq for e in stored]
    assert all(isinstance(s, int) for s in seqs)
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    read = store.read_entries("r1")
    assert [e.path for e in read] == paths
    assert [e.seq for e in read] == seqs


def test_first_writer_wins_and_append_returns_the_stored_entry(store: Store) -> None:
    admit(store)
    first = store.append("r1", Entry.step("steps/charge", TARGET, {"charged": 10.5}))
    second = store.append("r1", Entry.step("steps/charge", TARGET, {"charged": 99.0}))
    assert second.same_record(first) and second.seq == first.seq
    assert equal(second.decode("r1"), {"charged": 10.5})
    assert len(store.read_entries("r1")) == 1


def test_entry_fields_round_trip(store: Store) -> None:
    admit(store)
    entries = [
        Entry.decided("inputs", "inputs", {"order": "A-1"}),
        Entry.step("steps/a", TARGET, [1, 2.5, None]),
        Entry.step("steps/b", {"kind": "Run.Value", "name": "before"}, "x"),  # no module
        Entry.step("steps/wait", None, {"approvedBy": "ada"}),  # a delivery: no target
        Entry.step("steps/nothing", TARGET),  # produced nothing
        Entry.step("steps/null", TARGET, None),  # produced null
        Entry.decided("steps/b/@when", "predicate", True),
    ]
    for e in entries:
        store.append("r1", e)
    read = store.read_entries("r1")
    for want, got in zip(entries, read, strict=True):
        assert got.same_record(want), (want, got)
    assert read[4].value is None and read[4].decode("r1") is NO_VALUE
    assert read[5].value == "null" and read[5].decode("r1") is None


def test_typed_values_survive_the_store(store: Store) -> None:
    admit(store)
    value = {
        "int": 2**53 + 1,
        "uint": Uint(2**64 - 1),
        "bytes": b"\x00a\x00",
        "ts": Timestamp(1768469400, 250000000),
        "dur": Duration(5400, 0),
        "intmap": {10: "ten", -1: "minus one"},
        "mixed": CelMap([(1, "int"), (True, "bool")]),
        "nan": float("nan"),
        "negzero": -0.0,
    }
    store.append("r1", Entry.step("steps/typed", TARGET, value))
    assert equal(store.read_entries("r1")[0].decode("r1"), value)


def test_legacy_and_unknown_codec_entries(store: Store) -> None:
    admit(store)
    store.append("r1", Entry("steps/legacy", "step", '{"n":1,"s":"x"}', None, None, TARGET))
    store.append("r1", Entry("steps/future", "decision", '"x"', 3, "value"))
    store.append("r1", Entry("steps/broken", "decision", '{"$telo":"int","value":1}', 2, "value"))
    legacy, future, broken = store.read_entries("r1")
    assert legacy.v is None and equal(legacy.decode("r1"), {"n": 1.0, "s": "x"})
    with pytest.raises(TeloError) as e1:
        future.decode("r1")
    assert e1.value.code == ERR_DURABLE_ENTRY_UNDECODABLE
    assert e1.value.data == {"run": "r1", "path": "steps/future", "version": 3, "reads": [1, 2]}
    with pytest.raises(TeloError) as e2:
        broken.decode("r1")
    assert e2.value.code == ERR_DURABLE_JOURNAL_CORRUPT
    assert e2.value.__cause__ is not None


def test_truncate_before_keeps_later_entries_and_seq(store: Store) -> None:
    admit(store)
    stored = [store.append("r1", Entry.decided(f"steps/s{i}", "value", i)) for i in range(6)]
    cut = stored[3].seq
    assert cut is not None
    assert store.truncate_before("r1", cut) == 3
    left = store.read_entries("r1")
    assert [e.path for e in left] == ["steps/s3", "steps/s4", "steps/s5"]
    assert [e.seq for e in left] == [e.seq for e in stored[3:]]
    later = store.append("r1", Entry.decided("steps/s6", "value", 6))
    assert later.seq is not None and later.seq > (stored[-1].seq or 0)


# --- lifecycle -----------------------------------------------------------------------------------------


def test_complete_settles_and_clears(store: Store) -> None:
    admit(store)
    assert store.claim("r1", A, TTL, 0)
    store.park("r1", Parked("steps/w", "approval", "tok", 500))
    store.unpark("r1")
    rec = store.complete("r1", Outcome.completed(
        {"steps": {"a": {"result": 1}}}, collapsed_regions=1,
        collapse_reasons=("Durable.Idempotent (idempotent): why",), replayed_steps=3))
    assert rec == store.read_run("r1")
    assert rec.status == "completed" and rec.terminal
    assert equal(rec.decoded_result(), {"steps": {"a": {"result": 1}}})
    assert rec.collapsed_regions == 1 and rec.collapse_reasons == ("Durable.Idempotent (idempotent): why",)
    assert rec.replayed_steps == 3
    assert rec.claim is None and rec.parked is None and rec.due_at is None and rec.error is None


def test_failed_and_cancelled_are_distinct(store: Store) -> None:
    admit(store, "f")
    admit(store, "c")
    f = store.complete("f", Outcome.failed("ERR_CARD_DECLINED", "card declined"))
    c = store.complete("c", Outcome.cancelled("operator said so"))
    assert f.status == "failed" and dict(f.error or {}) == {"code": "ERR_CARD_DECLINED", "message": "card declined"}
    assert c.status == "cancelled"
    assert dict(c.error or {}) == {"code": "ERR_DURABLE_RUN_CANCELLED", "message": "operator said so"}


def test_park_unpark_and_token_lookup(store: Store) -> None:
    admit(store)
    assert store.claim("r1", A, TTL, 0)
    rec = store.park("r1", Parked("steps/waitForApproval", "approval", "approve:t1", 9_000))
    assert rec.status == "parked" and rec.due_at == 9_000 and rec.claim is None
    assert rec.parked == Parked("steps/waitForApproval", "approval", "approve:t1", 9_000)
    assert store.read_run("r1") == rec
    found = store.run_parked_on("approve:t1")
    assert found is not None and found.run == "r1"
    assert store.run_parked_on("other") is None
    assert store.unpark("r1")
    rec2 = store.read_run("r1")
    assert rec2 is not None and rec2.status == "running" and rec2.parked is None and rec2.due_at is None
    assert store.run_parked_on("approve:t1") is None
    assert not store.unpark("r1")  # not parked any more
    assert not store.unpark("unknown")


def test_park_without_a_due_time_has_none(store: Store) -> None:
    admit(store, "s", status="scheduled", due_at=100)
    store.park("s", Parked("steps/w", "approval", "tok"))
    rec = store.read_run("s")
    assert rec is not None and rec.due_at is None and rec.parked is not None and rec.parked.at is None


def test_update_run_sets_fields(store: Store) -> None:
    admit(store)
    rec = store.update_run("r1", manifest_digest="sha256-abc", digest_scope="reachable")
    assert rec.manifest_digest == "sha256-abc" and rec.digest_scope == "reachable"
    assert store.read_run("r1") == rec
    with pytest.raises(TypeError):
        store.update_run("r1", not_a_field=1)


def test_lifecycle_calls_on_an_unknown_run_fail_clearly(store: Store) -> None:
    for call in (lambda: store.complete("ghost", Outcome.cancelled()),
                 lambda: store.park("ghost", Parked("steps/x")),
                 lambda: store.update_run("ghost", status="running")):
        with pytest.raises(TeloError) as exc:
            call()
        assert "ghost" in exc.value.message and exc.value.hint


# --- due runs ------------------------------------------------------------------------------------------


def test_due_runs_follow_the_reference_rules(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    admit(store, "running")
    admit(store, "sched-later", status="scheduled", due_at=now + 1_000)
    admit(store, "sched-now", status="scheduled", due_at=now - 1)
    admit(store, "parked-later")
    store.park("parked-later", Parked("steps/w", "r", "t1", now + 1_000))
    admit(store, "parked-token")
    store.park("parked-token", Parked("steps/w", "r", "t2"))
    admit(store, "parked-delivered")
    store.park("parked-delivered", Parked("steps/w", "r", "t3"))
    store.append("parked-delivered", Entry.step("steps/w", None, {"ok": True}))
    admit(store, "done")
    store.complete("done", Outcome.completed(1))
    admit(store, "claimed")
    assert store.claim("claimed", A, TTL, now)

    assert set(store.due_runs(now, 100)) == {"running", "sched-now", "parked-delivered"}
    later = now + 1_000
    assert set(store.due_runs(later, 100)) == {"running", "sched-now", "parked-delivered",
                                                "sched-later", "parked-later"}
    # the claim lapses after its TTL
    assert "claimed" in store.due_runs(now + TTL, 100)
    assert len(store.due_runs(later, 2)) == 2


def test_due_runs_orders_due_at_nulls_first(store: Store, clock: FakeClock) -> None:
    now = clock.now_ms()
    admit(store, "b", status="scheduled", due_at=now - 10)
    admit(store, "a", status="scheduled", due_at=now - 20)
    admit(store, "c")
    assert store.due_runs(now, 10) == ["c", "a", "b"]


# --- claims --------------------------------------------------------------------------------------------


def test_claims_are_exclusive_renewable_and_lapse(store: Store) -> None:
    admit(store)
    token = store.claim("r1", A, TTL, 1_000)
    assert token is not None
    rec = store.read_run("r1")
    assert rec is not None and rec.claim is not None
    assert rec.claim.holder == A and rec.claim.until == 1_000 + TTL
    assert not store.claim("r1", B, TTL, 2_000)
    assert not store.claim("r1", A, TTL, 3_000)  # its own live claim is not granted again (renewed through it)
    assert store.renew("r1", Fence(A, token), TTL, 30_000)  # renewal
    assert not store.claim("r1", B, TTL, 1_000 + TTL)  # renewed: still live
    assert store.claim("r1", B, TTL, 30_000 + TTL)  # lapsed: taken over
    store.release("r1", A)  # not the holder: no effect
    rec = store.read_run("r1")
    assert rec is not None and rec.claim is not None and rec.claim.holder == B
    store.release("r1", B)
    rec = store.read_run("r1")
    assert rec is not None and rec.claim is None
    assert not store.claim("ghost", A, TTL, 0)


def test_a_dead_local_holder_is_taken_over_at_once(store: Store) -> None:
    admit(store)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from telo.clock import process_start_ticks
        from telo.journal.claims import this_host

        dead = Holder("old-worker", this_host(), child.pid, process_start_ticks(child.pid)).to_text()
        assert store.claim("r1", dead, TTL, 0)
        assert not store.claim("r1", B, TTL, 1)  # alive: refused
    finally:
        child.kill()
        child.wait()
    assert store.claim("r1", B, TTL, 2)  # gone: taken over long before the TTL
    assert "r1" not in store.due_runs(3, 10)  # claimed by B, whose claim is live (B is on another host)


def test_claim_of_this_process_is_never_dead(store: Store) -> None:
    admit(store)
    me = Holder.for_this_process("me").to_text()
    assert store.claim("r1", me, TTL, 0)
    assert not store.claim("r1", B, TTL, 1)
    assert store.due_runs(1, 10) == []


# --- listing -------------------------------------------------------------------------------------------


def test_list_runs_filters_and_pages_newest_first(store: Store, clock: FakeClock) -> None:
    start = clock.now_ms()
    for i in range(7):
        admit(store, f"run-{i}", workflow="orders" if i % 2 == 0 else "billing")
        clock.advance(ms=10)
    store.complete("run-2", Outcome.completed(None))
    everything = store.list_runs(RunFilter(limit=100))
    assert [r.run for r in everything.runs] == [f"run-{i}" for i in reversed(range(7))]
    assert everything.next is None

    seen: list[str] = []
    after = None
    while True:
        page = store.list_runs(RunFilter(limit=3, after=after))
        assert len(page.runs) <= 3
        seen += [r.run for r in page.runs]
        if page.next is None:
            break
        after = page.next
    assert seen == [r.run for r in everything.runs]

    assert [r.run for r in store.list_runs(RunFilter(workflow="billing")).runs] == ["run-5", "run-3", "run-1"]
    assert [r.run for r in store.list_runs(RunFilter(status="completed")).runs] == ["run-2"]
    assert [r.run for r in store.list_runs(RunFilter(since=start + 50)).runs] == ["run-6", "run-5"]
    assert len(list(store.iter_all_runs(page_size=2))) == 7


# --- durability across instances -------------------------------------------------------------------------


def test_a_fresh_instance_recovers_everything(store: Store, reopen: Callable[[], Store]) -> None:
    admit(store, "r1", workflow="w")
    store.append("r1", Entry.decided("inputs", "inputs", {"x": 1}))
    store.append("r1", Entry.step("steps/a", TARGET, {"ok": True}))
    assert store.claim("r1", A, TTL, 5)
    store.park("r1", Parked("steps/w", "approval", "tok", 77))
    admit(store, "r2")
    store.complete("r2", Outcome.completed([1, 2]))
    other = reopen()
    for run in ("r1", "r2"):
        assert other.read_run(run) == store.read_run(run)
        assert other.read_entries(run) == store.read_entries(run)
    assert other.run_parked_on("tok") == store.read_run("r1")
    # and the new instance keeps writing where the old one stopped
    e = other.append("r1", Entry.step("steps/w", None, "delivered"))
    assert e.seq is not None and e.seq > (store.read_entries("r1")[1].seq or 0)


def test_pid_is_recorded_in_holder_text() -> None:
    h = Holder.for_this_process("w")
    parsed = Holder.parse(h.to_text())
    assert parsed == h and parsed.pid == os.getpid()
