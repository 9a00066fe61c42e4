"""A group-commit batch's appends to the PostgreSQL journal as ONE statement (reference §7 append).

``PgSql.append_many`` takes the group's rows as arrays and inserts them with ``unnest``, in batch order, so
each run's entries take their ``seq`` (the table's BIGSERIAL) in the order they were appended. It keeps every
single-append rule (:class:`telo.journal.postgres_ops.PgAppend`):

- **first writer wins**: ``ON CONFLICT (run, path) DO NOTHING``; an entry that did not go in gets the stored
  entry of its path;
- **one entry per path within the group**: a repeated (run, path) is sent once; the repeats get the first's;
- **unknown run**: the join with the runs table drops its rows; each such append raises ``unknown_run``;
- **fencing** (:mod:`telo.journal.claims`): a fenced append goes in only while its run's claim is its fence's,
  the run's row read ``FOR SHARE`` by the statement as by a single fenced append; a refused one raises
  ``ClaimLost`` and writes nothing;
- **chains** (:mod:`telo.journal.chain`): a deferred append that finds another execution's value at its path
  breaks its chain, and no later write of the chain may commit — should a later one of the same group have
  gone in, the group's rows are taken out again and the writer runs the group one append at a time, where the
  broken chain refuses what follows.
"""

from __future__ import annotations

from typing import Any

from telo.journal.batch_plan import OneAtATime
from telo.journal.model import Entry
from telo.journal.postgres_ops import Conn, PgAppend, check_claim


def append_group(conn: Conn, ops: list[PgAppend]) -> list[tuple[bool, Any]]:
    """Run consecutive appends of one batch together; (ok, entry or error) per op, in order.

    Raises only having written nothing of the group (:class:`OneAtATime`: run them one by one)."""
    if any(op.chain is not None and op.chain.broken is not None for op in ops):
        raise OneAtATime  # (nothing written yet) the single path refuses a broken chain's writes one by one
    q = ops[0].q
    first: dict[tuple[str, str], int] = {}  # (run, path) -> index of the op that writes it
    rows: list[tuple[Any, ...]] = []
    for i, op in enumerate(ops):
        key = (op.run, op.entry.path)
        if key not in first:
            first[key] = i
            rows.append(op.row())
    columns = [list(column) for column in zip(*rows, strict=True)]
    inserted: dict[tuple[str, str], int] = {(run, path): seq for run, path, seq in
                                            conn.execute(q.append_many, columns).fetchall()}
    if len(inserted) == len(rows):  # the common case: every row went in
        return [(True, op.stored(inserted[(op.run, op.entry.path)])) for op in ops]
    results: list[tuple[bool, Any]] = []
    lost = False  # a deferred append found another value at its path
    for i, op in enumerate(ops):
        key = (op.run, op.entry.path)
        seq = inserted.get(key)
        if seq is not None:  # its own row, or the first's of a repeat
            stored: Entry = ops[first[key]].stored(seq)
        else:
            try:
                if op.fence is not None and first[key] == i:
                    check_claim(conn, q, op.run, op.fence, f"the entry at {op.entry.path!r}")
                stored = op.existing(conn)
            except Exception as exc:
                results.append((False, exc))
                continue
        lost = lost or (op.chain is not None and not op.entry.same_record(stored))
        results.append((True, stored))
    if lost and any(op.chain is not None for op in ops):
        # A later write of the losing chain may be among the rows that went in: take them all out again and
        # have the writer run the group one at a time, where the chain breaks at the loser, in order.
        taken = [(run, path, seq) for (run, path), seq in inserted.items()]
        conn.execute(q.unappend_many, [list(column) for column in zip(*taken, strict=True)] or [[], [], []])
        raise OneAtATime
    return results
