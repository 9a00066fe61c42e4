"""Reading what a queue holds and what waits in it, from the journal (issue 16; docs/proposals/admission-control.md
"Visibility"): what ``telo queues``, ``telo status`` of a waiting run, the dashboard's queue page and
``telo.testing.assert_never_more_than`` show, read by :meth:`telo.journal.store.Store.queue_snapshot`.

The journal knows a queue's runs, not its limits (they are the manifest's): a snapshot counts the queue's
live runs by **state** and ``queue_key``, by the rule :mod:`telo.journal.queues` grants by —

- ``waiting``: ``scheduled`` and due (``due_at <= now``): admitted, waiting for a slot;
- ``later``: ``scheduled``, due later (a scheduled start whose time has not come);
- ``running``: ``running`` under a claim live by time — it holds a slot; grouped by the claim's holder, so a
  caller can count per process (``workerConcurrency``). A holder that is a dead process on this host holds
  nothing (:func:`telo.journal.claims.holder_is_dead`): its runs are moved to ``unclaimed``;
- ``unclaimed``: ``running`` without a live claim (its worker crashed, or a delivery unparked it): due again,
  it waits for a slot first in due order;
- ``parked`` / ``parkedDue``: ``parked``, its wake time not come / passed. A parked run holds a slot only if
  the queue says ``holdSlotWhileParked`` (which the journal does not record); a due one without that waits
  for a slot again.

A queue grants in :func:`telo.journal.queues.queue_order` — a run due again (no due time) first, then
``priority``, then due time, then id — so a waiting run's **position** is one more than the runs of
:data:`SLOT_STATES` before it in that order (``ahead_of``), and the ``oldest`` runs are the first candidates of
that order. Under a ``rateLimit`` (``rate``: limit and period) a snapshot also counts the queue's starts in the
window (``started_at`` after ``now - period``) and, when the window is full, when it frees
(``frees_at``: the start that must leave the window for one more to fit, plus the period).

Every read is one statement on the ``(queue, status)`` index (the starts: ``(queue, started_at)``), all of one
snapshot, read in one read transaction on the SQL stores (:mod:`telo.journal.sqlite_queue_reads`,
:mod:`telo.journal.postgres_queue_reads`); the generic form here reads every run (memory, file).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from telo.journal.claims import holder_is_dead
from telo.journal.model import RunRecord
from telo.journal.queues import queue_order

STATES = ("waiting", "later", "running", "unclaimed", "parked", "parkedDue")
# The states of runs that wait for a slot in due order (a due parked run only if parked runs do not hold one).
SLOT_STATES = ("unclaimed", "parkedDue", "waiting")
LIVE_STATUSES = ("scheduled", "running", "parked")


@dataclass(frozen=True, slots=True)
class QueueCount:
    """How many runs of one queue are in ``state`` with ``queue_key`` ``key`` (and, ``running``, held by
    ``holder``)."""

    state: str
    key: str | None
    count: int
    holder: str | None = None


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """One read of a queue: ``counts`` of its live runs; ``ahead``, given ``ahead_of``, the counts of those
    before that run in grant order; ``oldest``, the first runs that wait for a slot, in grant order; ``dead``,
    the holders found dead on this host (their runs counted ``unclaimed``); given ``rate``, ``started`` — the
    starts within the window — and ``frees_at``, when the window has room for one more start (None: it has)."""

    counts: tuple[QueueCount, ...]
    ahead: tuple[QueueCount, ...] = ()
    oldest: tuple[RunRecord, ...] = ()
    dead: tuple[str, ...] = ()
    started: int | None = None
    frees_at: int | None = None


def rate_window(starts: Iterable[int], limit: int, period_ms: int) -> tuple[int, int | None]:
    """How many of ``starts`` (the window's, any order) there are, and when the window has room for one more:
    once the start ``count - limit`` (oldest first) leaves it, a period after it; None if it has room now."""
    ordered = sorted(starts)
    if len(ordered) < limit:
        return len(ordered), None
    return len(ordered), ordered[len(ordered) - limit] + period_ms


def state_of(record: RunRecord, now_ms: int) -> str | None:
    """The snapshot state of a run of a queue (None for a settled run), before the dead-holder judgement."""
    due = record.due_at is not None and record.due_at <= now_ms
    if record.status == "scheduled":
        return "waiting" if due else "later"
    if record.status == "running":
        claim = record.claim
        return "running" if claim is not None and claim.until > now_ms else "unclaimed"
    if record.status == "parked":
        return "parkedDue" if due else "parked"
    return None


def settle_dead(counts: Iterable[QueueCount]) -> tuple[tuple[QueueCount, ...], tuple[str, ...]]:
    """``counts`` with the ``running`` groups of holders dead on this host moved to ``unclaimed``, groups of
    the same (state, key, holder) merged; and those holders (probed once each)."""
    merged: Counter[tuple[str, str | None, str | None]] = Counter()
    dead: dict[str, bool] = {}
    for c in counts:
        state, holder = c.state, c.holder
        if state == "running" and holder is not None:
            if holder not in dead:
                dead[holder] = holder_is_dead(holder)
            if dead[holder]:
                state, holder = "unclaimed", None
        merged[(state, c.key, holder if state == "running" else None)] += c.count
    out = tuple(QueueCount(s, k, n, h) for (s, k, h), n in sorted(merged.items(), key=_sort_key))
    return out, tuple(sorted(h for h, is_dead in dead.items() if is_dead))


def _sort_key(item: tuple[tuple[str, str | None, str | None], int]) -> tuple[int, str, str]:
    (state, key, holder), _ = item
    return STATES.index(state), key or "", holder or ""


def snapshot(records: Iterable[RunRecord], queue: str, now_ms: int, *, ahead_of: RunRecord | None = None,
             oldest: int = 0, rate: tuple[int, int] | None = None) -> QueueSnapshot:
    """:meth:`Store.queue_snapshot` over ``records`` (every run of the journal: the generic form)."""
    raw: list[QueueCount] = []
    ahead: list[QueueCount] = []
    candidates: list[tuple[RunRecord, str]] = []
    starts: list[int] = []
    since = None if rate is None else now_ms - rate[1]
    place = None if ahead_of is None else queue_order(ahead_of)
    for record in records:
        if record.queue != queue:
            continue
        if since is not None and record.started_at is not None and record.started_at > since:
            starts.append(record.started_at)
        state = state_of(record, now_ms)
        if state is None:
            continue
        holder = record.claim.holder if state == "running" and record.claim is not None else None
        raw.append(QueueCount(state, record.queue_key, 1, holder))
        if place is not None and queue_order(record) < place:
            ahead.append(QueueCount(state, record.queue_key, 1, holder))
        candidates.append((record, state))
    counts, dead = settle_dead(raw)
    waiting = [r for r, state in candidates if state in SLOT_STATES
               or (state == "running" and r.claim is not None and r.claim.holder in dead)]
    waiting.sort(key=queue_order)
    started, frees_at = (None, None) if rate is None else rate_window(starts, *rate)
    return QueueSnapshot(counts, settle_dead(ahead)[0] if place is not None else (), tuple(waiting[:oldest]), dead,
                         started, frees_at)


def names(records: Iterable[RunRecord]) -> list[str]:
    """:meth:`Store.queue_names` over every run of the journal (the generic form)."""
    return sorted({r.queue for r in records if r.queue is not None})
