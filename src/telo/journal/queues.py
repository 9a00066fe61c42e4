"""Admission control in the journal (issue 16; docs/proposals/admission-control.md): which queued runs a claim
may grant, decided once here and applied by every store inside the transaction that grants its claims.

A queued run (``RunRecord.queue`` set) is a ``scheduled`` run admitted without a claim; it starts only through
:meth:`telo.journal.store.Store.claim_due`, which grants it while its queue has room. A run **holds a slot** of
its queue while it is ``running`` under a live claim — a lapsed claim, or one of a holder that died on this
host, holds nothing, the predicate due runs are judged by (:func:`telo.journal.rules.claim_is_live`) — and, when
the queue says ``holdSlotWhileParked``, while it is ``parked``. The budget of a queue is then ``concurrency``
minus what holds its slots, per ``queue_key`` ``concurrencyKey.limit`` minus what holds that key's, per
process the caller's free ``workerConcurrency``, and — for a run's **first** grant only, its start, which sets the
run's ``started_at`` — ``rateLimit.limit`` minus the runs of the queue started within ``rateLimit.period``
before the journal's now (the proposal's "Admission and dequeue are claims under the limits", step 2). A re-grant
of a run already started (due again after a crash, continuing after a park) spends no rate budget. Candidates
are granted in :func:`queue_order` (in SQL :func:`queue_order_sql`): a run due again after a crash first, then
``priority``, then due time (FIFO by admission), then id.

The stores differ only in how they count and lock: SQLite counts inside the writer's ``BEGIN IMMEDIATE``, which
serialises every claim; PostgreSQL takes ``pg_advisory_xact_lock`` of the queue in the granting transaction
(:mod:`telo.journal.postgres_queues`); memory and the generic form hold the store's lock. The grant rule below
is the one all of them apply to what they counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from telo.journal.claims import holder_is_dead

if TYPE_CHECKING:
    from telo.journal.model import RunRecord


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """A queue's limits as a claimer passes them to ``Store.claim_due`` (``queues={name: limits}``).

    ``concurrency``: runs holding a slot at once across every process on the journal (None: no global limit);
    ``key_limit``: at most this many per ``queue_key`` (None: no per-key limit); ``worker_free``: how many more
    runs of the queue the calling process may execute now (its ``workerConcurrency`` minus what it executes;
    None: no per-process limit); ``hold_parked``: parked runs keep their slot (``holdSlotWhileParked``);
    ``rate_limit`` per ``rate_period_ms``: at most this many starts (first grants) within any window of the
    period, on the journal's clock (None: no rate limit)."""

    concurrency: int | None = None
    key_limit: int | None = None
    worker_free: int | None = None
    hold_parked: bool = False
    rate_limit: int | None = None
    rate_period_ms: int | None = None


@dataclass(slots=True)
class Tally:
    """What holds a queue's slots right now: the total, per key, and the holders seen dead (whose runs are due
    and hold nothing); and ``started``, the queue's starts within its rate window (counted only under a
    ``rate_limit``)."""

    held: int = 0
    keys: Counter[str | None] = field(default_factory=Counter)
    dead: list[str] = field(default_factory=list)
    started: int = 0

    def add(self, status: str, key: str | None, holder: str | None, until: int | None, now_ms: int,
            limits: QueueLimits) -> None:
        """Count one run of the queue (``status``, ``queue_key``, its claim) if it holds a slot."""
        if status == "parked":
            holds = limits.hold_parked
        elif status == "running":
            holds = holder is not None and until is not None and until > now_ms
            if holds and holder_is_dead(holder):
                assert holder is not None
                self.dead.append(holder)
                holds = False
        else:
            holds = False
        if holds:
            self.held += 1
            self.keys[key] += 1

    def room(self, limits: QueueLimits, wanted: int) -> int:
        """How many more runs of the queue may be granted now, at most ``wanted``."""
        room = wanted
        if limits.concurrency is not None:
            room = min(room, limits.concurrency - self.held)
        if limits.worker_free is not None:
            room = min(room, limits.worker_free)
        return max(room, 0)

    def starts_left(self, limits: QueueLimits) -> int | None:
        """How many more runs may start within the rate window now (None: no rate limit)."""
        return None if limits.rate_limit is None else max(limits.rate_limit - self.started, 0)

    def full_keys(self, limits: QueueLimits) -> list[str | None]:
        """The key values at their limit (their candidates are not even read)."""
        if limits.key_limit is None:
            return []
        return [k for k, n in self.keys.items() if n >= limits.key_limit]


# A due run of one queue as a grant considers it: (run, queue_key, status, started — its started_at is set).
Candidate = tuple[str, str | None, str, bool]


def grant(candidates: Iterable[Candidate], tally: Tally, limits: QueueLimits, wanted: int) -> list[str]:
    """The runs of ``candidates`` — due runs of one queue, in :func:`queue_order` — granted under ``limits``
    given ``tally``, at most ``wanted``; ``tally`` counts them as it grants.

    A parked run of a queue that holds slots while parked already holds its slot: it is granted without spending
    the queue's budget (only the per-process one). Every other grant needs room in the queue, in its key and in
    the process; and a run never started needs room in the rate window too (a re-grant does not start it)."""
    granted: list[str] = []
    spent_here = 0
    for run, key, status, started in candidates:
        if len(granted) >= wanted:
            break
        if limits.worker_free is not None and spent_here >= limits.worker_free:
            break
        holding = limits.hold_parked and status == "parked"
        if not holding:
            if limits.concurrency is not None and tally.held >= limits.concurrency:
                continue
            if limits.key_limit is not None and tally.keys[key] >= limits.key_limit:
                continue
        if not started and limits.rate_limit is not None and tally.started >= limits.rate_limit:
            continue  # the window is full: only runs already started may go
        if not holding:
            tally.held += 1
            tally.keys[key] += 1
        if not started:
            tally.started += 1
        granted.append(run)
        spent_here += 1
    return granted


