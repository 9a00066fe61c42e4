"""Deciding a durable schedule's due ticks (issue 17): the policies, as a pure function of the ledger's state,
the clock and what the runs before are doing. :mod:`telo.kinds.schedule` records and acts on the decisions.

The policies (docs/schedules.md has the user's account):

- **on time or missed**: a tick decided within :data:`ON_TIME_MS` of its instant is on time; later ones were
  missed (no worker ran, or the journal was unreachable) and ``catchUp`` says what to do with them:
  ``none`` skips them all, ``latest`` fires the most recent due tick (an on-time one, if there is one) and
  skips the others, ``all`` fires each. Missed
  ticks older than ``catchUpWindow`` are skipped whatever ``catchUp`` says. Skipped missed ticks are recorded
  as one range.
- **paused**: a due tick is skipped ("paused"); resuming does not replay the paused time.
- **when**: a tick whose ``when`` is false is skipped.
- **overlap**, when the previous tick's run has not settled: ``skip`` the new tick; ``bufferOne`` keeps it to
  start when the previous settles (at most one waiting; later ones are skipped); ``bufferAll`` keeps every one,
  started in order; ``cancelRunning`` cancels the previous run and fires; ``allow`` fires regardless.
- ``startAt``/``endAt`` bound the ticks considered at all (outside, there are no ticks to record).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .cron import Ticks, between
from .schedule_ledger import SETTLED, LedgerState, TickDecision

ON_TIME_MS: Final = 60_000
MAX_DECISIONS: Final = 1_000  # per beat: a long catch-up continues at the next beat
_COUNT_LIMIT: Final = 100_000  # missed ticks counted one by one before a range says "at least"
CATCH_UP: Final = ("none", "latest", "all")
OVERLAP: Final = ("skip", "bufferOne", "bufferAll", "cancelRunning", "allow")
DEFAULT_WINDOW_MS: Final = 86_400_000  # catchUpWindow: a day


@dataclass(frozen=True, slots=True)
class Policy:
    catch_up: str = "latest"
    catch_up_window_ms: int = DEFAULT_WINDOW_MS
    overlap: str = "skip"
    jitter_ms: int = 0
    start_at_ms: int | None = None
    end_at_ms: int | None = None
    pause_on_failure: bool = False


@dataclass(frozen=True, slots=True)
class Planned:
    """The decisions to record, in tick order, and the runs to cancel first (``cancelRunning``)."""

    decisions: tuple[TickDecision, ...]
    cancel: tuple[str, ...] = ()
    more: bool = False  # a backlog remains after these: beat again at once


def plan(ticks: Ticks, policy: Policy, state: LedgerState, now_ms: int, *, run_of: Callable[[int], str],
         status: Callable[[str], str | None], gate: Callable[[int], str | None]) -> Planned:
    """Decide the due ticks after the ledger's cursor. ``run_of`` names a tick's run, ``status(run)`` is a run's
    status (None: not admitted yet — a buffered tick still waiting, which has not settled either), ``gate(tick)``
    says why a tick is skipped before any policy (``when``, its inputs), None when it is not.

    A backlog too long for one beat — more than :data:`_COUNT_LIMIT` missed ticks to list, or more than
    :data:`MAX_DECISIONS` to fire under ``catchUp: all`` — is decided in order over several beats
    (:attr:`Planned.more`): never a tick past what was listed, so ``latest`` fires only the truly latest tick and
    a tick older than ``catchUpWindow`` is never fired."""
    base = state.cursor_ms if state.cursor_ms is not None else (state.created_ms or now_ms)
    if policy.start_at_ms is not None:
        base = max(base, policy.start_at_ms - 1)
    until = now_ms if policy.end_at_ms is None else min(now_ms, policy.end_at_ms)
    window_start = now_ms - policy.catch_up_window_ms
    if ticks.after(base) < min(window_start, until + 1):  # ticks older than the window: skipped, one range a beat
        stale = list(between(ticks, base, min(window_start - 1, until), _COUNT_LIMIT))
        return Planned((_skipped(stale, "missed, older than catchUpWindow", now_ms),),
                       more=ticks.after(stale[-1]) <= until)
    due = list(between(ticks, base, until, _COUNT_LIMIT))
    listed_all = not due or ticks.after(due[-1]) > until
    late = [t for t in due if t < now_ms - ON_TIME_MS]
    on_time = due[len(late):]
    if policy.catch_up != "all" and not listed_all:  # a backlog longer than one listing: skip it, then go on
        return Planned((_skipped(late, f"missed (catchUp: {policy.catch_up})", now_ms),), more=True)
    decisions: list[TickDecision] = []
    fire_late: list[int] = []
    if policy.catch_up == "all":
        fire_late = late[:MAX_DECISIONS]
        on_time = on_time if len(late) < MAX_DECISIONS else []
    elif late:  # (latest: the most recent due tick — an on-time one, if any, supersedes every missed one)
        keep = late[-1:] if policy.catch_up == "latest" and not on_time else []
        skipped = late[:len(late) - len(keep)]
        if skipped:
            decisions.append(_skipped(skipped, f"missed (catchUp: {policy.catch_up})", now_ms))
        fire_late = keep
    chain = list(state.chain)
    cancel: list[str] = []
    for tick in [*fire_late, *on_time[:MAX_DECISIONS]]:
        decision = _decide(tick, tick in fire_late, policy, state, chain, run_of, status, gate, now_ms)
        if decision.action == "fire" and policy.overlap == "cancelRunning":
            cancel.extend(d.run for d in chain if d.run is not None and status(d.run) not in (None, *SETTLED))
        if decision.action == "fire":
            chain = [decision]
        elif decision.action == "buffer":
            chain.append(decision)
        decisions.append(decision)
    backlog = (policy.catch_up == "all" and len(late) > MAX_DECISIONS) or len(on_time) > MAX_DECISIONS
    return Planned(tuple(decisions), tuple(dict.fromkeys(cancel)), more=not listed_all or backlog)


def _skipped(ticks: list[int], reason: str, now_ms: int) -> TickDecision:
    """One decision skipping ``ticks`` (in order, at least one): recorded at the last, counting them all."""
    return TickDecision(ticks[-1], "skip", reason=reason, count=len(ticks),
                        from_ms=ticks[0] if len(ticks) > 1 else None, decided_at=now_ms, late=True)


def _decide(tick: int, late: bool, policy: Policy, state: LedgerState, chain: list[TickDecision],
            run_of: Callable[[int], str], status: Callable[[str], str | None], gate: Callable[[int], str | None],
            now_ms: int) -> TickDecision:
    def skip(reason: str) -> TickDecision:
        return TickDecision(tick, "skip", reason=reason, decided_at=now_ms, late=late)

    if state.paused:
        who = state.pause.by if state.pause else "an operator"
        why = f": {state.pause.reason}" if state.pause and state.pause.reason else ""
        return skip(f"paused by {who}{why}")
    gated = gate(tick)
    if gated is not None:
        return skip(gated)
    run = run_of(tick)
    unsettled = [d for d in chain if d.run is not None and status(d.run) not in SETTLED]
    if unsettled and policy.overlap != "allow":
        before = unsettled[-1].run
        if policy.overlap == "skip":
            return skip(f"overlap: {before} has not settled (overlap: skip)")
        if policy.overlap == "bufferOne" and any(d.action == "buffer" and status(d.run or "") is None
                                                 for d in unsettled):
            return skip(f"overlap: {before} is already waiting (overlap: bufferOne)")
        if policy.overlap in ("bufferOne", "bufferAll"):
            return TickDecision(tick, "buffer", run=run, decided_at=now_ms, late=late)
    return TickDecision(tick, "fire", run=run, decided_at=now_ms, late=late)
