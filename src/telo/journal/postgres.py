"""The PostgreSQL journal store (reference §7 "Postgres journal"; spec §8.2 for ``writes_inside``).

Format-compatible with the upstream ``DurableJournalPostgres.Journal``: the same two tables (see
:mod:`telo.journal.postgres_schema`), values stored as frame text beside ``codec_version`` (a NULL codec
version is a legacy row holding plain JSON with ``{"$bigint": "…"}``), and the same conditional statements
for first-writer-wins appends, claims and due runs, so telo and upstream processes can share one journal.

Connections (docs/design.md "PostgreSQL connections"): each store holds ONE writer connection, a pool of at
most ``pool_size`` connections for reads, sweeps, renewals and joinable transactions, and — while anything
listens for wake-ups — one LISTEN connection.

- **Writes** go through one writer thread per store that commits whatever is queued in one transaction
  (:mod:`telo.journal.group_commit`, :mod:`telo.journal.postgres_writer`): the appends, admissions,
  completions, parks, claims and unparks of every run in flight share one commit and, kind by kind, one
  ``unnest`` statement. So the store is a :class:`~telo.journal.store.GroupCommitStore`: an event loop queues
  its writes without a thread each, and an execution's entries may be deferred to the group commit with the
  barriers of docs/guarantees.md, as on SQLite.
- **Transactions** (reference §7 "Transactions"): lifecycle writes never join an ambient transaction — they
  describe the run rather than its work and must not vanish with a rolled-back body. Appends and reads join
  the transaction opened by :meth:`PostgresStore.transaction` when one is ambient in the calling context, so
  a ``Sql.Transaction`` body on that connection is journaled per step and a rollback discards its entries with
  its effects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from telo.clock import SYSTEM_CLOCK, Clock
from telo.errors import Code, JournalError
from telo.journal import cancels, keyed
from telo.journal import postgres_ops as ops
from telo.journal.chain import WriteChain
from telo.journal.claims import Fence
from telo.journal.columns import TargetTexts
from telo.journal.columns import json_text as dump
from telo.journal.group_commit import GroupCommitWriter, WriterStats
from telo.journal.model import Admission, AdmitResult, Claim, Entry, Outcome, Parked, RunRecord
from telo.journal.postgres_groups import append_group
from telo.journal.postgres_keyed import admit_keyed
from telo.journal.postgres_queue_overrides import PgQueueOverrides
from telo.journal.postgres_queues import StartAsks, admit_and_grant, claim_queued
from telo.journal.postgres_reads import LoopReads, PgReads
from telo.journal.postgres_rows import db_errors
from telo.journal.postgres_schema import ensure_schema, missing_columns, names_for
from telo.journal.postgres_session import CONNECT_OPTIONS, configure
from telo.journal.postgres_sql import PgSql
from telo.journal.postgres_tx import ambient_of, joined, open_transaction
from telo.journal.postgres_wake import WakeHub
from telo.journal.postgres_writer import PgBatches
from telo.journal.queues import QueueLimits
from telo.journal.store import GroupCommitStore, Store, StoreTransaction, WakeCallback

T = TypeVar("T")
V = TypeVar("V")

DEFAULT_POOL_SIZE = 4


class PostgresStore(PgReads, PgQueueOverrides, Store, GroupCommitStore):
    """A journal in two PostgreSQL tables named by ``table`` (reference §7; upstream default prefix)."""

    kind = "postgres"

    def __init__(
        self,
        url: str,
        *,
        table: str = "telo_durable",
        create_table: bool = True,
        notify_channel: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        self._names = names = names_for(table, notify_channel)
        self._url = url
        self._clock = clock
        # A plain connection first: an unreachable server fails here at once, not after a pool timeout.
        with db_errors("open the journal"), psycopg.connect(url, autocommit=True, **CONNECT_OPTIONS) as conn:
            if create_table:
                ensure_schema(conn, names)
            else:
                gaps = missing_columns(conn, names)
                if gaps:
                    raise JournalError(
                        Code.JOURNAL_SCHEMA_MISSING,
                        f"the PostgreSQL journal tables lack columns telo needs: {gaps}",
                        hint="open the journal once with create_table=True (it creates or extends the "
                        "tables), or run that DDL yourself",
                        data={"missing": gaps},
                    )
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(pool_size, 1),
            kwargs={"autocommit": True, **CONNECT_OPTIONS},
            # A connection the server dropped while idle is replaced on checkout instead of failing a write.
            check=ConnectionPool.check_connection,
            configure=configure,  # transactions left idle end (telo.journal.postgres_session)
            name=f"telo-{names.prefix}",
            num_workers=1,
            open=True,
        )
        self._q = PgSql.for_names(names)
        self._targets = TargetTexts()
        groups = ((ops.PgAdmit, ops.admit_group), (ops.PgAppend, append_group), (ops.PgComplete, ops.complete_group))
        self._writer = GroupCommitWriter(PgBatches(self._writer_connection, groups), f"telo-pg-writer:{names.prefix}")
        self._wake = WakeHub(url, names.channel)
        self._records: LoopReads[RunRecord] = LoopReads(self.read_runs)
        self._statuses: LoopReads[str] = LoopReads(self.read_statuses)
        self._starts = StartAsks(self._admit_and_grant)

    def _writer_connection(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self._url, autocommit=True, **CONNECT_OPTIONS)
        configure(conn)
        return conn

    @property
    def stats(self) -> WriterStats:
        """Group-commit counters: ``commits`` (of which ``inline_commits``), ``ops``, ``max_batch``,
        ``failed_ops``, ``failed_batches``."""
        return self._writer.stats

    # --- plumbing: where a call runs ---------------------------------------------------------------------

    @contextmanager
    def _conn(self, *, join: bool) -> Iterator[psycopg.Connection[Any]]:
        """The ambient transaction's connection when ``join`` and one is open, else a pooled autocommit one."""
        tx = ambient_of(self) if join else None
        if tx is not None:
            yield tx.connection
            return
        with self._pool.connection() as conn:
            yield conn

    def _write(self, what: str, fn: Callable[[psycopg.Connection[Any]], T], *, isolated: bool = False) -> T:
        """A write through the group commit (blocking until its batch committed)."""
        with db_errors(what):
            return self._writer.call(fn, isolated=isolated)

    def _entry_write(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """An entry write: joins the ambient transaction if there is one, else goes to the group commit."""
        tx = ambient_of(self)
        if tx is None:
            return self._write("append a journal entry", fn)
        with db_errors("append a journal entry"):
            return fn(tx.connection)

    def _queued(self, fn: Callable[[psycopg.Connection[Any]], T]) -> asyncio.Future[T]:
        """A write queued for the group commit by a caller on an event loop (on its thread)."""
        return self._writer.submit_async(fn, isolated=False)

    # --- runs -------------------------------------------------------------------------------------------

    def admit(self, admission: Admission, *, claim: Claim | None = None) -> AdmitResult:
        """``claim``: the new run's first claim, written with its row (a run started by this process is
        executed by it). A run that already exists keeps its claim, whatever it is."""
        if admission.keyed:  # its own transaction under its key's lock (issue 16 step 4, postgres_keyed)
            return self._admit_keyed(admission)
        return self._write("admit a run", ops.PgAdmit(self._q, admission, self._clock.now_ms(), claim))

    def admit_async(self, admission: Admission, *, claim: Claim | None = None) -> asyncio.Future[AdmitResult]:
        if admission.keyed:  # (blocking: a pooled connection's transaction, on a worker thread)
            return asyncio.ensure_future(asyncio.to_thread(self._admit_keyed, admission))
        return self._queued(ops.PgAdmit(self._q, admission, self._clock.now_ms(), claim))

    def admit_granted(self, admission: Admission, holder: str, ttl_ms: int, now_ms: int,
                      queues: Mapping[str, QueueLimits]) -> tuple[AdmitResult, RunRecord | None]:
        """Admitted and granted in one transaction under the queue's lock (``postgres_queues.admit_and_grant``)."""
        if admission.keyed:
            return super().admit_granted(admission, holder, ttl_ms, now_ms, queues)
        ok, value = self._admit_and_grant([self._admit_op(admission)], holder, ttl_ms, now_ms, queues)[0]
        if not ok:
            raise value
        result: tuple[AdmitResult, RunRecord | None] = value
        return result

    def admit_granted_async(self, admission: Admission, holder: str, ttl_ms: int, now_ms: int,
                            queues: Mapping[str, QueueLimits], *,
                            decided: asyncio.Future[tuple[AdmitResult, RunRecord | None]] | None = None
                            ) -> asyncio.Future[tuple[AdmitResult, RunRecord | None]]:
        """With the other starts of this loop iteration, in one transaction (``postgres_queues.StartAsks``);
        committed when decided (``decided`` is left alone)."""
        assert not admission.keyed, "a keyed admission is decided alone (admit_async)"
        return self._starts.ask(self._admit_op(admission), holder, ttl_ms, now_ms, queues)

    def _admit_op(self, admission: Admission) -> ops.PgAdmit:
        return ops.PgAdmit(self._q, admission, self._clock.now_ms())

    def _admit_and_grant(self, admissions: list[ops.PgAdmit], holder: str, ttl_ms: int, now_ms: int,
                         queues: Mapping[str, QueueLimits]) -> list[tuple[bool, Any]]:
        with db_errors("admit and grant queued runs"):
            return admit_and_grant(self._pool.connection, self._q, admissions, holder, ttl_ms, now_ms, queues)

    def _admit_keyed(self, admission: Admission) -> AdmitResult:
        with db_errors("admit a run"):
            return keyed.noticed(admit_keyed(self._pool.connection, self._q, admission, self._clock.now_ms()))

    def _complete_op(self, run: str, o: Outcome, chain: WriteChain | None, fence: Fence | None) -> ops.PgComplete:
        row = (run, o.status, o.result, o.result_v, dump(dict(o.error)) if o.error else None, o.collapsed_regions,
               dump(list(o.collapse_reasons)), o.replayed_steps, self._clock.now_ms())
        return ops.PgComplete(self._q, run, row, chain, fence)

    def complete(self, run: str, outcome: Outcome, *, chain: WriteChain | None = None,
                 fence: Fence | None = None) -> RunRecord:
        record = self._write("settle a run", self._complete_op(run, outcome, chain, fence))
        if outcome.status == "cancelled":
            cancels.notice()
        return record

    def complete_async(self, run: str, outcome: Outcome, *, chain: WriteChain | None = None,
                       fence: Fence | None = None) -> asyncio.Future[RunRecord]:
        future = self._queued(self._complete_op(run, outcome, chain, fence))
        if outcome.status == "cancelled":
            cancels.notice(future)
        return future

    def park(self, run: str, parked: Parked, *, chain: WriteChain | None = None,
             fence: Fence | None = None) -> RunRecord:
        return self._write("park a run", ops.park(self._q, run, parked, self._clock.now_ms(), chain, fence))

    def park_async(self, run: str, parked: Parked, *, chain: WriteChain | None = None,
                   fence: Fence | None = None) -> asyncio.Future[RunRecord]:
        return self._queued(ops.park(self._q, run, parked, self._clock.now_ms(), chain, fence))

    def unpark(self, run: str) -> bool:
        return self._write("unpark a run", ops.unpark(self._q, run, self._clock.now_ms()))

    def unpark_async(self, run: str) -> asyncio.Future[bool]:
        return self._queued(ops.unpark(self._q, run, self._clock.now_ms()))

    def update_run(self, run: str, *, fence: Fence | None = None, **changes: Any) -> RunRecord:
        op = ops.record_update(self._q, run, changes, self._clock.now_ms(), fence)
        return self._write("update a run", op)

    def update_run_async(self, run: str, *, fence: Fence | None = None, **changes: Any) -> asyncio.Future[RunRecord]:
        return self._queued(ops.record_update(self._q, run, changes, self._clock.now_ms(), fence))

    # --- claims -----------------------------------------------------------------------------------------

    def claim(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> int | None:
        return self._write("claim a run", ops.claim(self._q, run, holder, ttl_ms, now_ms))

    def claim_async(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> asyncio.Future[int | None]:
        return self._queued(ops.claim(self._q, run, holder, ttl_ms, now_ms))

    def claim_due(self, holder: str, ttl_ms: int, now_ms: int, limit: int, *, only: Sequence[str] | None = None,
                  workflows: Sequence[str] | None = None, skip: Collection[str] = (),
                  queues: Mapping[str, QueueLimits] | None = None) -> list[RunRecord]:
        """Picked, granted and started by one statement, ``FOR UPDATE SKIP LOCKED`` (``postgres_ops.claim_due``);
        then queued runs, each queue in a transaction under its advisory lock (``postgres_queues``)."""
        if limit <= 0:
            return []
        op = ops.claim_due(self._q, holder, ttl_ms, now_ms, limit, only=only, workflows=workflows, skip=skip)
        granted = self._write("claim due runs", op)
        if queues and len(granted) < limit:
            granted += self._claim_queued(holder, ttl_ms, now_ms, limit - len(granted), only, workflows, skip,
                                          queues)
        return granted

    def claim_due_async(self, holder: str, ttl_ms: int, now_ms: int, limit: int, *,
                        only: Sequence[str] | None = None, workflows: Sequence[str] | None = None,
                        skip: Collection[str] = (),
                        queues: Mapping[str, QueueLimits] | None = None) -> asyncio.Future[list[RunRecord]]:
        op = ops.claim_due(self._q, holder, ttl_ms, now_ms, max(limit, 0), only=only, workflows=workflows, skip=skip)
        unqueued = self._queued(op)
        if not queues:
            return unqueued

        async def then_queued() -> list[RunRecord]:
            granted = await unqueued
            if len(granted) < limit:  # (blocking: a pooled connection's transaction, on a worker thread)
                granted += await asyncio.to_thread(self._claim_queued, holder, ttl_ms, now_ms, limit - len(granted),
                                                   only, workflows, skip, queues)
            return granted

        return asyncio.ensure_future(then_queued())

    def _claim_queued(self, holder: str, ttl_ms: int, now_ms: int, wanted: int, only: Sequence[str] | None,
                      workflows: Sequence[str] | None, skip: Collection[str],
                      queues: Mapping[str, QueueLimits]) -> list[RunRecord]:
        with db_errors("claim queued runs"):
            return claim_queued(self._pool.connection, self._q, holder, ttl_ms, now_ms, wanted, only=only,
                                workflows=workflows, skip=skip, queues=queues)

    def renew(self, run: str, fence: Fence, ttl_ms: int, now_ms: int) -> bool:
        # On a pooled connection, not through the writer: a renewal may wait for the row lock of a joinable
        # transaction of this very process (a Sql.Transaction journaling into the run), and the writer's
        # transaction, which carries every run's writes, must not wait with it.
        with db_errors("renew a claim"), self._pool.connection() as conn:
            return conn.execute(self._q.renew, (now_ms + ttl_ms, run, fence.holder, fence.token)).rowcount > 0

    def renew_many(self, claims: Sequence[tuple[str, Fence, int]]) -> list[bool]:
        """One statement for them all (on the pool, as :meth:`renew`), passing over rows another transaction has
        locked (``SKIP LOCKED``): those few are renewed one by one after it, waiting for their lock."""
        if not claims:
            return []
        columns = [[run for run, _, _ in claims], [f.holder for _, f, _ in claims], [f.token for _, f, _ in claims],
                   [until for _, _, until in claims]]
        with db_errors("renew claims"), self._pool.connection() as conn:
            renewed = {str(run) for (run,) in conn.execute(self._q.renew_many, columns).fetchall()}
        return [run in renewed or self.renew(run, fence, until, 0) for run, fence, until in claims]

    def release(self, run: str, holder: str, token: int | None = None) -> None:
        self._write("release a claim", ops.release(self._q, run, holder, token))

    def deliver(self, token: str, value: str | None, v: int | None) -> str | None:
        """One transaction (a SAVEPOINT of a batch): the parked run's row locked, the entry stored at its park
        path unless one is there, the run unparked, a wake-up sent."""
        op = ops.deliver(self._q, token, value, v, self._clock.now_ms())
        return self._write("deliver to a parked run", op, isolated=True)

    # --- entries ----------------------------------------------------------------------------------------

    def _append_op(self, run: str, entry: Entry, chain: WriteChain | None = None, *,
                   fence: Fence | None = None) -> ops.PgAppend:
        # Stamped as the store receives it (Entry.at), unless it carries its time (a fork's copy): one clock read
        # per append, no statement or round trip more.
        at = entry.at if entry.at is not None else self._clock.now_ms()
        return ops.PgAppend(self._q, run, entry, self._targets.text(entry.target), at, chain, fence)

    def append(self, run: str, entry: Entry, *, fence: Fence | None = None) -> Entry:
        return self._entry_write(self._append_op(run, entry, fence=fence))

    def append_in_order(self, run: str, entry: Entry) -> Entry:
        """In a transaction of its own (or the ambient one) that first takes a per-run advisory lock: the next
        such append to the run waits for this one to commit before its INSERT draws a seq (Store.append_in_order).
        Never in the writer's batch, whose other runs' locks could then be taken in two orders."""
        op = self._append_op(run, entry)
        tx = ambient_of(self)
        with db_errors("append a journal entry"):
            if tx is not None:
                tx.connection.execute(self._q.lock_appends, (f"{self._q.channel}:{run}",))
                return op(tx.connection)
            with self._pool.connection() as conn, conn.transaction():
                conn.execute(self._q.lock_appends, (f"{self._q.channel}:{run}",))
                return op(conn)

    def submit_append_async(self, run: str, entry: Entry, *, fence: Fence | None = None) -> asyncio.Future[Entry]:
        return self._submit_async(self._append_op(run, entry, fence=fence))

    def submit_deferred(self, run: str, entry: Entry, chain: WriteChain) -> asyncio.Future[Entry]:
        return self._submit_async(self._append_op(run, entry, chain))

    def _submit_async(self, op: ops.PgAppend) -> asyncio.Future[Entry]:
        tx = ambient_of(self)
        if tx is None:
            return self._queued(op)
        done: asyncio.Future[Entry] = asyncio.get_running_loop().create_future()
        try:  # inside an ambient transaction the append runs at once, on its connection
            with db_errors("append a journal entry"):
                done.set_result(op(tx.connection))
        except Exception as exc:
            done.set_exception(exc)
        return done

    def commit_queued(self) -> bool:
        """Commit the queued writes on the calling thread if the writer thread is not at it (see
        ``GroupCommitWriter.commit_queued``); False if it is."""
        with db_errors("commit queued journal writes"):
            return self._writer.commit_queued()

    def truncate_before(self, run: str, seq: int) -> int:
        with db_errors("truncate journal entries"), self._conn(join=True) as conn:
            return conn.execute(self._q.truncate, (run, seq)).rowcount

    # --- reads an event loop asks for -------------------------------------------------------------------

    def read_run_async(self, run: str) -> asyncio.Future[RunRecord | None]:
        """The run's record, for a caller on an event loop (on its thread): the reads asked in one loop iteration
        share ONE query, on a worker thread (:class:`telo.journal.postgres_reads.LoopReads`). Inside an ambient
        transaction it is read at once, on that transaction's connection."""
        return self._loop_read(self._records, run, self.read_run)

    def status_async(self, run: str) -> asyncio.Future[str | None]:
        """The run's status (None if unknown), asked for as :meth:`read_run_async` is (the cancel checks)."""
        return self._loop_read(self._statuses, run, lambda r: self.read_statuses([r]).get(r))

    def _loop_read(self, reads: LoopReads[V], run: str, at_once: Callable[[str], V | None]) -> asyncio.Future[V | None]:
        if ambient_of(self) is None:
            return reads.ask(run)
        future: asyncio.Future[V | None] = asyncio.get_running_loop().create_future()
        try:
            future.set_result(at_once(run))
        except Exception as exc:
            future.set_exception(exc)
        return future

    # --- transactions, wake-ups, lifecycle -------------------------------------------------------------

    @property
    def url(self) -> str:
        """The connection URL this journal was opened with (a ``Sql.Connection`` on the same database joins
        its transactions, spec §8.2)."""
        return self._url

    def transaction(self) -> AbstractContextManager[StoreTransaction]:
        """A transaction appends and reads in this context join (spec §8.2; reference §7 "Transactions").

        Commits when the block ends normally, rolls back (with every entry appended inside) when it raises.
        Opened while another of this store's transactions is ambient, it is a SAVEPOINT on that connection.
        """
        return open_transaction(self, self._pool)

    def _transaction_open(self, tx: StoreTransaction) -> bool:
        return joined(self, tx)

    def subscribe_wake(self, callback: WakeCallback) -> Callable[[], None] | None:
        """``callback(run)`` for each run NOTIFYed due; every subscriber of this store shares one LISTEN
        connection (:class:`telo.journal.postgres_wake.WakeHub`)."""
        return self._wake.subscribe(callback)

    def close(self) -> None:
        """Finish every queued write, stop the writer and the listener, close the connections. Idempotent."""
        self._writer.close()
        self._wake.close()
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