def queue_order(record: RunRecord) -> tuple[bool, int, int, str]:
    """The order a queue's due runs are granted in (proposal "Admission and dequeue", step 1) — for the memory
    store and the generic form; the SQL stores sort by its mirror, :func:`queue_order_sql`. A run due again
    after a crash — ``running``, unclaimed, no due time — comes first, as in due order: it was granted in its
    order once, and its work is under way (a priority that let newer runs overtake it could keep a started run
    from finishing for as long as they keep coming). Then ``priority`` (lower first; none is 0), then due time —
    a start's admission time, so ties are FIFO by admission — then the id (ties within one millisecond)."""
    return (record.due_at is not None, record.priority or 0, record.due_at or 0, record.run)


def queue_order_sql(dialect: Literal["sqlite", "postgres"], alias: str = "") -> str:
    """:func:`queue_order` as an ``ORDER BY`` clause (with its leading space) of a runs table — ``alias`` its
    alias in the statement, if any: the one clause by which a store's grant reads a queue's candidates
    (``sqlite_queues``, ``postgres_queues``) and its queue reads list the oldest waiting runs
    (``sqlite_queue_reads``, ``postgres_queue_reads``), so the two never disagree. ``false`` sorts before
    ``true`` in both dialects (a run without a due time first); a NULL priority reads 0; on PostgreSQL the id
    compares ``COLLATE "C"`` — byte order, as SQLite's default ``BINARY`` and Python's ``str`` compare UTF-8
    text — whatever the database's collation. (The reads' "runs ahead of a run" predicates, ``_AHEAD_*`` in the
    ``*_queue_reads`` modules, are this order written as a row comparison: a change here changes them too.)"""
    r = f"{alias}." if alias else ""
    if dialect == "sqlite":
        return f" ORDER BY {r}due_at IS NOT NULL, ifnull({r}priority, 0), {r}due_at, {r}run"
    return f' ORDER BY {r}due_at IS NOT NULL, COALESCE({r}priority, 0), {r}due_at, {r}run COLLATE "C"'


def wanted_queues(queues: Mapping[str, QueueLimits] | None) -> list[tuple[str, QueueLimits]]:
    """The queues a claim grants runs of, in name order (PostgreSQL locks them in that order)."""
    return sorted((queues or {}).items())


# How many pages of candidates one queue's grant reads at most: each grants a run or finds a key full, so a
# queue needs at most ~2 × its room; the cap only bounds a pathological sweep.
MAX_READS = 64
# A store's read of one queue's due candidates, in queue_order: ``(n, keys at their limit, parked runs only,
# started runs only, runs already read) -> [Candidate]`` — at most ``n`` rows.
CandidateRead = Callable[[int, list[str | None], bool, bool, list[str]], Sequence[Candidate]]


def fill(tally: Tally, limits: QueueLimits, wanted: int, read: CandidateRead) -> list[str]:
    """The runs of one queue to grant, at most ``wanted``: its due candidates read a page at a time, past keys at
    their limit, until the queue, the calling process or ``wanted`` has no room left — the loop every store runs
    inside its granting transaction (``tally``: what holds the queue's slots, and the starts in its rate window,
    counted in that transaction). Once the window is full, only runs already started are read."""
    chosen: list[str] = []
    seen: list[str] = []
    for _ in range(MAX_READS):
        left = wanted - len(chosen)
        room = tally.room(limits, left)
        parked_only = room <= 0 and limits.hold_parked  # (a parked run holding its slot needs no room)
        started_only = tally.starts_left(limits) == 0  # (a re-grant spends no rate budget)
        n = min(left, limits.worker_free if limits.worker_free is not None else left) if parked_only else room
        if n <= 0:
            break
        rows = read(n, tally.full_keys(limits), parked_only, started_only, seen)
        got = grant(rows, tally, limits, left)
        chosen += got
        seen += [row[0] for row in rows]
        if limits.worker_free is not None:
            limits = replace(limits, worker_free=limits.worker_free - len(got))
        if len(rows) < n:
            break
    return chosen


# What lets the grants of several queued starts share one ask (``Store.admit_granted``, issue 16): the same holder,
# lease and queues, their limits equal but for ``worker_free`` (each start's own share of the process's free
# ``workerConcurrency``, reserved before it asked: telo.kinds.slot_waits.reserve).
AskKey = tuple[str, int, tuple[tuple[str, QueueLimits], ...]]


def ask_key(holder: str, ttl_ms: int, queues: Mapping[str, QueueLimits]) -> AskKey:
    """The key under which starts' grants are asked together (see :data:`AskKey`)."""
    return holder, ttl_ms, tuple((name, replace(limits, worker_free=-1 if limits.worker_free is not None else None))
                                 for name, limits in wanted_queues(queues))


def merged_limits(asks: Sequence[Mapping[str, QueueLimits]]) -> dict[str, QueueLimits]:
    """The limits of asks of one :func:`ask_key` asked together: each queue's ``worker_free`` the sum of theirs
    (what each reserved of the process's), so the one ask grants no more than they would have one by one."""
    out: dict[str, QueueLimits] = {}
    for queues in asks:
        for name, limits in queues.items():
            had = out.get(name)
            if had is not None and had.worker_free is not None and limits.worker_free is not None:
                limits = replace(limits, worker_free=had.worker_free + limits.worker_free)
            out[name] = limits
    return out
