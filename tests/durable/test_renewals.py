"""Claim renewal of executing runs: one timer per loop renews every claim held for a period (reference §6)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from telo.clock import SYSTEM_CLOCK
from telo.durable import renewals
from telo.durable.aio import AsyncStore
from telo.journal.claims import DEFAULT_TTL_MS


class _Claims:
    """Stands in for the store: records each claim renewal (run, holder, ttl)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []

    async def claim(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> bool:
        self.calls.append((run, holder, ttl_ms))
        return True


def _runs(claims: _Claims) -> list[str]:
    return [run for run, _, _ in claims.calls]


def test_each_claim_is_renewed_every_period_until_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(_each_claim_is_renewed_every_period_until_stopped(monkeypatch))


async def _each_claim_is_renewed_every_period_until_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(renewals, "_PERIOD_S", 0.05)
    claims = _Claims()
    store: Any = claims

    async def until(count: int, run: str) -> None:
        for _ in range(400):  # (timing-tolerant: a loaded machine fires timers late)
            if _runs(claims).count(run) >= count:
                return
            await asyncio.sleep(0.005)
        raise AssertionError(f"{run} renewed {_runs(claims).count(run)} times, expected {count}")

    a = renewals.renew_while_executing(store, "a", "me", SYSTEM_CLOCK)
    await asyncio.sleep(0.02)
    b = renewals.renew_while_executing(store, "b", "me", SYSTEM_CLOCK)
    await until(3, "a")
    await until(2, "b")
    assert _runs(claims)[:2] == ["a", "b"]  # in the order they came due
    assert claims.calls[0] == ("a", "me", DEFAULT_TTL_MS)
    await a.stop()
    stopped_at = _runs(claims).count("a")
    await until(_runs(claims).count("b") + 2, "b")  # b goes on, a does not
    assert _runs(claims).count("a") == stopped_at
    await b.stop()
    total = len(claims.calls)
    await asyncio.sleep(0.15)
    assert len(claims.calls) == total  # both stopped: nothing more


def test_a_run_shorter_than_a_period_is_never_renewed(monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(_a_run_shorter_than_a_period_is_never_renewed(monkeypatch))


async def _a_run_shorter_than_a_period_is_never_renewed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(renewals, "_PERIOD_S", 0.05)
    claims = _Claims()
    store: AsyncStore = claims  # type: ignore[assignment]
    for i in range(50):
        await renewals.renew_while_executing(store, f"r{i}", "me", SYSTEM_CLOCK).stop()
    await asyncio.sleep(0.08)
    assert claims.calls == []


def test_stop_cancels_a_renewal_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(_stop_cancels_a_renewal_in_flight(monkeypatch))


async def _stop_cancels_a_renewal_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(renewals, "_PERIOD_S", 0.02)
    started, finished = asyncio.Event(), []

    class Slow:
        async def claim(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> bool:
            started.set()
            await asyncio.sleep(1)
            finished.append(run)
            return True

    store: Any = Slow()
    renewal = renewals.renew_while_executing(store, "slow", "me", SYSTEM_CLOCK)
    await asyncio.wait_for(started.wait(), 1)
    await renewal.stop()
    assert renewal.renewing is None and finished == []
