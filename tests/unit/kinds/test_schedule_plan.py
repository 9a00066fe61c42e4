"""telo.kinds.schedule_plan: the schedule policies as decisions — catch-up after an outage, the window, pause,
``when``, each overlap policy, startAt/endAt (docs/schedules.md)."""

from __future__ import annotations

from collections.abc import Collection

from telo.kinds.cron import IntervalTicks
from telo.kinds.schedule_ledger import LedgerState, Operation, TickDecision
from telo.kinds.schedule_plan import ON_TIME_MS, Planned, Policy, plan

MIN = 60_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the ledger's creation, the interval's anchor
EVERY_MINUTE = IntervalTicks(MIN, T0, "1m")


def run_of(tick: int) -> str:
    return f"s@{(tick - T0) // MIN}"


def decide(policy: Policy, now: int, *, state: LedgerState | None = None, live: Collection[str] = (),
           gate: dict[int, str] | None = None, ticks: IntervalTicks = EVERY_MINUTE,
           waiting: Collection[str] = ()) -> Planned:
    """``live``: runs executing; ``waiting``: buffered runs not admitted yet; any other run has completed."""
    state = state or LedgerState(exists=True, created_ms=T0)
    return plan(ticks, policy, state, now, run_of=run_of,
                status=lambda r: None if r in waiting else "running" if r in live else "completed",
                gate=lambda t: (gate or {}).get(t))


