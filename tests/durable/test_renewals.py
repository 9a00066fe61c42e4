"""Claim renewal of executing runs: one thread per store renews every claim held for a period, through its
fence, whatever the event loop is doing (reference §6; telo/durable/renewals.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from telo.clock import SYSTEM_CLOCK
from telo.durable import renewals
from telo.journal.claims import ClaimLost, Fence
from telo.journal.model import Claim, RunRecord

TTL_MS = 150  # renewed every 50 ms
ME = Fence("me@host:1:1", 7)


class _Claims:
    """Stands in for the store: records each renewal (run, holder, token, ttl); refuses the runs in ``lost``."""

    kind = "fake"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int, int]] = []  # (run, holder, token, until)
        self.batches: list[list[str]] = []  # the runs of each renew_many
        self.lost: set[str] = set()
        self.lock = threading.Lock()

    def renew(self, run: str, fence: Fence, ttl_ms: int, now_ms: int) -> bool:
        with self.lock:
            self.calls.append((run, fence.holder, fence.token, now_ms + ttl_ms))
        return run not in self.lost

    def renew_many(self, claims: list[tuple[str, Fence, int]]) -> list[bool]:
        with self.lock:
            self.batches.append([run for run, _, _ in claims])
        return [self.renew(run, fence, until, 0) for run, fence, until in claims]

    def read_run(self, run: str) -> Any:
        """A run in ``lost`` is another execution's now; the others were released (no claim)."""
        if run in self.lost:
            return RunRecord(run, "running", claim=Claim("other@host:2:2", 10**15), fence=ME.token + 1)
        return RunRecord(run, "running")

    def runs(self) -> list[str]:
        with self.lock:
            return [run for run, _, _, _ in self.calls]


