"""Group commit for the SQLite journal: how one batch runs in one ``BEGIN IMMEDIATE … COMMIT``.

The writer thread, its queue and who commits when are database-neutral (:mod:`telo.journal.group_commit`);
this is the SQLite executor it runs each batch with (ARCHITECTURE §3 "SQLite"). A durable SQLite commit
costs one fsync of the WAL, whatever it holds, so the batch's operations share it:

- **grouped statements**: consecutive appends, admissions and completions of different runs run together
  through their group runner (:mod:`telo.journal.sqlite_append`, :mod:`telo.journal.sqlite_lifecycle`) as a
  few multi-row statements, in the order :func:`telo.journal.batch_plan.plan` gives;
- **isolation per operation**: an operation that raises is undone on its own (a SAVEPOINT, unless it
  declares that each of its statements leaves a consistent state) and its error goes to its own caller;
  the others commit — a SQLite statement that fails leaves its transaction open (unlike PostgreSQL's);
- **all or nothing per batch** otherwise: if the transaction cannot begin or commit (disk full, I/O error,
  a lock held past the busy timeout), every operation of the batch fails with that error and none took
  effect; so does every operation of a batch SQLite rolled back by itself (SQLITE_FULL, SQLITE_IOERR).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from telo.errors import Code, JournalError
from telo.journal.batch_plan import GroupRunner, plan
from telo.journal.group_commit import GroupCommitWriter, WriterStats, committed
from telo.journal.pending import PendingOp, break_chain
from telo.journal.sqlite_group import savepoint

__all__ = ["GroupRunner", "SqliteBatches", "sqlite_writer"]


def sqlite_writer(
    conn: sqlite3.Connection,
    name: str,
    *,
    inline_when_idle: bool = True,
    groups: Sequence[tuple[type, GroupRunner]] = (),
    after_begin: Callable[[sqlite3.Connection], None] | None = None,
    before_other: Callable[[], None] | None = None,
    after_failure: Callable[[], None] | None = None,
    path: str | None = None,
) -> GroupCommitWriter:
    """The group-commit writer of a SQLite store, owning ``conn`` (see :class:`SqliteBatches` for the hooks);
    ``path``, the journal's file, is named in its errors."""
    executor = SqliteBatches(conn, groups=groups, after_begin=after_begin, before_other=before_other,
                             after_failure=after_failure, path=path)
    return GroupCommitWriter(executor, name, inline_when_idle=inline_when_idle)