def actions(planned: Planned) -> list[tuple[int, str, int]]:
    """(minute of the tick, action, how many ticks it stands for)."""
    return [((d.tick_ms - T0) // MIN, d.action, d.count) for d in planned.decisions]


def test_due_ticks_fire_one_run_each_and_say_which_were_late() -> None:
    got = decide(Policy(catch_up="all", overlap="allow"), T0 + 3 * MIN)
    assert actions(got) == [(1, "fire", 1), (2, "fire", 1), (3, "fire", 1)]
    assert [d.run for d in got.decisions] == ["s@1", "s@2", "s@3"]
    assert [d.late for d in got.decisions] == [True, False, False]  # (decided more than ON_TIME_MS after it)


def test_after_a_ten_minute_outage_catch_up_none_skips_the_missed_ticks_as_one_range() -> None:
    now = T0 + 10 * MIN + 30_000  # ticks 1..9 are more than a minute late; tick 10 is on time
    got = decide(Policy(catch_up="none", overlap="allow"), now)
    assert actions(got) == [(9, "skip", 9), (10, "fire", 1)]
    skipped = got.decisions[0]
    assert skipped.from_ms == T0 + MIN and skipped.reason == "missed (catchUp: none)" and skipped.late


def test_catch_up_latest_fires_the_most_recent_due_tick() -> None:
    on_time_too = decide(Policy(catch_up="latest", overlap="allow"), T0 + 10 * MIN + 30_000)
    assert actions(on_time_too) == [(9, "skip", 9), (10, "fire", 1)]
    every_5 = IntervalTicks(5 * MIN, T0, "5m")  # (every 5 minutes: the last due tick can be late too)
    all_late = decide(Policy(catch_up="latest", overlap="allow"), T0 + 20 * MIN + ON_TIME_MS + 1, ticks=every_5)
    assert actions(all_late) == [(15, "skip", 3), (20, "fire", 1)]
    assert all_late.decisions[1].late


def test_catch_up_all_fires_each_missed_tick_through_the_overlap_policy() -> None:
    now = T0 + 10 * MIN + 30_000
    assert actions(decide(Policy(catch_up="all", overlap="allow"), now)) == [(m, "fire", 1) for m in range(1, 11)]
    # with overlap: skip, each fired run is live when the next tick is decided
    got = decide(Policy(catch_up="all", overlap="skip"), now, live={f"s@{m}" for m in range(1, 11)})
    assert actions(got)[0] == (1, "fire", 1) and {a for _, a, _ in actions(got)[1:]} == {"skip"}


def test_missed_ticks_older_than_the_window_are_skipped_whatever_catch_up_says() -> None:
    now = T0 + 60 * MIN
    policy = Policy(catch_up="all", catch_up_window_ms=5 * MIN, overlap="allow")
    got = decide(policy, now)
    [first] = got.decisions
    assert (first.action, first.count, first.reason) == ("skip", 54, "missed, older than catchUpWindow")
    assert got.more  # (the rest at the next beat, from the new cursor)
    after = decide(policy, now, state=LedgerState(exists=True, created_ms=T0, cursor_ms=first.tick_ms))
    assert actions(after) == [(m, "fire", 1) for m in range(55, 61)] and not after.more


def cursor_after(planned: Planned) -> LedgerState:
    return LedgerState(exists=True, created_ms=T0, cursor_ms=max(d.tick_ms for d in planned.decisions))


def test_a_backlog_longer_than_one_beat_still_fires_only_the_latest_tick() -> None:
    """Twenty hours of minute ticks missed (1200, more than one beat decides): catchUp latest fires one tick,
    the last (a review found the 1000th and the 1200th both fired)."""
    policy, now, state = Policy(catch_up="latest", overlap="allow"), T0 + 1200 * MIN + 30_000, None
    fired: list[int] = []
    for _ in range(10):
        got = decide(policy, now, state=state)
        fired += [m for m, action, _ in actions(got) if action == "fire"]
        state = cursor_after(got)
        if not got.more:
            break
    assert fired == [1200]


def test_a_window_older_than_one_listing_never_fires_a_tick_outside_it() -> None:
    """Seven days of 5-second ticks missed, catchUp all within a day: every tick older than the day is skipped,
    over as many beats as it takes (a review found ticks days old fired)."""
    every_5s = IntervalTicks(5_000, T0, "5s")
    day = 86_400_000
    now = T0 + 7 * day
    policy = Policy(catch_up="all", catch_up_window_ms=day, overlap="allow")
    state: LedgerState | None = None
    fired: list[int] = []
    for _ in range(100):
        got = decide(policy, now, state=state, ticks=every_5s)
        fired += [d.tick_ms for d in got.decisions if d.action == "fire"]
        state = cursor_after(got)
        if not got.more or fired:
            break
    assert fired and min(fired) >= now - day


def test_a_paused_schedule_skips_its_due_ticks_saying_who_paused_it() -> None:
    state = LedgerState(exists=True, created_ms=T0, paused=True, pause=Operation("pause", T0, "ops@host", "deploy"))
    got = decide(Policy(), T0 + 2 * MIN, state=state)
    assert [d.reason for d in got.decisions] == ["paused by ops@host: deploy"] * 2


def test_when_skips_with_its_reason() -> None:
    got = decide(Policy(overlap="allow"), T0 + 2 * MIN, gate={T0 + MIN: "when is false"})
    assert actions(got) == [(1, "skip", 1), (2, "fire", 1)] and got.decisions[0].reason == "when is false"


def chain_of(*runs: tuple[int, str]) -> LedgerState:
    return LedgerState(exists=True, created_ms=T0, cursor_ms=T0 + max(m for m, _ in runs) * MIN,
                       chain=tuple(TickDecision(T0 + m * MIN, a, run=f"s@{m}") for m, a in runs))


def test_overlap_skip_buffer_cancel_allow() -> None:
    state = chain_of((1, "fire"))
    now = T0 + 3 * MIN
    live = {"s@1", "s@2", "s@3"}
    assert [a for _, a, _ in actions(decide(Policy(overlap="skip"), now, state=state, live=live))] == ["skip"] * 2
    one = decide(Policy(overlap="bufferOne"), now, state=state, live=live, waiting={"s@2"})
    assert [a for _, a, _ in actions(one)] == ["buffer", "skip"]
    assert "already waiting" in (one.decisions[1].reason or "")
    started = chain_of((1, "fire"), (2, "buffer"))  # (the buffered run has started: it no longer waits)
    assert [a for _, a, _ in actions(decide(Policy(overlap="bufferOne"), T0 + 3 * MIN, state=started,
                                            live=live))] == ["buffer"]
    every = decide(Policy(overlap="bufferAll"), now, state=state, live=live)
    assert [a for _, a, _ in actions(every)] == ["buffer", "buffer"]
    cancel = decide(Policy(overlap="cancelRunning"), now, state=state, live=live)
    assert [a for _, a, _ in actions(cancel)] == ["fire", "fire"] and cancel.cancel == ("s@1", "s@2")
    assert [a for _, a, _ in actions(decide(Policy(overlap="allow"), now, state=state, live=live))] == ["fire"] * 2


def test_a_settled_previous_run_lets_the_tick_fire() -> None:
    got = decide(Policy(overlap="skip"), T0 + 2 * MIN, state=chain_of((1, "fire")), live=())
    assert actions(got) == [(2, "fire", 1)]


def test_start_and_end_bound_the_ticks() -> None:
    policy = Policy(overlap="allow", start_at_ms=T0 + 3 * MIN, end_at_ms=T0 + 5 * MIN)
    assert actions(decide(policy, T0 + 2 * MIN)) == []
    assert actions(decide(policy, T0 + 9 * MIN + 1)) == [(4, "skip", 2), (5, "fire", 1)]  # (no tick after endAt)
    every = Policy(catch_up="all", overlap="allow", start_at_ms=T0 + 3 * MIN, end_at_ms=T0 + 5 * MIN)
    assert actions(decide(every, T0 + 5 * MIN)) == [(3, "fire", 1), (4, "fire", 1), (5, "fire", 1)]


def test_decisions_resume_after_the_cursor() -> None:
    state = LedgerState(exists=True, created_ms=T0, cursor_ms=T0 + 2 * MIN)
    assert actions(decide(Policy(overlap="allow"), T0 + 3 * MIN, state=state)) == [(3, "fire", 1)]
