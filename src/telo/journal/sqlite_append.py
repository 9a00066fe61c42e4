"""Appends to the SQLite journal: one at a time, or a batch's worth at once (reference §7 append).

Alone, an append is one statement (``Sql.append``): ``INSERT OR IGNORE … SELECT … FROM runs … RETURNING
seq`` checks the run exists, numbers the entry and stores it, first writer wins.

In a group-commit batch, consecutive appends run as a group (:func:`append_group`): one query returns the
seq base of every run involved as one JSON object, the seqs are numbered in Python in batch order, and
multi-row ``INSERT … VALUES (…), (…)`` statements store them all (row counts split into powers of two, so
a handful of statement texts serve every batch size). Why: each SQLite call drops and retakes the GIL, and
with many caller threads waiting for it, every drop hands it to one of them for a while. Per append that
was two hand-offs on the writer's critical path; per group it is now a few.

The group keeps every single-append rule:

- **first writer wins**: ``INSERT OR IGNORE``; when fewer rows went in than were sent, each entry is looked up
  and an entry whose stored seq is not the one assigned to it lost to an earlier writer (a pre-existing row
  always has a seq at or below the run's base, every assigned seq is above it), and gets the stored entry;
- **one entry per path within the batch**: a repeated (run, path) is sent once; the repeats get the stored
  entry of the first;
- **unknown run**: a run without a base is left to the single path, which raises for it alone;
- **fencing** (:mod:`telo.journal.claims`): a fenced append goes in only while its run's claim is its
  fence's. Alone, that is a condition of its one statement; in a group, the claim of every run involved is
  read with its seq base (or known already, see :class:`SeqBases`) in the batch's write transaction, which no
  other writer can interleave with, and a refused append writes no row;
- **isolation**: should anything fail, nothing of the group stays written (:mod:`telo.journal.sqlite_group`)
  and the writer runs it one append at a time.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from telo.errors import JournalCorrupt
from telo.journal.chain import WriteChain, stored_for
from telo.journal.claims import Fence, fence_refused
from telo.journal.integrity import checksum
from telo.journal.model import Entry
from telo.journal.rules import unknown_run
from telo.journal.sqlite_group import OneAtATime, all_or_nothing, chunks
from telo.journal.sqlite_rows import entry_from_row
from telo.journal.sqlite_schema import Sql


class SeqBases:
    """The seq base (the greatest seq, or the floor above it) of the runs the writer connection appended to or
    admitted last, so that a group append need not read it — one SELECT per batch, a sizeable share of a lone
    run's group commit (benchmarks/durable.py).

    Valid only while no OTHER connection committed since (another process, an ambient transaction): the
    writer calls :meth:`sync` as each batch's transaction begins, which compares ``PRAGMA data_version`` and
    forgets everything when it moved. A base that is too HIGH is harmless (a rolled-back batch leaves one):
    seqs must only increase, and gaps are allowed (PostgreSQL's BIGSERIAL leaves them too). One too low would
    not be, so whatever writes entries on the writer connection notes its seqs here, and the writer forgets
    everything before any operation it does not know (:meth:`clear`).

    The runs' claims ``(holder, fencing token)`` are kept the same way, read with the bases: an operation that
    changes a claim (a claim, renewal or release, a park) is one the writer does not know, so it clears them;
    an admission notes the claim it wrote, a completion forgets its run's.
    """

    __slots__ = ("bases", "claims", "version")

    MAX_RUNS = 10_000

    def __init__(self) -> None:
        self.bases: dict[str, int] = {}
        self.claims: dict[str, tuple[str | None, int]] = {}
        self.version: int | None = None

    def sync(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self.version:
            self.clear()
            self.version = version

    def note(self, run: str, base: int) -> None:
        if len(self.bases) >= self.MAX_RUNS:
            self.clear()
        self.bases[run] = base

    def note_claim(self, run: str, holder: str | None, token: int) -> None:
        if len(self.claims) >= self.MAX_RUNS:
            self.claims.clear()
        self.claims[run] = (holder, token)

    def forget_claim(self, run: str) -> None:
        self.claims.pop(run, None)

    def clear(self) -> None:
        self.bases.clear()
        self.claims.clear()


class AppendOp:
    """One append as a writer operation: callable alone, and groupable by :func:`append_group`."""

    __slots__ = ("at", "chain", "entry", "fence", "run", "seqs", "sql", "target")

    def __init__(self, sql: Sql, run: str, entry: Entry, target: str | None, at: int,
                 chain: WriteChain | None = None, seqs: SeqBases | None = None, fence: Fence | None = None) -> None:
        self.sql = sql
        self.run = run
        self.entry = entry
        self.target = target  # the entry's target as JSON text
        self.at = at  # its written_at: the entry's own, or the store's clock when the append was made
        self.chain = chain  # set for a deferred append (telo.journal.chain)
        self.seqs = seqs
        # the execution's claim (a deferred append's is its chain's): written only while the run's claim is it
        self.fence = fence if fence is not None or chain is None else chain.fence

    def __call__(self, conn: sqlite3.Connection) -> Entry:
        e = self.entry
        if self.chain is not None:
            self.chain.check()
        fence = self.fence
        crc = checksum(e)
        if fence is None:
            got = conn.execute(self.sql.append, (self.run, e.path, e.kind, e.decision, self.target, e.value, e.v,
                                                 crc, self.at))
        else:
            got = conn.execute(self.sql.append_fenced, (self.run, e.path, e.kind, e.decision, self.target, e.value,
                                                        e.v, crc, self.at, fence.holder, fence.token))
        row = got.fetchone()
        if row is not None:  # stored, seq assigned, run known (and claimed by the fence): one statement
            if self.seqs is not None:
                self.seqs.note(self.run, row[0])
                if fence is not None:
                    self.seqs.note_claim(self.run, fence.holder, fence.token)
            return self.stored(row[0])
        if fence is not None:
            check_claim(conn, self.sql, self.run, fence, f"the entry at {e.path!r}")
        # First writer wins: the path already has an entry (possibly from earlier in this very batch).
        return self.settle(self.existing(conn))

    def settle(self, stored: Entry) -> Entry:
        """First writer wins: what the append returns having found ``stored`` at its path (chain.stored_for)."""
        return stored_for(self.chain, self.run, self.entry, stored)

    def stored(self, seq: int) -> Entry:
        e = self.entry
        return Entry(e.path, e.kind, e.value, e.v, e.decision, e.target, seq, self.at)

    def existing(self, conn: sqlite3.Connection) -> Entry:
        """The entry stored at this op's path, which an earlier writer put there."""
        row = conn.execute(self.sql.select_entry, (self.run, self.entry.path)).fetchone()
        if row is not None:
            return entry_from_row(row, self.run)
        if conn.execute(self.sql.run_exists, (self.run,)).fetchone() is None:
            raise unknown_run(self.run)
        raise JournalCorrupt(
            f"the SQLite journal refused entry {self.entry.path!r} of run {self.run!r} but holds none there",
            hint="inspect the journal with `telo runs journal`",
            data={"run": self.run, "path": self.entry.path},
        )


_ROW = 10  # parameters of one row of Sql.insert_entries


def check_claim(conn: sqlite3.Connection, sql: Sql, run: str, fence: Fence, what: str) -> None:
    """Raise ``ClaimLost`` unless the run's claim is ``fence``'s (``unknown_run`` for a run not in the journal)."""
    row = conn.execute(sql.claim_of, (run,)).fetchone()
    if row is None:
        raise unknown_run(run)
    if row[0] != fence.holder or row[1] != fence.token:
        raise fence_refused(run, fence, what, row[0], row[1])


def append_group(conn: sqlite3.Connection, ops: list[AppendOp]) -> list[tuple[bool, Any]]:
    """Run consecutive appends of one batch together; (ok, entry or error) per op, in order.

    Raises only for a failure the caller must undo (it then reruns the ops one by one).

    Written for few Python operations per append: an eager run commits a batch of two appends per step, and
    the Python of such a batch's commit was 58 us (in benchmarks/durable.py, beside 277 us in SQLite), 14 us of
    it this function's bookkeeping; one pass over the ops and a single statement without chunks() made it
    48 us (eager sequential CPU per step x0.99, steps/s x1.03: eight A/B pairs).
    """
    head = ops[0]
    sql, seqs = head.sql, head.seqs
    fenced: dict[str, bool] = {}  # every run of the group, True when an append of it is fenced
    for op in ops:
        chain = op.chain
        if chain is not None and chain.broken is not None:
            raise OneAtATime  # (nothing written yet) the single path refuses a broken chain's writes one by one
        if op.fence is not None:
            fenced[op.run] = True
        elif op.run not in fenced:
            fenced[op.run] = False
    bases: dict[str, int] = {}
    claims: dict[str, tuple[str | None, int]] = {}
    unknown: list[str] = []
    known_bases = seqs.bases if seqs is not None else _NOTHING  # (synced by the writer as the batch began)
    known_claims = seqs.claims if seqs is not None else _NOTHING
    for run, is_fenced in fenced.items():
        base = known_bases.get(run)
        if base is not None:
            bases[run] = base
        claim = known_claims.get(run) if is_fenced else None
        if claim is not None:
            claims[run] = claim
        if base is None or (is_fenced and claim is None):
            unknown.append(run)
    if unknown:
        unknown.sort()
        found = json.loads(conn.execute(sql.seq_bases, (json.dumps(unknown),)).fetchone()[0] or "{}")
        for run, (base, holder, token) in found.items():
            bases[run] = base
            claims[run] = (holder, token)
            if seqs is not None:
                seqs.note_claim(run, holder, token)
    written: set[tuple[str, str]] = set()  # (run, path) of the rows sent
    assigned: list[int | None] = [None] * len(ops)
    refused: dict[int, Exception] = {}  # fenced appends whose run's claim is not their fence's
    params: list[Any] = []  # the rows' parameters, flat
    for i, op in enumerate(ops):
        run = op.run
        base = bases.get(run)
        if base is None:
            continue  # unknown run (the single path raises for it)
        e = op.entry
        fence = op.fence
        if fence is not None:
            claim = claims.get(run)
            if claim is None or claim[0] != fence.holder or claim[1] != fence.token:
                holder, token = claim if claim is not None else (None, 0)
                refused[i] = fence_refused(run, fence, f"the entry at {e.path!r}", holder, token)
                continue
        key = (run, e.path)
        if key in written:
            continue  # a repeat (gets the first's entry)
        written.add(key)
        bases[run] = assigned[i] = seq = base + 1
        params += (run, e.path, seq, e.kind, e.decision, op.target, e.value, e.v, checksum(e), op.at)
    rows = len(params) // _ROW
    if 0 < rows <= 32:  # one statement (chunks(rows) == [rows]), on its own all or nothing
        inserted = conn.execute(sql.insert_entries(rows), params).rowcount
    else:
        done = 0
        statements: list[tuple[str, list[Any]]] = []
        for size in chunks(rows):
            statements.append((sql.insert_entries(size), params[done * _ROW : (done + size) * _ROW]))
            done += size
        inserted = sum(all_or_nothing(conn, statements, _rowcount))
    all_in = inserted == rows
    if seqs is not None:  # each run's last seq assigned: at or above what it holds now, whatever was ignored
        for run, base in bases.items():
            seqs.note(run, base)
    if not all_in and any(op.chain is not None for op in ops):
        # A deferred append may have lost a race, and a later write of its chain went in with it: take this
        # group's rows out again (each is ours exactly when it holds the seq assigned to it here) and have the
        # writer run the group one at a time, where a broken chain refuses what follows.
        for i, op in enumerate(ops):
            if assigned[i] is not None:
                conn.execute(sql.unappend, (op.run, op.entry.path, assigned[i]))
        raise OneAtATime
    results: list[tuple[bool, Any]] = []
    for i, op in enumerate(ops):
        mine = assigned[i]
        if mine is not None and all_in:  # the common case: every row went in
            e = op.entry
            results.append((True, Entry(e.path, e.kind, e.value, e.v, e.decision, e.target, mine, op.at)))
            continue
        if i in refused:
            results.append((False, refused[i]))
            continue
        try:
            stored = op.existing(conn)  # a repeat gets the first's entry; an unknown run raises
            results.append((True, op.stored(mine) if mine is not None and stored.seq == mine else stored))
        except Exception as exc:
            results.append((False, exc))
    return results


_NOTHING: dict[str, Any] = {}


def _rowcount(cursor: sqlite3.Cursor) -> int:
    return cursor.rowcount
