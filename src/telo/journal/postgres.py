"""The PostgreSQL journal store (reference §7 "Postgres journal"; spec §8.2 for ``writes_inside``).

Format-compatible with the upstream ``DurableJournalPostgres.Journal``: the same two tables (see
:mod:`telo.journal.postgres_schema`), values stored as frame text beside ``codec_version`` (a NULL codec
version is a legacy row holding plain JSON with ``{"$bigint": "…"}``), and the same conditional statements
for first-writer-wins appends, claims and due runs, so telo and upstream processes can share one journal.

Transactions (reference §7 "Transactions"): lifecycle calls (admit, complete, park, unpark, claim, release,
update_run, due_runs) always run on their own autocommit connection, because they describe the run rather
than its work and must not vanish with a rolled-back body. Appends and reads join the transaction opened
by :meth:`PostgresStore.transaction` when one is ambient in the calling context, so a ``Sql.Transaction``
body on that connection is journaled per step and a rollback discards its entries with its effects.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.sql import Composed
from psycopg_pool import ConnectionPool

from telo.clock import SYSTEM_CLOCK, Clock
from telo.errors import Code, JournalCorrupt, JournalError
from telo.journal import cancels, paging
from telo.journal.claims import Fence, fence_refused, holder_is_dead, this_host
from telo.journal.integrity import checksum
from telo.journal.model import (
    Admission,
    AdmitResult,
    Entry,
    Outcome,
    Parked,
    RunFilter,
    RunPage,
    RunRecord,
)
from telo.journal.postgres_rows import columns_for, db_errors, dump, entry_from_row, entry_params, record_from_row
from telo.journal.postgres_schema import ensure_schema, missing_columns, names_for
from telo.journal.postgres_sql import PgSql
from telo.journal.postgres_tx import ambient_of, joined, open_transaction
from telo.journal.postgres_wake import CONNECT_OPTIONS, WakeListener
from telo.journal.rules import unknown_run
from telo.journal.store import Store, StoreTransaction, WakeCallback

log = logging.getLogger("telo.journal.postgres")


class PostgresStore(Store):
    """A journal in two PostgreSQL tables named by ``table`` (reference §7; upstream default prefix).

    It has no group commit of its own (every call is a round trip on a pooled connection, which the server
    commits), so it is not a :class:`~telo.journal.store.GroupCommitStore`: an event loop hands its calls to
    worker threads (:mod:`telo.durable.aio`)."""

    kind = "postgres"

    def __init__(
        self,
        url: str,
        *,
        table: str = "telo_durable",
        create_table: bool = True,
        notify_channel: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        pool_size: int = 8,
    ) -> None:
        self._names = names = names_for(table, notify_channel)
        self._url = url
        self._clock = clock
        self._lock = threading.Lock()
        self._listeners: set[WakeListener] = set()
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
            name=f"telo-{names.prefix}",
            num_workers=2,
            open=True,
        )
        self._q = PgSql.for_names(names)

    # --- plumbing ---------------------------------------------------------------------------------------

    @contextmanager
    def _conn(self, *, join: bool) -> Iterator[psycopg.Connection[Any]]:
        """The ambient transaction's connection when ``join`` and one is open, else a pooled autocommit one."""
        tx = ambient_of(self) if join else None
        if tx is not None:
            yield tx.connection
            return
        with self._pool.connection() as conn:
            yield conn

    def _one(
        self, query: Composed, params: Mapping[str, Any] | tuple[Any, ...], *, join: bool, action: str
    ) -> dict[str, Any] | None:
        with db_errors(action), self._conn(join=join) as conn, conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(query, params).fetchone()

    def _notify(self, run: str) -> None:
        """NOTIFY the wake channel (best effort: a lost wake-up only delays a resumer until its sweep)."""
        try:
            with self._pool.connection() as conn:
                conn.execute("SELECT pg_notify(%s, %s)", (self._names.channel, run))
        except psycopg.Error as exc:
            log.warning("journal.postgres.notify_failed", extra={"durable.run": run, "error.message": str(exc)})

    # --- runs -------------------------------------------------------------------------------------------

    def admit(self, admission: Admission) -> AdmitResult:
        now = self._clock.now_ms()
        params = {
            "run": admission.run,
            "status": admission.status,
            "due_at": admission.due_at,
            "inputs": admission.inputs,
            "inputs_v": admission.inputs_v,
            "workflow": admission.workflow,
            "digest": admission.manifest_digest,
            "scope": admission.digest_scope,
            "now": now,
        }
        row = self._one(self._q.admit, params, join=False, action="admit a run")
        if row is not None:
            # A scheduled run that is already due is worth a wake-up; a future one is found by the sweep,
            # and a running one is executed by its admitter, which claims it right away.
            if admission.status == "scheduled" and admission.due_at is not None and admission.due_at <= now:
                self._notify(admission.run)
            return AdmitResult(True, record_from_row(row))
        existing = self._one(self._q.select_run, (admission.run,), join=False, action="read a run")
        if existing is None:  # deleted between the conflict and the read: nothing sane to answer
            raise JournalError(Code.JOURNAL_FAILED, f"run {admission.run!r} vanished while being admitted")
        return AdmitResult(False, record_from_row(existing))

    def read_run(self, run: str) -> RunRecord | None:
        row = self._one(self._q.select_run, (run,), join=True, action="read a run")
        return None if row is None else record_from_row(row)

    def _update(self, run: str, query: Composed, params: Mapping[str, Any], action: str,
                fence: Fence | None = None) -> RunRecord:
        """One UPDATE of the run's row — with ``fence`` (``query`` its fenced statement), only while the run's
        claim is the fence's (the UPDATE's row lock and its re-check of the condition make that exact against a
        concurrent takeover)."""
        if fence is not None:
            params = {**params, "f_holder": fence.holder, "f_token": fence.token}
        row = self._one(query, {**params, "run": run}, join=False, action=action)
        if row is None:
            if fence is not None:
                self._refuse(run, fence, action)
            raise unknown_run(run)
        return record_from_row(row)

    def _refuse(self, run: str, fence: Fence, what: str) -> None:
        """Raise ``ClaimLost`` for a fenced write that found another claim (returns for an unknown run)."""
        row = self._one(self._q.claim_of, (run,), join=False, action="read a claim")
        if row is not None:
            raise fence_refused(run, fence, what, row["claim_holder"], row["claim_fence"])

    def complete(self, run: str, outcome: Outcome, *, fence: Fence | None = None) -> RunRecord:
        record = self._update(
            run,
            self._q.complete if fence is None else self._q.complete_fenced,
            {
                "status": outcome.status,
                "result": outcome.result,
                "result_v": outcome.result_v,
                "error": dump(dict(outcome.error)) if outcome.error else None,
                "regions": outcome.collapsed_regions,
                "reasons": dump(list(outcome.collapse_reasons)),
                "replayed": outcome.replayed_steps,
                "now": self._clock.now_ms(),
            },
            "settle a run",
            fence,
        )
        if outcome.status == "cancelled":
            cancels.notice()
        return record

    def park(self, run: str, parked: Parked, *, fence: Fence | None = None) -> RunRecord:
        return self._update(
            run,
            self._q.park if fence is None else self._q.park_fenced,  # fenced: the claim is kept
            {
                "path": parked.path,
                "resource": parked.resource,
                "token": parked.token,
                "reason": parked.reason,
                "at": parked.at,
                "now": self._clock.now_ms(),
            },
            "park a run",
            fence,
        )

    def unpark(self, run: str) -> bool:
        with db_errors("unpark a run"), self._pool.connection() as conn:
            changed = conn.execute(self._q.unpark, (self._clock.now_ms(), run)).rowcount > 0
        if changed:
            self._notify(run)
        return changed

    def update_run(self, run: str, *, fence: Fence | None = None, **changes: Any) -> RunRecord:
        columns = {"updated_at": self._clock.now_ms(), **columns_for(changes)}
        query = self._q.update(columns, fenced=fence is not None)
        params = {**columns, "run": run}
        if fence is not None:
            params.update(f_holder=fence.holder, f_token=fence.token)
        row = self._one(query, params, join=False, action="update a run")
        if row is None:
            if fence is not None:
                self._refuse(run, fence, "a record update")
            raise unknown_run(run)
        return record_from_row(row)

    def run_parked_on(self, token: str) -> RunRecord | None:
        row = self._one(self._q.parked_on, (token,), join=True, action="find a parked run")
        return None if row is None else record_from_row(row)

    def _dead_local_holders(self, conn: psycopg.Connection[Any], now_ms: int) -> list[str]:
        """Holders of live-looking claims that are dead processes on this host (claims.holder_is_dead).

        Only a handful of distinct holders exist (one per workflow instance and resumer), so they are
        checked in Python and handed back to SQL as a list, keeping the due query's LIMIT exact.
        """
        rows = conn.execute(self._q.dead_holder_candidates, (now_ms, f"@{this_host()}:")).fetchall()
        return [r[0] for r in rows if holder_is_dead(r[0])]

    def due_runs(self, now_ms: int, limit: int) -> list[str]:
        # A short transaction of its own: SKIP LOCKED passes over rows a concurrent sweep is looking at.
        with db_errors("look for due runs"), self._pool.connection() as conn, conn.transaction():
            dead = self._dead_local_holders(conn, now_ms)
            rows = conn.execute(self._q.due, {"now": now_ms, "dead": dead, "limit": max(limit, 0)}).fetchall()
        return [r[0] for r in rows]

    def list_runs(self, flt: RunFilter) -> RunPage:
        where: list[str] = []
        params: dict[str, Any] = {"limit": max(flt.limit, 0) + 1}
        if flt.status is not None:
            where.append("status = %(status)s")
            params["status"] = flt.status
        if flt.workflow is not None:
            where.append("workflow = %(workflow)s")
            params["workflow"] = flt.workflow
        if flt.since is not None:
            where.append("COALESCE(created_at, 0) >= %(since)s")
            params["since"] = flt.since
        if flt.after is not None:
            params["c_at"], params["c_run"] = paging.decode_cursor(flt.after)
            where.append('(COALESCE(created_at, 0), run COLLATE "C") < (%(c_at)s, %(c_run)s)')
        query = self._q.list_runs(where)
        with db_errors("list runs"), self._conn(join=True) as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(query, params).fetchall()
        records = [record_from_row(r) for r in rows]
        page, more = records[: flt.limit], len(records) > flt.limit
        return RunPage(page, paging.encode_cursor(page[-1]) if more and page else None)

    # --- claims -----------------------------------------------------------------------------------------

    def claim(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> int | None:
        q = self._q
        params = {"h": holder, "until": now_ms + ttl_ms, "run": run, "now": now_ms}
        with db_errors("claim a run"), self._pool.connection() as conn:
            granted = conn.execute(q.claim, params).fetchone()
            if granted is not None:
                return int(granted[0])
            current = conn.execute(q.claim_current, (run,)).fetchone()
            if current is None:
                return None
            other, until = current
            if not isinstance(other, str) or not holder_is_dead(other):
                return None
            # Its holder is a dead process on this host: take over now rather than waiting out the TTL, but
            # only if the claim is still the one we judged (compare-and-set against a concurrent taker).
            taken = conn.execute(q.claim_from, {**params, "other": other, "was": until}).fetchone()
            return None if taken is None else int(taken[0])

    def renew(self, run: str, fence: Fence, ttl_ms: int, now_ms: int) -> bool:
        with db_errors("renew a claim"), self._pool.connection() as conn:
            return conn.execute(self._q.renew, (now_ms + ttl_ms, run, fence.holder, fence.token)).rowcount > 0

    def release(self, run: str, holder: str, token: int | None = None) -> None:
        query = self._q.release if token is None else self._q.release_fenced
        with db_errors("release a claim"), self._pool.connection() as conn:
            conn.execute(query, (run, holder) if token is None else (run, holder, token))

    def deliver(self, token: str, value: str | None, v: int | None) -> str | None:
        """One transaction: the parked run's row locked (a racing delivery waits, then finds it unparked), the
        entry stored at its park path unless one is there, the run unparked."""
        q = self._q
        with db_errors("deliver to a parked run"), self._pool.connection() as conn, conn.transaction():
            row = conn.execute(q.deliver_find, (token,)).fetchone()
            if row is None:
                return None
            run, path = row
            crc = checksum(Entry(path, "step", value, v, None, None))
            if conn.execute(q.deliver_insert, (run, path, value, v, crc)).fetchone() is None:
                return None  # another delivery stored its payload first
            conn.execute(q.deliver_unpark, (self._clock.now_ms(), run))
        self._notify(run)
        return str(run)

    # --- entries ----------------------------------------------------------------------------------------

    def append(self, run: str, entry: Entry, *, fence: Fence | None = None) -> Entry:
        # first writer wins; a fenced append is refused once the run's claim is not the fence's (PgSql.append*)
        q = self._q
        params = entry_params(run, entry)
        if fence is not None:
            params.update(f_holder=fence.holder, f_token=fence.token)
        with db_errors("append a journal entry"), self._conn(join=True) as conn:
            row = conn.execute(q.append if fence is None else q.append_fenced, params).fetchone()
            if row is not None:
                return entry.with_seq(row[0])
            if fence is not None:
                claim = conn.execute(q.claim_of, (run,)).fetchone()
                if claim is not None and (claim[0] != fence.holder or claim[1] != fence.token):
                    raise fence_refused(run, fence, f"the entry at {entry.path!r}", claim[0], claim[1])
            with conn.cursor(row_factory=dict_row) as cur:
                first = cur.execute(q.select_entry, (run, entry.path)).fetchone()
            if first is not None:
                return entry_from_row(run, first)  # first writer wins: hand back what is stored
            exists = conn.execute(q.run_exists, (run,)).fetchone()
        if exists is None:
            raise unknown_run(run)
        raise JournalCorrupt(
            f"journal entry {entry.path!r} of run {run!r} conflicted on write but cannot be read back",
            data={"run": run, "path": entry.path},
        )

    def read_entries(self, run: str) -> list[Entry]:
        with db_errors("read journal entries"), self._conn(join=True) as c, c.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(self._q.select_entries, (run,)).fetchall()
        return [entry_from_row(run, r) for r in rows]

    def truncate_before(self, run: str, seq: int) -> int:
        with db_errors("truncate journal entries"), self._conn(join=True) as conn:
            return conn.execute(self._q.truncate, (run, seq)).rowcount

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
        listener = WakeListener(self._url, self._names.channel, callback)
        with self._lock:
            self._listeners.add(listener)

        def unsubscribe() -> None:
            with self._lock:
                self._listeners.discard(listener)
            listener.stop()

        return unsubscribe

    def close(self) -> None:
        with self._lock:
            listeners, self._listeners = list(self._listeners), set()
        for listener in listeners:
            listener.stop()
        self._pool.close()