class SqliteBatches:
    """Runs a batch of SQLite journal operations on the writer's connection (a :class:`BatchExecutor`)."""

    database = "SQLite"

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        groups: Sequence[tuple[type, GroupRunner]] = (),
        after_begin: Callable[[sqlite3.Connection], None] | None = None,
        before_other: Callable[[], None] | None = None,
        after_failure: Callable[[], None] | None = None,
        path: str | None = None,
    ) -> None:
        self._conn = conn
        self._path = path
        # Operations whose function is of one of these types (each with a ``run`` attribute) run together
        # through its runner; see batch_plan.plan.
        self._groups: dict[type, GroupRunner] = dict(groups)
        self._after_begin = after_begin  # called in each batch's transaction before its first operation
        self._before_other = before_other  # called before an operation of none of those types runs
        # called when a batch took no effect (it could not begin or commit, or was rolled back): what the groups
        # remembered of it must be forgotten, since this connection's own rollbacks move no data_version
        self._after_failure = after_failure

    def abort(self) -> None:
        if self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
        if self._after_failure is not None:
            self._after_failure()

    def close(self) -> None:
        self._conn.close()

    def _plan(self, live: list[PendingOp[Any]]) -> list[tuple[list[int], GroupRunner | None]]:
        fns: list[Any] = [op.fn for op in live]
        # The commonest batch of a lone run (durability: eager), its appends, is one group: what plan() would
        # return for operations of one groupable type and one run, without its queues (~3 us a batch).
        kind = type(fns[0])
        runner = self._groups.get(kind)
        if runner is not None:
            run = fns[0].run
            for fn in fns:
                if type(fn) is not kind or fn.run != run:
                    break
            else:
                return [(list(range(len(fns))), runner)]
        return plan(fns, self._groups)

    def execute(self, live: list[PendingOp[Any]], stats: WriterStats) -> None:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            if self._after_begin is not None:
                self._after_begin(conn)
        except sqlite3.Error as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            self._fail_batch(live, exc, stats)
            return
        outcomes: list[tuple[bool, Any]] = [(False, None)] * len(live)
        for positions, runner in self._plan(live):
            ops = [live[k] for k in positions]
            if runner is None and self._before_other is not None:
                self._before_other()
            results = self._run_group(ops, runner) if runner is not None and len(ops) > 1 \
                else [self._run_one(op) for op in ops]
            for k, result in zip(positions, results, strict=True):
                outcomes[k] = result
                if not result[0]:
                    break_chain(live[k], result[1])  # before a later write of its chain runs
            if not conn.in_transaction:
                # SQLite rolled the whole transaction back (SQLITE_FULL, SQLITE_IOERR, ...): nothing of
                # this batch took effect, so no operation of it may report success.
                self._fail_batch(live, _lost([r for r in outcomes if r[1] is not None]), stats)
                return
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                # the batch fails either way; the next BEGIN will tell if the connection is broken
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            self._fail_batch(live, exc, stats)
            return
        committed(live, outcomes, stats)

    def _run_one(self, op: PendingOp[Any]) -> tuple[bool, Any]:
        conn = self._conn
        try:
            if not op.isolated:
                return True, op.fn(conn)
            with savepoint(conn, "op"):
                return True, op.fn(conn)
        except sqlite3.Error as exc:  # SQLite refused the statement itself (a read-only file, a full disk, ...)
            return False, self._refused(exc)
        except Exception as exc:
            return False, exc

    def _run_group(self, ops: list[PendingOp[Any]], runner: GroupRunner) -> list[tuple[bool, Any]]:
        """The group runner leaves nothing of the group written when it raises (its contract: a SAVEPOINT
        per group cost two more statements — two GIL hand-offs — in every batch, for a failure that is rare)."""
        conn = self._conn
        try:
            results = runner(conn, [op.fn for op in ops])
        except Exception as exc:
            if not conn.in_transaction:
                return [(False, exc)] * len(ops)  # the batch is lost; execute fails it
            # Undone: run them one at a time, which isolates whatever failed.
            results = []
            for op in ops:
                results.append(self._run_one(op))
                if not conn.in_transaction:
                    return results + [(False, exc)] * (len(ops) - len(results))
            return results
        return results

    def _refused(self, exc: sqlite3.Error) -> JournalError:
        """The error of one operation whose statement SQLite refused, as the catalogue's code (never the driver's
        own exception: a caller would print a traceback for it)."""
        err = JournalError(Code.JOURNAL_WRITE_FAILED, f"the SQLite journal{self._where()} refused a write: {exc}",
                           hint=_hint(exc, _STATEMENT_HINT), data={"path": self._path} if self._path else None)
        err.__cause__ = exc
        return err

    def _where(self) -> str:
        return f" {self._path!r}" if self._path else ""

    def _fail_batch(self, ops: list[PendingOp[Any]], exc: BaseException, stats: WriterStats) -> None:
        if self._after_failure is not None:
            self._after_failure()
        stats.failed_batches += 1
        stats.failed_ops += len(ops)
        for op in ops:
            # one error object per caller: each thread raising it gets its own traceback
            err = JournalError(
                Code.JOURNAL_WRITE_FAILED,
                f"the SQLite journal{self._where()} could not commit a batch of {len(ops)} write(s): {exc}",
                hint=_hint(exc, _BATCH_HINT), data={"path": self._path} if self._path else None,
            )
            err.__cause__ = exc
            op.resolve(False, err)


_BATCH_HINT = ("check the disk (space, permissions) and whether another process holds the journal locked for "
               "longer than the busy timeout")
_STATEMENT_HINT = "check the disk (space, permissions) and the journal file"
_READ_ONLY_HINT = ("the journal's file, or the directory holding it (SQLite writes its -wal and -shm files there), is "
                   "read-only for this process: give it write permission, or only read the journal (telo status, "
                   "telo runs)")


def _hint(exc: BaseException, otherwise: str) -> str:
    code = getattr(exc, "sqlite_errorcode", None)  # (the extended code: its low byte is the primary one)
    return _READ_ONLY_HINT if code is not None and code & 0xFF == sqlite3.SQLITE_READONLY else otherwise


def _lost(outcomes: list[tuple[bool, Any]]) -> BaseException:
    for ok, value in reversed(outcomes):
        if not ok:
            error: BaseException = value
            cause = error.__cause__
            # (SQLite's own error, not the one _refused made of it: the batch's error wraps it once)
            return cause if isinstance(error, JournalError) and isinstance(cause, sqlite3.Error) else error
    return sqlite3.OperationalError("the transaction was rolled back")
