"""Fencing tokens and atomic deliveries (telo.journal.store "fenced writes", ``deliver``), held identically by
memory, SQLite, file and PostgreSQL.

The scenario behind them (issue 12, cases 1 and 3): a holder paused past its lease wakes after another worker
took the run over, ran its steps and completed it. Before fencing, the first holder's writes all went in —
the intent it found already stored was "its own" by value, so it executed the effect again, and its completion
overwrote the second worker's record. And of two racing deliveries to one token, both were told delivered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from telo.journal.claims import ClaimLost, Fence, Holder
from telo.journal.model import Admission, Entry, Outcome, Parked
from telo.journal.store import Store

A = Holder("worker-a", "host-a", 1, 1).to_text()
B = Holder("worker-b", "host-b", 2, 2).to_text()
TTL = 60_000


def admitted(store: Store, run: str = "r1") -> None:
    assert store.admit(Admission.of(run)).admitted


def grant(store: Store, run: str, holder: str, now: int) -> Fence:
    token = store.claim(run, holder, TTL, now)
    assert token is not None, f"{holder} was refused {run}"
    return Fence(holder, token)


def test_every_grant_carries_a_greater_token_and_a_release_keeps_it(store: Store) -> None:
    admitted(store)
    a = grant(store, "r1", A, 0)
    assert a.token == 1
    assert (store.read_run("r1") or pytest.fail()).fence == 1
    assert store.claim("r1", A, TTL, 10) is None  # its own live claim: not granted again (no token spent)
    again = grant(store, "r1", A, TTL + 10)  # lapsed: granted again, fencing out its earlier execution
    assert again.token == 2
    store.release("r1", A)
    rec = store.read_run("r1")
    assert rec is not None and rec.claim is None and rec.fence == 2
    b = grant(store, "r1", B, 20)
    assert b.token == 3
    assert store.claim("r1", A, TTL, 30) is None  # B's claim is live: refused, no token spent
    assert (store.read_run("r1") or pytest.fail()).fence == 3


def test_a_fresh_admission_claimed_with_its_row_holds_token_1(store: Store) -> None:
    admitted(store, "fresh")
    assert grant(store, "fresh", A, 0).token == 1


def _writes(store: Store, run: str, fence: Fence) -> dict[str, Callable[[], object]]:
    return {
        "append": lambda: store.append(run, Entry.decided("steps/charge/@inputs", "inputs", {"n": 1}), fence=fence),
        "park": lambda: store.park(run, Parked("steps/wait", "wait", "tok"), fence=fence),
        "complete": lambda: store.complete(run, Outcome.completed({"by": "stale"}), fence=fence),
        "update_run": lambda: store.update_run(run, fence=fence, manifest_digest="stale"),
    }


@pytest.mark.parametrize("write", ["append", "park", "complete", "update_run"])
def test_a_stale_holders_write_is_refused_after_a_takeover_and_writes_nothing(store: Store, write: str) -> None:
    admitted(store)
    stale = grant(store, "r1", A, 0)
    new = grant(store, "r1", B, TTL + 1)  # A's lease lapsed (paused past it): B takes the run over
    before = store.read_run("r1")
    with pytest.raises(ClaimLost) as caught:
        _writes(store, "r1", stale)[write]()
    err = caught.value
    assert err.code == "ERR_DURABLE_CLAIM_LOST"
    assert err.data["token"] == stale.token and err.data["currentToken"] == new.token
    assert err.data["currentHolder"] == B and "r1" in err.message
    assert store.read_entries("r1") == [] and store.read_run("r1") == before
    # the holder of the run writes as ever
    _writes(store, "r1", new)["append"]()
    assert [e.path for e in store.read_entries("r1")] == ["steps/charge/@inputs"]


def test_a_stale_holder_cannot_build_on_an_intent_the_new_holder_wrote(store: Store) -> None:
    """First writer wins hands back the stored entry — but never to an execution that lost the run."""
    admitted(store)
    stale = grant(store, "r1", A, 0)
    new = grant(store, "r1", B, TTL + 1)
    intent = Entry.decided("steps/charge/@inputs", "inputs", {"amount": 5})
    store.append("r1", intent, fence=new)
    with pytest.raises(ClaimLost):
        store.append("r1", intent, fence=stale)  # the same value: before fencing, a licence to charge again


def test_a_write_after_a_cancel_or_a_release_is_refused(store: Store) -> None:
    admitted(store)
    fence = grant(store, "r1", A, 0)
    store.complete("r1", Outcome.cancelled("by operator"))  # an operator's write: unfenced, clears the claim
    with pytest.raises(ClaimLost):
        store.complete("r1", Outcome.completed(None), fence=fence)
    assert (store.read_run("r1") or pytest.fail()).status == "cancelled"
    admitted(store, "r2")
    fence = grant(store, "r2", A, 0)
    store.release("r2", A, fence.token)
    with pytest.raises(ClaimLost):
        store.append("r2", Entry.step("steps/x", None, 1), fence=fence)


def test_a_fenced_park_keeps_the_claim_and_an_operators_releases_it(store: Store) -> None:
    admitted(store)
    fence = grant(store, "r1", A, 0)
    rec = store.park("r1", Parked("steps/wait", "wait", "tok"), fence=fence)
    assert rec.status == "parked" and rec.claim is not None and rec.claim.holder == A and rec.fence == fence.token
    # sibling branches of the body go on writing through the same fence until it unwinds
    store.append("r1", Entry.step("steps/sibling", None, 1), fence=fence)
    store.release("r1", A, fence.token)
    rec = store.read_run("r1")
    assert rec is not None and rec.claim is None and rec.status == "parked"
    admitted(store, "r2")
    grant(store, "r2", A, 0)
    assert store.park("r2", Parked("steps/wait", "wait")).claim is None


def test_renewal_goes_through_the_fence_even_after_a_lapse_nobody_took(store: Store) -> None:
    admitted(store)
    fence = grant(store, "r1", A, 0)
    assert store.renew("r1", fence, TTL, TTL + 5)  # lapsed, but nobody was granted the run since: still A's
    rec = store.read_run("r1")
    assert rec is not None and rec.claim is not None and rec.claim.until == 2 * TTL + 5 and rec.fence == fence.token
    assert store.claim("r1", B, TTL, TTL + 10) is None  # renewed: live again
    new = grant(store, "r1", B, 3 * TTL)
    assert not store.renew("r1", fence, TTL, 3 * TTL + 1)  # taken over: the stale renewal changes nothing
    rec = store.read_run("r1")
    assert rec is not None and rec.claim is not None and rec.claim.holder == B and rec.fence == new.token
    store.release("r1", B, fence.token)  # a stale token releases nothing
    assert (store.read_run("r1") or pytest.fail()).claim is not None


def test_a_delivery_stores_the_payload_at_the_park_path_and_unparks(store: Store) -> None:
    admitted(store)
    store.park("r1", Parked("steps/approve", "approval", "approve:1"))
    assert store.deliver("nobody-parked-on-this", '{"by":"x"}', 2) is None
    assert store.deliver("approve:1", '{"by":"ada"}', 2) == "r1"
    rec = store.read_run("r1")
    assert rec is not None and rec.status == "running" and rec.parked is None
    [entry] = store.read_entries("r1")
    assert (entry.path, entry.kind, entry.value, entry.v, entry.target) == ("steps/approve", "step", '{"by":"ada"}',
                                                                           2, None)
    assert store.deliver("approve:1", '{"by":"bob"}', 2) is None  # spent


def test_a_delivery_to_a_park_whose_path_is_filled_delivers_nothing(store: Store) -> None:
    admitted(store)
    store.append("r1", Entry.step("steps/approve", None, {"by": "early"}))
    store.park("r1", Parked("steps/approve", "approval", "approve:1"))
    assert store.deliver("approve:1", '{"by":"late"}', 2) is None
    assert [e.value for e in store.read_entries("r1")] == ['{"by":"early"}']


def test_of_racing_deliveries_exactly_one_is_told_delivered_and_its_payload_stands(
        store: Store, reopen: Callable[[], Store]) -> None:
    """Observed (issue 12, case 3): two concurrent deliveries were both answered delivered and the journal kept
    one payload. Here 8 threads, each on its own store instance where the store has several, race 10 times."""
    stores = [store] + [reopen() for _ in range(3)]
    for round_ in range(10):
        run, token = f"r{round_}", f"approve:{round_}"
        admitted(store, run)
        store.park(run, Parked("steps/approve", "approval", token))
        start = threading.Barrier(8)
        won: list[str] = []

        def deliver(i: int, token: str = token, start: threading.Barrier = start, won: list[str] = won) -> None:
            start.wait()
            if stores[i % len(stores)].deliver(token, f'{{"by":"caller-{i}"}}', 2) is not None:
                won.append(f'{{"by":"caller-{i}"}}')

        threads = [threading.Thread(target=deliver, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1, f"round {round_}: {len(won)} deliveries were told delivered"
        assert [e.value for e in store.read_entries(run)] == won