def _until(condition: Any, what: str, timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s  # (timing-tolerant: a loaded machine runs threads late)
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def test_each_claim_is_renewed_every_period_through_its_fence_until_stopped() -> None:
    claims = _Claims()
    store: Any = claims
    a = renewals.renew_while_executing(store, "a", ME, SYSTEM_CLOCK, TTL_MS)
    time.sleep(0.02)
    b = renewals.renew_while_executing(store, "b", ME, SYSTEM_CLOCK, TTL_MS)
    _until(lambda: claims.runs().count("a") >= 3 and claims.runs().count("b") >= 2, "a renewed 3 times, b twice")
    assert claims.runs()[:2] == ["a", "b"]  # in the order they came due
    run, holder, token, until = claims.calls[0]
    assert (run, holder, token) == ("a", ME.holder, ME.token)
    assert abs(until - (SYSTEM_CLOCK.now_ms() + TTL_MS)) < 1_000
    a.stop()
    stopped_at = claims.runs().count("a")
    goal = claims.runs().count("b") + 2
    _until(lambda: claims.runs().count("b") >= goal, "b renewed twice more")  # b goes on, a does not
    assert claims.runs().count("a") <= stopped_at + 1  # (one renewal may have been in flight)
    b.stop()
    total = len(claims.calls)
    time.sleep(0.15)
    assert len(claims.calls) <= total + 1  # both stopped: nothing more


def test_a_run_shorter_than_a_period_is_never_renewed() -> None:
    claims = _Claims()
    store: Any = claims
    for i in range(50):
        renewals.renew_while_executing(store, f"r{i}", ME, SYSTEM_CLOCK, TTL_MS).stop()
    time.sleep(0.08)
    assert claims.calls == []


def test_renewal_goes_on_while_the_event_loop_is_blocked() -> None:
    """Observed (issue 12, case 2): an ``async def`` step blocking its loop stopped renewals, the claim lapsed
    while its holder was alive, and two processes executed one effect. Renewals now run on their own thread."""
    claims = _Claims()
    store: Any = claims

    async def blocked_body() -> None:
        renewal = renewals.renew_while_executing(store, "busy", ME, SYSTEM_CLOCK, TTL_MS)
        time.sleep(0.4)  # a synchronous call inside an async step: the loop runs nothing for 8 periods
        renewal.stop()

    asyncio.run(blocked_body())
    assert claims.runs().count("busy") >= 4


def test_a_renewal_refused_by_the_fence_marks_the_claim_lost_and_the_next_check_stops() -> None:
    claims = _Claims()
    claims.lost.add("taken")
    store: Any = claims
    renewal = renewals.renew_while_executing(store, "taken", ME, SYSTEM_CLOCK, TTL_MS)
    _until(lambda: renewal.lost is not None, "the refused renewal")
    count = claims.runs().count("taken")
    time.sleep(0.15)
    assert claims.runs().count("taken") == count  # a lost claim is not renewed again
    with pytest.raises(ClaimLost) as caught:
        asyncio.run(renewal.check())
    assert caught.value.code == "ERR_DURABLE_CLAIM_LOST" and caught.value.data["token"] == ME.token
    assert caught.value.data["currentToken"] == ME.token + 1
    renewal.stop()


def test_a_renewal_refused_because_the_execution_just_settled_the_run_is_no_loss() -> None:
    """Found in review: a keeper renewal in flight while its run completes (or releases its claim after a park)
    is refused — and was logged as `durable.claim.lost` on a healthy run."""
    claims = _Claims()
    claims.lost.add("gone")
    store: Any = claims
    renewal = renewals.renew_while_executing(store, "gone", ME, SYSTEM_CLOCK, TTL_MS)
    renewal.stop()  # the execution settled the run; a renewal racing it is refused
    assert renewal.renew_now() and renewal.lost is None
    claims.lost.discard("released")
    other = renewals.renew_while_executing(store, "released", ME, SYSTEM_CLOCK, 60_000)
    claims.renew = lambda *a: False  # type: ignore[method-assign]  # refused: the claim was released
    assert other.renew_now() and other.lost is None  # no claim now: nobody else holds it, nothing lost
    other.stop()


def test_a_keeper_lets_its_store_go_and_its_thread_ends_when_idle() -> None:
    """Found in review: keepers held their stores strongly and their threads never ended."""
    import gc
    import weakref

    claims = _Claims()
    gone = weakref.ref(claims)
    renewals.renew_while_executing(claims, "r", ME, SYSTEM_CLOCK, 300).stop()  # type: ignore[arg-type]
    keeper = renewals._Keeper.of(claims, 300)  # type: ignore[arg-type]
    thread = keeper.thread
    assert thread is not None and thread.is_alive()
    del claims
    gc.collect()
    assert gone() is None
    thread.join(2)  # idle for three periods of 100 ms: it ends
    assert not thread.is_alive()


def test_a_lease_that_may_have_lapsed_unseen_is_renewed_before_the_next_effect() -> None:
    """A paused process (SIGSTOP) renews nothing: on waking, the body's own check renews through the fence
    before its next effect, and goes on only if nobody was granted the run meanwhile."""
    claims = _Claims()
    store: Any = claims
    renewal = renewals.renew_while_executing(store, "paused", ME, SYSTEM_CLOCK, 60_000)
    asyncio.run(renewal.check())
    assert claims.calls == []  # the lease is fresh: nothing to do
    renewal.confirmed -= 50  # as if the process had been stopped for 50 s of its 60 s lease
    asyncio.run(renewal.check())
    assert claims.runs() == ["paused"] and not renewal.lease_unsure()
    renewal.confirmed -= 50
    claims.lost.add("paused")  # ... and this time another worker took the run over meanwhile
    with pytest.raises(ClaimLost):
        asyncio.run(renewal.check())
    renewal.stop()


def test_a_paused_holder_waking_after_its_successor_finished_the_run_stops_before_its_next_effect() -> None:
    """Found by the random-kill suite under load: a process paused past its lease woke to find the run taken
    over AND completed by another (no claim left, fence moved on); the refused renewal read "no claim" as
    "released by me" and the body went on starting effects its successor had executed (5 of one run)."""
    claims = _Claims()
    claims.renew = lambda *a: False  # type: ignore[method-assign]  # refused: the fence moved on
    claims.read_run = lambda run: RunRecord(run, "completed", fence=ME.token + 1)  # type: ignore[method-assign]
    store: Any = claims
    renewal = renewals.renew_while_executing(store, "finished", ME, SYSTEM_CLOCK, 60_000)
    renewal.confirmed -= 50  # paused for 50 s of a 60 s lease
    with pytest.raises(ClaimLost) as caught:
        asyncio.run(renewal.check())
    assert caught.value.data["currentToken"] == ME.token + 1
    renewal.stop()


def test_claims_coming_due_together_are_renewed_in_one_call() -> None:
    """Issue 14: a worker's hundred claims renew in one journal transaction (Store.renew_many), not a hundred."""
    claims = _Claims()
    store: Any = claims
    ttl_ms = 1_500  # renewed every 500 ms; claims coming due within 50 ms of each other go together
    held = [renewals.renew_while_executing(store, f"r{i}", ME, SYSTEM_CLOCK, ttl_ms) for i in range(100)]
    _until(lambda: len(claims.batches) >= 1, "a round of renewals", timeout_s=5.0)
    for renewal in held:
        renewal.stop()
    assert sorted(claims.batches[0]) == sorted(f"r{i}" for i in range(100))  # registered together: one call
