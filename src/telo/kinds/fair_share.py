"""Fairness across the worker processes claiming one queue (issue 16: "with 4 workers each runs 15–35 % of 400
runs"; docs/proposals/admission-control.md "Built so far"; docs/design.md "Fairness across workers on one queue").

The journal enforces a queue's limits (:mod:`telo.journal.queues`), not who gets a freed slot. Left alone, the
worker whose queued run just rested claimed the slot again at once, while the others only looked at their next
sweep: the first worker to fill a queue's slots kept most of them until the queue was empty (measured: up to
100 / 0 / 0 / 0 % of 400 runs). Temporal's matching service hands a freed task to a poller already waiting; DBOS
makes every worker wait for its next poll, which would idle a lone worker's slots. Here there is no server, so
each worker process applies four rules to its claims of a queue that has a ``concurrency``, judged from what the
journal says holds the queue's slots (``Store.runs_of_queue``, read before a claim at most every
``REREAD_S``, the process's own grants and rests counted in between):

1. **A fair share.** The queue's claimers are the processes seen holding its slots in the last ``SEEN_S`` (a
   process, not a resumer: a claim's holder text names its process). With ``n`` of them, this one included, a
   process claims up to ``ceil(concurrency / n)`` slots — ``floor`` while another claimer holds less than
   ``floor`` — so once every worker has held a slot the slots stay spread, and a worker whose run rests takes its slot
   back at once (it is under its share) without a pause.
2. **Rotation.** When a run rests here while another claimer holds less than ``max(floor, 1)`` (more claimers
   than slots, or a share not yet reached), the freed slot is *offered*: for ``OFFER_PAUSE_S`` this process
   leaves one slot of the queue's room to the others (it refills any other), and the claimer short of its share
   takes it meanwhile (rule 4).
3. **Discovery.** A worker that has never held a slot is invisible in the journal, so a freed slot is also
   offered now and then: at every rest at first, then — each offer nobody took — after a gap growing ×4 from
   ``OFFER_GAP_MIN_S`` to ``OFFER_GAP_MAX_S``; a claimer not seen before resets the gap. A lone worker holds
   one slot back for 30–50 ms about every four seconds.
4. **Looking often while short.** A process holding less than ``max(floor, 1)`` of a full queue looks again every
   ``BLOCKED_POLL_S`` (a read; it claims only when the read shows room), so it takes an offered slot within
   the pause. Shares never leave a slot idle for long: room nobody took for ``GRACE_S`` is anyone's (a worker
   capped by its ``workerConcurrency``, or gone, keeps no slot empty).

The hard limits stay the journal's; these rules only decide who asks first, from a read outside the granting
transaction (a stale read costs a claim that grants nothing, or one deferred a little, never a limit). Runs
that ``telo run`` starts wait for their slot in the starting process (``telo.kinds.queued``) and do not apply
these rules, though the slots they hold count against their process's share.
"""

from __future__ import annotations

import math
import weakref
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from telo.clock import SYSTEM_CLOCK
from telo.journal.model import RunRecord
from telo.journal.rules import claim_is_live

if TYPE_CHECKING:
    from .queue import Queue

SEEN_S: Final = 2.0  # a claimer counts this long after it was last seen holding a slot of the queue
REREAD_S: Final = 0.02  # the journal's view of the queue is read again when older than this
BLOCKED_POLL_S: Final = 0.02  # how often a process short of its share of a full queue looks again
OFFER_PAUSE_S: Final = (0.03, 0.05)  # how long an offered slot waits for another claimer (jittered; > one look)
OFFER_GAP_MIN_S: Final = 0.25  # the gap to the next discovery offer once one was not taken (×4 each time) …
OFFER_GAP_MAX_S: Final = 4.0  # … up to this
GRACE_S: Final = 0.1  # room nobody took for this long is claimed whatever the shares


def process_of(holder: str) -> str:
    """The process instance a claim's holder text names (``<name>@<host>:<pid>:<start>``): a process's resumers
    claim as one worker."""
    return holder.rpartition("@")[2]


