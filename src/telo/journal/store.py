"""The journal store protocol: one interface, four implementations (memory, SQLite, file, PostgreSQL).

Stores are synchronous and thread-safe; the async backend calls them from worker threads. A store never
formats a path or interprets a value: entries arrive with their value already frame text
(:mod:`telo.journal.model`), and paths are built by :mod:`telo.paths` only.

Semantics every store keeps (the conformance suite in ``tests/stores/`` checks each one):

- **admit before executing** (spec §7.1): :meth:`admit` durably records the run before anything runs; a
  second admit of the same id admits nothing and returns the existing record.
- **first writer wins** (reference §7): :meth:`append` of a path that already has an entry stores nothing
  and returns the STORED entry, so racing writers converge on one value.
- **durable on return**: when a mutating call returns, its effect survives a crash of this process (and,
  for SQLite/file/PostgreSQL with default settings, of the machine).
- ``seq`` is per run and strictly increasing in write order; :meth:`read_entries` returns one entry per
  path (the first), ordered by ``seq``.
- a run is **due** (:meth:`due_runs`) when it is not claimed by a live holder and: it is ``running``; or
  ``scheduled`` with ``due_at <= now``; or ``parked`` with ``due_at <= now`` or an entry already at its
  park path (a crash between a delivery's append and its unpark).
- :meth:`claim` is refused while another holder's claim is live; a lapsed claim, or one whose holder
  process is gone from this host (:mod:`telo.journal.claims`), is taken over. Every grant returns a fencing
  token greater than every token granted for the run before (a fresh admission claimed with its row holds 1).
- **fenced writes** (:mod:`telo.journal.claims` "Fencing"): ``append``, ``park``, ``complete`` and
  ``update_run`` take an optional ``fence``. With one, the write is applied only while the run's claim is
  still that fence's — same holder, same token, lapsed or not — checked in the same transaction (SQLite,
  PostgreSQL) or under the same lock (file, memory) as the write; otherwise nothing is written and the call
  raises ``ClaimLost`` (``ERR_DURABLE_CLAIM_LOST``). A fenced park keeps the claim (the execution releases it
  once its body has unwound); an unfenced write is an operator's and is applied whoever holds the run.

A store whose writes share durable commits also implements :class:`GroupCommitStore` (SQLite, PostgreSQL), the
operations an event loop queues for that commit without a thread per call.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from telo.journal import queue_reads
from telo.journal.chain import WriteChain
from telo.journal.claims import DEFAULT_TTL_MS, Fence
from telo.journal.model import Admission, AdmitResult, Claim, Entry, Outcome, Parked, RunFilter, RunPage, RunRecord
from telo.journal.queue_overrides import QueueOverride, unsupported
from telo.journal.queues import QueueLimits, Tally, grant, queue_order, wanted_queues

WakeCallback = Callable[[str], None]
_SCAN_ALL = 1 << 62  # due_runs' limit when every due run is a candidate


class StoreTransaction(abc.ABC):
    """An open database transaction that journal appends may join (spec §8.2).

    While it is open (``with store.transaction() as tx:``), :meth:`Store.append` calls made in the same
    context land inside it, and :meth:`Store.writes_inside` attests so for a zone carrying it. Leaving the
    block with an exception rolls back every entry appended inside.
    """

    store: Store
    connection: Any  # the driver connection holding the transaction (what a Sql.Transaction runs on)


class Store(abc.ABC):
    """A journal store. See the module docstring for the semantics every implementation keeps."""

    #: a short name for messages and ``telo runs show`` ("memory", "sqlite", "file", "postgres")
    kind: str = "abstract"
    #: the lease executions take their claims for (a journal's ``claimTtl``; telo.journal.claims)
    claim_ttl_ms: int = DEFAULT_TTL_MS
    #: every call returns without I/O or a wait for a lock held across one (the memory store): an event loop
    #: may make it on its own thread rather than hand it to a worker thread
    inline_calls: bool = False
    #: :meth:`read_run` is one keyed read that never waits for a writer (SQLite's WAL readers): cheaper made on
    #: an event loop's thread than the two thread hand-offs of a worker thread (benchmarks/durable.py)
    inline_reads: bool = False
    #: how values are written (telo.journal.compat: "typed" | "legacy"); None: the process's TELO_JOURNAL_COMPAT
    journal_compat: str | None = None

    # --- runs -------------------------------------------------------------------------------------------

    @abc.abstractmethod
    def admit(self, admission: Admission) -> AdmitResult:
        """Record a run before it executes; an existing run is returned unchanged with ``admitted=False``. An
        admission with a queue's key (``Admission.keyed``, issue 16 step 4) is decided by the rule of
        :mod:`telo.journal.keyed` in one transaction: it may answer with a live run of its key instead."""

    @abc.abstractmethod
    def read_run(self, run: str) -> RunRecord | None: ...

    @abc.abstractmethod
    def complete(self, run: str, outcome: Outcome, *, fence: Fence | None = None) -> RunRecord:
        """Settle a run: status, result/error and counts; clears the park, ``due_at`` and the claim."""

    @abc.abstractmethod
    def park(self, run: str, parked: Parked, *, fence: Fence | None = None) -> RunRecord:
        """Status ``parked`` with ``parked`` and ``due_at = parked.at``; releases the claim — unless
        ``fence``: then the claim stays the execution's until it releases it."""

    @abc.abstractmethod
    def unpark(self, run: str) -> bool:
        """A parked run becomes ``running`` again (park and ``due_at`` cleared); False if it was not parked."""

    @abc.abstractmethod
    def update_run(self, run: str, *, fence: Fence | None = None, **fields: Any) -> RunRecord:
        """Set record fields by their RunRecord names (``status``, ``due_at``, ``manifest_digest``, ...; not
        ``claim`` or ``fence``, which only claims change). For lifecycle changes the dedicated calls are
        preferred; this one serves operator overrides (resume after a manifest change, restore) and the digest
        bookkeeping."""

    @abc.abstractmethod
    def run_parked_on(self, token: str) -> RunRecord | None:
        """The run parked (status ``parked``) with this wake token, if any."""

    @abc.abstractmethod
    def due_runs(self, now_ms: int, limit: int) -> list[str]:
        """Runs due at ``now_ms`` and not claimed by a live holder, oldest due first."""

    @abc.abstractmethod
    def list_runs(self, flt: RunFilter) -> RunPage:
        """Runs newest first (by ``created_at`` then id), filtered and paged for the CLI."""

    # --- claims -----------------------------------------------------------------------------------------

    @abc.abstractmethod
    def claim(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> int | None:
        """Take the claim on a run until ``now_ms + ttl_ms``; returns its new fencing token (>= 1).

        Granted when the run has no claim, the claim lapsed, or its holder's process is gone from this host.
        Every grant bumps the run's token, so an earlier execution holding the old one is fenced out. Refused
        (None) while a live claim runs — another holder's, or ``holder``'s own (one holder is one process, whose
        executions must not overlap; an execution extends its claim with :meth:`renew`) — and for an unknown
        run.
        """

    def claim_due(self, holder: str, ttl_ms: int, now_ms: int, limit: int, *, only: Sequence[str] | None = None,
                  workflows: Sequence[str] | None = None, skip: Collection[str] = (),
                  queues: Mapping[str, QueueLimits] | None = None) -> list[RunRecord]:
        """Dequeue up to ``limit`` runs due at ``now_ms`` (:meth:`due_runs`' rule, in its order) for ``holder``:
        each is claimed until ``now_ms + ttl_ms`` under a new fencing token and set ``running`` (a scheduled run
        starts, a due park is lifted: ``parked`` and ``due_at`` cleared). Returns the record of each, as written.

        Fair claiming: a worker asks for what it can execute now and leaves the other due runs to other
        workers. Of concurrent callers no two are granted one run, and — on the SQL stores, where the runs are
        picked, claimed and started by one statement in one transaction (PostgreSQL: ``FOR UPDATE SKIP LOCKED``)
        — none waits for another. Filters: ``only`` these runs (a wake-up names its run); runs of ``workflows``
        or of no recorded workflow; never the runs in ``skip`` (ones this process cannot read).

        Queued runs (issue 16, :mod:`telo.journal.queues`): a run with a ``queue`` is granted only when
        ``queues`` names its queue, and only while the queue's limits leave room, counted inside the granting
        transaction (or lock); a caller that knows no queue's limits never starts a queued run. The unqueued
        due runs are granted first, then each queue's in name order, each from its own candidates, so a queue
        at its limit keeps nothing else from being claimed. A queue's runs are granted in
        :func:`telo.journal.queues.queue_order` (priority, then admission); a queued run's first grant records
        ``started_at`` — ``now_ms`` here and on SQLite, the database's clock on PostgreSQL — which a ``rateLimit``
        counts.

        This generic form lists due runs and claims and starts them one by one (the memory and file journals).
        """
        granted: list[RunRecord] = []
        wanted = None if workflows is None else set(workflows)
        due: list[RunRecord] = []
        for run in self.due_runs(now_ms, _SCAN_ALL):
            if run in skip or (only is not None and run not in only):
                continue
            record = self.read_run(run)
            if record is None or (wanted is not None and record.workflow is not None
                                  and record.workflow not in wanted):
                continue
            due.append(record)

        def start(run: str, first: bool = False) -> None:
            token = self.claim(run, holder, ttl_ms, now_ms)
            if token is not None:
                extra = {"started_at": now_ms} if first else {}  # (a queued run's start: never moved again)
                granted.append(self.update_run(run, fence=Fence(holder, token), status="running", parked=None,
                                               due_at=None, **extra))

        for record in due:
            if len(granted) >= limit:
                return granted
            if record.queue is None:
                start(record.run)
        for name, limits in wanted_queues(queues):
            if len(granted) >= limit:
                break
            tally = Tally()
            for other in self.runs_of_queue(name):
                claim = other.claim
                tally.add(other.status, other.queue_key, claim.holder if claim else None,
                          claim.until if claim else None, now_ms, limits)
            if limits.rate_limit is not None and limits.rate_period_ms is not None:
                tally.started = self._starts_since(name, now_ms - limits.rate_period_ms)
            mine = {r.run: r for r in sorted((r for r in due if r.queue == name), key=queue_order)}
            candidates = [(r.run, r.queue_key, r.status, r.started_at is not None) for r in mine.values()]
            for run in grant(candidates, tally, limits, limit - len(granted)):
                start(run, first=mine[run].started_at is None)
        return granted

    def admit_granted(self, admission: Admission, holder: str, ttl_ms: int, now_ms: int,
                      queues: Mapping[str, QueueLimits]) -> tuple[AdmitResult, RunRecord | None]:
        """:meth:`admit`, then :meth:`claim_due` ``(only=[run])`` in one operation (issue 16; generic: the two)."""
        admitted, only = self.admit(admission), [admission.run] if admission.queue is not None else []
        got = self.claim_due(holder, ttl_ms, now_ms, 1, only=only, queues=queues) if admitted.admitted else []
        return admitted, got[0] if got else None

    def _starts_since(self, queue: str, since_ms: int) -> int:
        """How many runs of ``queue`` started after ``since_ms`` (its rate window; the generic form reads every
        run — the memory store overrides it, the SQL stores count in their granting transaction)."""
        return sum(1 for r in self.iter_all_runs()
                   if r.queue == queue and r.started_at is not None and r.started_at > since_ms)

    def runs_of_queue(self, queue: str) -> list[RunRecord]:
        """The ``running`` and ``parked`` runs of ``queue``: those that may hold its slots (``telo status`` counts
        them; the generic form reads every run, the SQL stores use their ``queue`` index)."""
        return [r for r in self.iter_all_runs() if r.queue == queue and r.status in ("running", "parked")]

    def queue_snapshot(self, queue: str, now_ms: int, *, ahead_of: RunRecord | None = None, oldest: int = 0,
                       rate: tuple[int, int] | None = None) -> queue_reads.QueueSnapshot:
        """What ``queue`` holds and what waits in it at ``now_ms``, in one read (:mod:`telo.journal.queue_reads`):
        its live runs counted by state and key; given ``ahead_of`` (a run of it), those before that run in grant
        order; the ``oldest`` runs waiting for a slot; given ``rate`` (limit, period ms), its starts in the
        window. The generic form reads every run; the SQL stores read the queue's indexes."""
        return queue_reads.snapshot(self.iter_all_runs(), queue, now_ms, ahead_of=ahead_of, oldest=oldest, rate=rate)

    def queue_names(self) -> list[str]:
        """The queues with runs in this journal, whatever their status, sorted (the dashboard's queue list)."""
        return queue_reads.names(self.iter_all_runs())

    def queue_overrides(self) -> Mapping[str, QueueOverride]:
        """The queue limits ``telo queues set`` overrides, by queue (issue 16, :mod:`telo.journal.queue_overrides`);
        this default keeps none (the file journal, which refuses queues)."""
        return {}

    def set_queue_override(self, override: QueueOverride) -> QueueOverride:
        """Upsert ``override``'s row — the limits it names replace the stored ones, the others stay — and return
        the row as stored."""
        raise unsupported(self.kind)

    def clear_queue_override(self, queue: str) -> QueueOverride | None:
        """Drop ``queue``'s override (its manifest's limits hold again); the row dropped, None if there was none."""
        raise unsupported(self.kind)

    @abc.abstractmethod
    def renew(self, run: str, fence: Fence, ttl_ms: int, now_ms: int) -> bool:
        """Extend the claim to ``now_ms + ttl_ms`` if it is still ``fence``'s (lapsed or not: the token proves
        nobody was granted the run since); False, changing nothing, if it is not."""

    def renew_many(self, claims: Sequence[tuple[str, Fence, int]]) -> list[bool]:
        """:meth:`renew` for each ``(run, fence, until_ms)`` — the claim extended to ``until_ms`` — in one
        transaction where the store has them (SQLite, PostgreSQL); one bool per claim, in order."""
        return [self._renew_until(run, fence, until) for run, fence, until in claims]

    def _renew_until(self, run: str, fence: Fence, until_ms: int) -> bool:
        # renew() takes a lease and a time; a claim's end is all it computes from them
        return self.renew(run, fence, until_ms, 0)

    @abc.abstractmethod
    def release(self, run: str, holder: str, token: int | None = None) -> None:
        """Drop the claim if ``holder`` holds it (and, given ``token``, under that token)."""

    # --- entries ----------------------------------------------------------------------------------------

    @abc.abstractmethod
    def append(self, run: str, entry: Entry, *, fence: Fence | None = None) -> Entry:
        """Append unless the path already has an entry; return the STORED entry (with its ``seq``)."""

    def append_in_order(self, run: str, entry: Entry) -> Entry:
        """:meth:`append` (unfenced), visible in ``seq`` order among the run's other such entries: no reader sees
        one while one with a lower ``seq`` is still to commit (messages into a run, telo.durable.messages).
        SQLite, file and memory number and commit one writer at a time; PostgreSQL serializes these per run."""
        return self.append(run, entry)

    def read_entries_in_order(self, run: str) -> list[Entry]:
        """:meth:`read_entries` once every :meth:`append_in_order` to the run begun before it has ended (a
        receive's look after its park must see a message whose sender found the run not parked yet)."""
        return self.read_entries(run)

    @abc.abstractmethod
    def deliver(self, token: str, value: str | None, v: int | None) -> str | None:
        """Deliver to the run parked on ``token`` (reference §6 "Local.Deliver"), atomically: store a step
        entry (no target) of ``value`` under codec ``v`` at its park path and unpark it — only if the run is
        parked on ``token`` and nothing is stored at that path yet. Returns the run delivered to, or None
        when nothing was (no such park, or another delivery got there first): of N racing deliveries to a
        token, exactly one gets a run back, and its payload is the one stored."""

    @abc.abstractmethod
    def read_entries(self, run: str) -> list[Entry]:
        """The run's entries in write order, the first entry per path only."""

    def journal_mark(self, run: str) -> tuple[int, int]:
        """How many entries the run's log holds, and its highest ``seq``: a mark that moves whenever the log
        changes (an append raises the seq; compaction and restore append before they truncate), read without
        decoding the log — the console polls it once a second for each open run page (telo.server.live). This
        default reads the entries; the SQL stores ask the database."""
        entries = self.read_entries(run)
        return len(entries), max((e.seq or 0 for e in entries), default=0)

    @abc.abstractmethod
    def truncate_before(self, run: str, seq: int) -> int:
        """Delete the run's entries with ``seq`` below ``seq`` (compaction); returns how many."""

    # --- transactions, wake-ups, lifecycle -------------------------------------------------------------

    def transaction(self) -> AbstractContextManager[StoreTransaction]:
        """Open a transaction appends can join. Stores without transactions refuse."""
        raise NotImplementedError(f"the {self.kind} journal has no transactions to join")

    def writes_inside(self, zone: Any) -> bool:
        """Spec §8.2: True exactly when this store's appends land inside ``zone``'s open transaction.

        ``zone`` carries the transaction as its ``transaction`` attribute (or is one).
        """
        tx = getattr(zone, "transaction", zone)
        return isinstance(tx, StoreTransaction) and tx.store is self and self._transaction_open(tx)

    def _transaction_open(self, tx: StoreTransaction) -> bool:
        return False

    def subscribe_wake(self, callback: WakeCallback) -> Callable[[], None] | None:
        """Call ``callback(run)`` when a run becomes due elsewhere (PostgreSQL NOTIFY); None if unsupported."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and threads."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def iter_all_runs(self, page_size: int = 500) -> Iterator[RunRecord]:
        """Every run, newest first (built on :meth:`list_runs`)."""
        after: str | None = None
        while True:
            page = self.list_runs(RunFilter(limit=page_size, after=after))
            yield from page.runs
            if page.next is None:
                return
            after = page.next


@runtime_checkable
class GroupCommitStore(Protocol):
    """A store's writes queued from an event loop for its group commit (the writer thread of the SQLite and
    PostgreSQL journals, :mod:`telo.journal.group_commit`).

    What the async runner (:class:`telo.durable.aio.AsyncStore`) uses, when a store declares it, instead of
    handing the blocking :class:`Store` calls to worker threads: with a hundred runs in flight, a thread per
    write capped how many writes one commit could take, and every hand-off cost CPU a step could not spare
    (benchmarks/durable.py). A store implementing it is also a :class:`Store`. Every method is called on the
    event loop's thread and returns at once; the rules:

    - **the blocking call's semantics**: each ``*_async`` operation, and :meth:`submit_deferred`, does what the
      :class:`Store` method of the same name does (an append what :meth:`Store.append` does) — first writer
      wins, fencing, ``ERR_DURABLE_RUN_NOT_FOUND`` — and its future gets the result that call would return,
      or the error it would raise. The operation's own error goes to its own future; the rest of its batch
      commits.
    - **durable on settle**, not on return: the future (an asyncio future of the calling loop) settles, on
      that loop, only once the commit holding the operation returned — on the loop's next iteration, even when
      the caller committed the queue itself (:meth:`commit_queued`): that iteration lets other bodies about to
      start queue their writes for the next commit, so runs in flight keep sharing commits. A future cancelled
      before its batch runs withdraws its write (an abandoned await); once the batch runs, the write stands
      whoever waits.
    - **FIFO**: operations commit in the order they were queued (a run's admission before its appends
      before its completion); a batch may reorder only operations of different runs.
    - **chains** (:mod:`telo.journal.chain`): a write given an execution's ``chain`` is refused
      (``ChainBroken``), not committed, once an earlier write of that chain failed or lost its race; one that
      fails, or whose append finds another value stored at its path, breaks the chain. A chained park or
      completion is fenced by the chain's fence.
    - **ambient transactions** (spec §8.2): an append in a context where this store's transaction is open
      joins it at once — its future is already settled on return, and the entry is durable with that
      transaction; a lifecycle write there raises ``ERR_JOURNAL_IN_TRANSACTION`` at once, as its blocking
      twin does.
    """

    def submit_append_async(self, run: str, entry: Entry, *, fence: Fence | None = None) -> asyncio.Future[Entry]:
        """:meth:`Store.append`, queued: the future settles with the STORED entry."""

    def submit_deferred(self, run: str, entry: Entry, chain: WriteChain) -> asyncio.Future[Entry]:
        """An append of ``chain``'s execution, fenced by the chain's fence: refused over a broken chain, and
        breaking it should it fail or find another value stored at its path (the future then raises)."""

    def admit_async(self, admission: Admission, *, claim: Claim | None = None) -> asyncio.Future[AdmitResult]:
        """:meth:`Store.admit`; ``claim``: the new run's first claim, written with its row under fencing token 1
        (a run started by this process is executed by it). A run that exists already keeps its claim."""

    def claim_async(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> asyncio.Future[int | None]:
        """:meth:`Store.claim`: the new fencing token, or None if refused."""

    def park_async(self, run: str, parked: Parked, *, chain: WriteChain | None = None,
                   fence: Fence | None = None) -> asyncio.Future[RunRecord]:
        """:meth:`Store.park`, after ``chain``'s writes (and fenced by its fence) when given one."""

    def unpark_async(self, run: str) -> asyncio.Future[bool]:
        """:meth:`Store.unpark`."""

    def complete_async(self, run: str, outcome: Outcome, *, chain: WriteChain | None = None,
                       fence: Fence | None = None) -> asyncio.Future[RunRecord]:
        """:meth:`Store.complete`; given ``chain``, it commits only if every earlier write of the chain did —
        queued behind them, it needs no wait for them first."""

    def update_run_async(self, run: str, *, fence: Fence | None = None, **fields: Any) -> asyncio.Future[RunRecord]:
        """:meth:`Store.update_run`."""

    def claim_due_async(self, holder: str, ttl_ms: int, now_ms: int, limit: int, *,
                        only: Sequence[str] | None = None, workflows: Sequence[str] | None = None,
                        skip: Collection[str] = (),
                        queues: Mapping[str, QueueLimits] | None = None) -> asyncio.Future[list[RunRecord]]:
        """:meth:`Store.claim_due`."""

    def admit_granted_async(self, admission: Admission, holder: str, ttl_ms: int, now_ms: int, queues: Mapping[
        str, QueueLimits], *, decided: asyncio.Future[Any] | None = None) -> asyncio.Future[tuple[AdmitResult, Any]]:
        """:meth:`Store.admit_granted`; ``decided`` settled when decided, before the commit (SQLite)."""

    def read_run_async(self, run: str) -> asyncio.Future[RunRecord | None]:
        """:meth:`Store.read_run`, as of the last commit. The reads asked in one loop iteration may share one
        query (a worker continuing a hundred runs reads their records at once)."""

    def status_async(self, run: str) -> asyncio.Future[str | None]:
        """The run's status, None for an unknown run (a cancel check), as of the last commit. The asks of one
        loop iteration may share one read; inside an ambient transaction it is read at once."""

    def commit_queued(self) -> bool:
        """Commit what is queued now, on the calling thread, if the store's writer is not at it — for a caller
        about to wait for those writes with nothing else to run meanwhile. False (nothing done) if it is busy;
        either way the order of the commits stays FIFO."""
