"""Group commit for the PostgreSQL journal: how one batch runs in one transaction on the writer's connection.

The writer thread, its queue and who commits when are database-neutral (:mod:`telo.journal.group_commit`);
this is the PostgreSQL executor. A commit costs the server one WAL flush and the client a round trip per
statement, whatever the statements hold, so a batch's operations of many runs share them: consecutive
appends, admissions and completions of different runs run as ONE ``unnest`` statement each
(:mod:`telo.journal.postgres_groups`, :mod:`telo.journal.postgres_ops`), in the order
:func:`telo.journal.batch_plan.plan` gives, between ``BEGIN`` and ``COMMIT``.

PostgreSQL differs from SQLite in one way that shapes this: a statement that fails aborts its whole
transaction. So a batch first runs **optimistically**, without a SAVEPOINT per operation (each costs two round
trips); operations raise Python errors (an unknown run, a refused fence) only when they wrote nothing. Should a
statement fail — bad data in one operation, a deadlock with another process, a lock waited for past
``lock_timeout`` — the batch is rolled back and run again **isolated**: each group under a SAVEPOINT, and, when
a group fails, each of its operations under its own, so the failing one gets its error and the others commit.
What either pass decided about write chains is undone with the rollback (:mod:`telo.journal.chain`).

If the transaction cannot begin or commit, or the connection is lost, every operation of the batch fails
(``ERR_JOURNAL_UNAVAILABLE`` when the server is unreachable, else ``ERR_JOURNAL_WRITE_FAILED``) and the next
batch opens a new connection.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

import psycopg
from psycopg import pq

from telo import faults
from telo.errors import Code, JournalError
from telo.journal.batch_plan import GroupRunner, OneAtATime, plan
from telo.journal.chain import WriteChain
from telo.journal.group_commit import WriterStats, committed
from telo.journal.pending import PendingOp, break_chain
from telo.journal.redact import redact

log = logging.getLogger("telo.journal.postgres")

Conn = psycopg.Connection[Any]

# How long a write waits for a row lock another transaction holds. The writer's transaction carries every run's
# writes, so it must not wait long: the legitimate holders (another process's batch, a delivery, an operator's
# update) hold theirs for milliseconds. Past this, the batch runs again isolated and the blocked write fails.
LOCK_TIMEOUT: Final = "5s"


class _Redo(Exception):
    """The optimistic pass failed on a statement: roll back and run the batch isolated."""


class PgBatches:
    """Runs a batch of PostgreSQL journal operations on the writer's connection (a ``BatchExecutor``).

    ``connect`` opens the writer's connection (autocommit: the executor sends BEGIN and COMMIT itself); it is
    opened lazily and again after the server dropped it."""

    database = "PostgreSQL"

    def __init__(self, connect: Callable[[], Conn], groups: Sequence[tuple[type, GroupRunner]] = ()) -> None:
        self._connect = connect
        self._conn: Conn | None = None
        self._groups: dict[type, GroupRunner] = dict(groups)

    def _connection(self) -> Conn:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
            self._conn = None
            conn = self._connect()
            conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
            self._conn = conn
        return conn

    def abort(self) -> None:
        conn = self._conn
        if conn is not None and not conn.closed and conn.info.transaction_status != pq.TransactionStatus.IDLE:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()

    def _begun(self) -> Conn:
        """The writer's connection in a new transaction. A connection the server dropped while it was idle (a
        restart, an idle timeout) is replaced once: nothing of the batch was sent on it yet."""
        conn = self._connection()
        try:
            conn.execute("BEGIN")
        except psycopg.Error:
            if not conn.broken:
                raise
            conn = self._connection()
            conn.execute("BEGIN")
        return conn

    def execute(self, live: list[PendingOp[Any]], stats: WriterStats) -> None:
        try:
            conn = self._begun()
        except psycopg.Error as exc:
            self.abort()
            self._fail_batch(live, exc, stats)
            return
        chains = _chain_states(live)
        try:
            outcomes = self._attempt(conn, live, isolated=False)
        except _Redo:
            _restore(chains)  # the rollback undid what the first pass decided
            outcomes = self._attempt(conn, live, isolated=True)
        except psycopg.Error as exc:
            self._fail_batch(live, exc, stats)
            return
        if isinstance(outcomes, BaseException):
            self._fail_batch(live, outcomes, stats)
            return
        committed(live, outcomes, stats)

    def _attempt(self, conn: Conn, live: list[PendingOp[Any]], *, isolated: bool
                 ) -> list[tuple[bool, Any]] | BaseException:
        """One pass over the batch in one transaction: the outcomes once it committed, or (isolated) the error
        that kept it from committing. The optimistic pass raises :class:`_Redo` when a statement failed."""
        try:
            if isolated:  # (the optimistic pass runs in the transaction execute began)
                conn.execute("BEGIN")
            outcomes: list[tuple[bool, Any]] = [(False, None)] * len(live)
            for positions, runner in plan([op.fn for op in live], self._groups):
                ops = [live[k] for k in positions]
                if isolated:
                    results = self._isolated(conn, ops, runner)
                elif runner is not None and len(ops) > 1:
                    results = self._group(conn, ops, runner)
                else:
                    results = [self._one(conn, op) for op in ops]
                for k, result in zip(positions, results, strict=True):
                    outcomes[k] = result
                    if not result[0]:
                        break_chain(live[k], result[1])  # before a later write of its chain runs
            faults.point("before-journal-commit")
            conn.execute("COMMIT")
            return outcomes
        except _Redo:
            self.abort()
            if conn.broken:  # the connection went with the statement: no second pass on it
                return _connection_lost()
            raise
        except psycopg.Error as exc:
            self.abort()
            if isolated or conn.broken:
                return exc
            raise _Redo from exc

    def _one(self, conn: Conn, op: PendingOp[Any]) -> tuple[bool, Any]:
        """An operation in the optimistic pass: a driver error aborts the transaction, so it redoes the batch."""
        if op.isolated:  # it writes several statements: under a SAVEPOINT, it fails alone
            return self._alone(conn, op)
        try:
            return True, op.fn(conn)
        except psycopg.Error as exc:
            raise _Redo from exc
        except Exception as exc:
            return False, exc

    def _alone(self, conn: Conn, op: PendingOp[Any]) -> tuple[bool, Any]:
        """An operation under a SAVEPOINT of its own: whatever it raises, nothing of it stays written."""
        try:
            with conn.transaction():
                return True, op.fn(conn)
        except psycopg.Error as exc:
            if conn.broken:
                raise
            return False, _op_error(exc)
        except Exception as exc:
            return False, exc

    def _group(self, conn: Conn, ops: list[PendingOp[Any]], runner: GroupRunner) -> list[tuple[bool, Any]]:
        try:
            return runner(conn, [op.fn for op in ops])
        except OneAtATime:  # it wrote nothing: each alone isolates what it could not handle together
            return [self._one(conn, op) for op in ops]
        except Exception as exc:  # (a driver error, or an unforeseen one after the group wrote): undo, isolate
            raise _Redo from exc

    def _isolated(self, conn: Conn, ops: list[PendingOp[Any]], runner: GroupRunner | None
                  ) -> list[tuple[bool, Any]]:
        """The second pass: a group under a SAVEPOINT, and should it fail, each operation under its own."""
        if runner is not None and len(ops) > 1:
            try:
                with conn.transaction():
                    return runner(conn, [op.fn for op in ops])
            except Exception:  # undone with its SAVEPOINT: each alone isolates what failed
                if conn.broken:
                    raise
        return [self._alone(conn, op) for op in ops]

    def _fail_batch(self, ops: list[PendingOp[Any]], exc: BaseException, stats: WriterStats) -> None:
        stats.failed_batches += 1
        stats.failed_ops += len(ops)
        unreachable = self._conn is None or self._conn.broken or isinstance(exc, psycopg.OperationalError)
        if unreachable:
            # a connection error may quote the journal's URL: its password stays out of the log
            log.warning("journal.postgres.batch_failed",
                        extra={"journal.ops": len(ops), "error.message": redact(str(exc))})
        for op in ops:
            # one error object per caller: each thread raising it gets its own traceback
            err = JournalError(
                Code.JOURNAL_UNAVAILABLE if unreachable else Code.JOURNAL_WRITE_FAILED,
                f"the PostgreSQL journal could not commit a batch of {len(ops)} write(s): {redact(str(exc))}",
                hint="check that the PostgreSQL server is up and reachable at the journal's URL"
                if unreachable else "check the server's log (disk space, permissions, locks)",
                data={"sqlstate": exc.sqlstate} if isinstance(exc, psycopg.Error) and exc.sqlstate else None,
            )
            err.__cause__ = exc
            op.resolve(False, err)


def _op_error(exc: psycopg.Error) -> JournalError:
    """The error of one operation the server refused (its batch's others committed)."""
    err = JournalError(Code.JOURNAL_WRITE_FAILED, f"the PostgreSQL journal refused a write: {exc}",
                       hint="check the value written (PostgreSQL text cannot hold a NUL character) and the "
                       "server's log", data={"sqlstate": exc.sqlstate} if exc.sqlstate else None)
    err.__cause__ = exc
    return err


def _connection_lost() -> psycopg.OperationalError:
    return psycopg.OperationalError("the connection to the server was lost during the batch")


def _chain_states(live: list[PendingOp[Any]]) -> list[tuple[WriteChain, BaseException | None]]:
    """The write chains of a batch's operations, with whether each was broken before it ran."""
    seen: dict[int, tuple[WriteChain, BaseException | None]] = {}
    for op in live:
        chain = getattr(op.fn, "chain", None)
        if isinstance(chain, WriteChain) and id(chain) not in seen:
            seen[id(chain)] = (chain, chain.broken)
    return list(seen.values())


def _restore(chains: list[tuple[WriteChain, BaseException | None]]) -> None:
    for chain, broken in chains:
        chain.broken = broken