class FairShare:
    """One process's view of one queue's claimers (the module docstring's rules); shared by its resumers."""

    def __init__(self, concurrency: int, me: str) -> None:
        self.concurrency = concurrency
        self.me = me
        self.seen: dict[str, float] = {}  # another process → when last seen holding a slot (monotonic s)
        self.held: Counter[str] = Counter()  # process → slots it holds (as read, plus this process's own since)
        self.total = 0  # slots held (parked runs of a holdSlotWhileParked queue included)
        self.read_at = -math.inf  # when the journal was last read
        self.offer_until = 0.0  # an offer is open: one slot of room is left to the others until then
        self.room_since: float | None = None  # since when room was left to others (None: none is)
        self._gap = 0.0  # the gap between discovery offers
        self._next_offer = 0.0
        self._offered: int | None = None  # what this process held after the slot it offered, until read again

    def stale(self, mono: float) -> bool:
        """Is the view due a fresh read (older than ``REREAD_S``, or an offer ended and its fate is unknown)?"""
        return mono - self.read_at >= REREAD_S or (self._offered is not None and mono >= self.offer_until)

    def observe(self, records: Iterable[RunRecord], now_ms: int, mono: float, hold_parked: bool) -> None:
        """What holds the queue now, as ``runs_of_queue`` lists it."""
        held: Counter[str] = Counter()
        total = 0
        for r in records:
            if r.status == "running" and r.claim is not None and claim_is_live(r.claim, now_ms):
                held[process_of(r.claim.holder)] += 1
                total += 1
            elif r.status == "parked" and hold_parked:
                total += 1
        others = [p for p in held if p != self.me]
        if any(p not in self.seen for p in others):
            self._gap, self._next_offer = 0.0, mono  # a claimer not seen before: offer again at the next rest
        for p in others:
            self.seen[p] = mono
        for p, at in list(self.seen.items()):
            if mono - at > SEEN_S:
                del self.seen[p]
        if self._offered is not None and mono >= self.offer_until:  # the offer's fate
            # (a taker whose run already ended reads as "not taken": the next offer then comes a little later)
            if total < self.concurrency or held[self.me] > self._offered:  # nobody took it: offer less often
                self._gap = min(max(4 * self._gap, OFFER_GAP_MIN_S), OFFER_GAP_MAX_S)
                self._next_offer = mono + self._gap
            self._offered = None
        self.held, self.total, self.read_at = held, total, mono

    def _shares(self) -> tuple[int, int]:
        n = len(self.seen) + 1
        return math.ceil(self.concurrency / n), self.concurrency // n

    def _someone_short(self, below: int) -> bool:
        return any(self.held[p] < below for p in self.seen)

    def allowance(self, mono: float) -> int:
        """How many runs of the queue this process may claim now (rules 1 and 4's grace)."""
        room = self.concurrency - self.total - (1 if mono < self.offer_until else 0)
        if room <= 0:
            self.room_since = None
            return 0
        high, low = self._shares()
        allowed = max(low if self._someone_short(low) else high, 1) - self.held[self.me]
        if allowed >= room:
            self.room_since = None
            return room
        if self.room_since is None:
            self.room_since = mono
        if mono - self.room_since >= GRACE_S:  # left for the others, and none took it
            return room
        return max(allowed, 0)

    def short(self) -> bool:
        """Is the queue full while this process holds less than the smaller share, ``max(floor, 1)``? (It looks
        again soon: rule 4. Not below the larger one: ``ceil`` and ``floor`` shares side by side are fair enough,
        and looking every 20 ms for a slot that only a rotation would free costs reads for nothing.)"""
        return self.total >= self.concurrency and self.held[self.me] < max(self._shares()[1], 1)

    def claimed(self, n: int) -> None:
        """This process was granted ``n`` runs of the queue."""
        self.held[self.me] += n
        self.total += n

    def rested(self, mono: float) -> float:
        """A run of the queue rested in this process: for how many seconds its slot is offered to the other
        claimers (rules 2 and 3: one slot of room is left to them meanwhile), 0 if it is not."""
        full = self.total >= self.concurrency
        before = self.held[self.me]
        self.held[self.me] = max(before - 1, 0)
        self.total = max(self.total - 1, 0)
        if not full or mono < self.offer_until:  # (one offer at a time)
            return 0.0
        rotate = self._someone_short(max(self._shares()[1], 1))  # rule 2: a claimer short of its share
        if not rotate and mono < self._next_offer:
            return 0.0
        low, high = OFFER_PAUSE_S
        pause = low + (high - low) * SYSTEM_CLOCK.random()  # (jitter: real randomness, through the one clock)
        self.offer_until = mono + pause
        if not rotate:  # rule 3: a discovery offer, whose fate sets the gap to the next (observe)
            self._offered = self.held[self.me]
        return pause


_SHARES: weakref.WeakKeyDictionary[Queue, FairShare] = weakref.WeakKeyDictionary()


def share_of(queue: Queue, concurrency: int, holder: str) -> FairShare:
    """This process's view of ``queue``'s claimers (one per queue, whichever of its resumers claims)."""
    found = _SHARES.get(queue)
    if found is None or found.concurrency != concurrency:
        found = _SHARES[queue] = FairShare(concurrency, process_of(holder))
    return found
