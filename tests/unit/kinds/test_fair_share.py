"""The fair-share rules one worker process applies to its claims of a queue (telo.kinds.fair_share; issue 16),
on synthetic journal reads — the racing processes are tests/faults/test_queue_fairness.py's."""

from __future__ import annotations

from telo.journal.model import Claim, RunRecord
from telo.kinds.fair_share import GRACE_S, OFFER_GAP_MIN_S, OFFER_PAUSE_S, FairShare, process_of

NOW = 1_000_000
ME = "elsewhere:1:1"  # (a host other than this one: a claim there is live until it lapses)


def holding(**per_process: int) -> list[RunRecord]:
    """Runs of the queue holding a slot: ``p2=3`` — three held by process ``elsewhere:2:1``."""
    out = []
    for name, n in per_process.items():
        for i in range(n):
            claim = Claim(f"resumer-w@elsewhere:{name[1:]}:1", NOW + 60_000)
            out.append(RunRecord(f"{name}-{i}", "running", claim=claim, queue="q"))
    return out


def share(concurrency: int, mono: float = 100.0, **per_process: int) -> FairShare:
    fair = FairShare(concurrency, ME)
    fair.observe(holding(**per_process), NOW, mono, hold_parked=False)
    return fair


def test_a_process_is_named_by_its_holder_without_the_resumer() -> None:
    assert process_of("resumer-worker-pay@host:12:345") == "host:12:345"


def test_a_lone_worker_takes_all_the_room_and_refills_at_once() -> None:
    fair = share(4)
    assert fair.allowance(100.0) == 4
    fair.claimed(4)
    assert fair.allowance(100.0) == 0
    assert fair.rested(100.0) > 0  # the first rest offers the slot (nobody seen yet: maybe someone waits)
    assert fair.allowance(100.0) == 0  # … one slot of room is left to the others meanwhile
    assert fair.rested(100.01) == 0  # one offer at a time: the next rest refills at once
    assert fair.allowance(100.01) == 1


def test_a_discovery_offer_nobody_took_makes_the_next_wait() -> None:
    fair = share(4, p1=4)  # (p1 is this process: elsewhere:1:1)
    assert fair.rested(100.0) > 0
    later = 100.0 + OFFER_PAUSE_S[1]
    fair.observe(holding(p1=3), NOW, later, hold_parked=False)  # the room is still there: not taken
    fair.claimed(1)
    assert fair.rested(later) == 0  # within the gap: the slot is claimed again at once
    fair.claimed(1)
    assert fair.rested(later + OFFER_GAP_MIN_S + 0.01) > 0  # after it


def test_a_new_claimer_resets_the_gap_and_caps_the_share() -> None:
    fair = share(4, p1=3, p2=1)
    assert fair.seen.keys() == {"elsewhere:2:1"}
    assert fair.allowance(100.0) == 0  # the queue is full
    fair.observe(holding(p1=2, p2=1), NOW, 100.1, hold_parked=False)
    assert fair.allowance(100.1) == 0  # two claimers: my share is 2, and I hold 2 — the room is for p2
    assert fair.allowance(100.1 + GRACE_S + 0.01) == 1  # … unless nobody takes it for a while


def test_four_claimers_of_four_slots_hold_one_each() -> None:
    fair = share(4, p1=1, p2=1, p3=1, p4=1)
    fair.rested(100.0)  # (the first rest after seeing new claimers offers the slot once)
    fair.observe(holding(p2=1, p3=1, p4=1), NOW, 101.0, hold_parked=False)
    assert fair.allowance(101.0) == 1  # my slot back: under my share
    fair.claimed(1)
    assert not fair.short()


def test_with_more_claimers_than_slots_the_holder_hands_its_slot_on() -> None:
    holder = share(1, p1=1)
    holder.seen["elsewhere:2:1"] = 100.0  # p2 held the slot a moment ago, and holds none now
    assert holder.rested(100.0) > 0  # rotation: the freed slot is offered to p2 …
    holder.claimed(1)
    assert holder.rested(101.0) > 0  # … at every rest while p2 is short (no gap, unlike discovery)
    waiter = FairShare(1, "elsewhere:2:1")
    waiter.observe(holding(p1=1), NOW, 100.0, hold_parked=False)
    assert waiter.short() and waiter.allowance(100.0) == 0  # it looks again soon
    waiter.observe(holding(), NOW, 100.02, hold_parked=False)  # the holder's run rested: the slot is offered
    assert waiter.allowance(100.02) == 1


def test_parked_runs_hold_slots_only_when_the_queue_says_so() -> None:
    parked = [RunRecord("p", "parked", queue="q")]
    fair = FairShare(1, ME)
    fair.observe(parked, NOW, 100.0, hold_parked=False)
    assert fair.allowance(100.0) == 1
    fair.observe(parked, NOW, 100.1, hold_parked=True)
    assert fair.allowance(100.1) == 0
