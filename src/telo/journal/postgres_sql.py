"""Every statement the PostgreSQL journal runs, composed once per store (reference §7 "Postgres journal").

The statements are upstream's conditional ones — first-writer-wins appends (``ON CONFLICT DO NOTHING``),
claims as conditional UPDATEs, due runs ``FOR UPDATE SKIP LOCKED`` — plus telo's fencing conditions
(:mod:`telo.journal.claims` "Fencing"): a fenced write's statement carries ``claim_holder = %(f_holder)s AND
claim_fence = %(f_token)s``, so the condition is checked by the very row lock the write takes. Names are quoted
identifiers of :mod:`telo.journal.postgres_schema`; the column lists are :mod:`telo.journal.postgres_rows`'.

Each statement is rendered to its text once, when the store opens: the text is what psycopg prepares on the
server after a few executions (its ``prepare_threshold``), so the hot statements run prepared. The group
statements (``*_many``) take one array per column and ``unnest`` them — ONE text for any number of rows, so a
batch of a hundred runs' appends is one prepared statement, not a hundred (:mod:`telo.journal.postgres_groups`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from psycopg import sql

from telo.journal.postgres_rows import ENTRY_COLS, RUN_COLS
from telo.journal.postgres_schema import Names

# A fenced write's condition on the run's row (named parameters f_holder, f_token).
_FENCED: Final = " AND claim_holder = %(f_holder)s AND claim_fence = %(f_token)s"
_CLEAR_PARK: Final = "parked_path = NULL, parked_resource = NULL, parked_token = NULL, parked_reason = NULL"
_COMPLETE: Final = (
    "status = %(status)s, result = %(result)s, result_codec_version = %(result_v)s, error = %(error)s, "
    "collapsed_regions = %(regions)s, collapse_reasons = %(reasons)s, replayed_steps = %(replayed)s, "
    f"due_at = NULL, {_CLEAR_PARK}, claim_holder = NULL, claim_until = NULL, updated_at = %(now)s"
)
_PARK: Final = ("status = 'parked', parked_path = %(path)s, parked_resource = %(resource)s, parked_token = %(token)s, "
                "parked_reason = %(reason)s, due_at = %(at)s, ")
_GRANT: Final = "claim_holder = %(h)s, claim_until = %(until)s, claim_fence = COALESCE(claim_fence, 0) + 1"
_INSERT_ENTRY: Final = ("INSERT INTO {entries} (run, path, entry_kind, decision, target, value, codec_version, "
                        "checksum, written_at) ")

# reference §7 dueRuns: free, lapsed or a dead local holder's (%(dead)s) claim, and a status that is due.
_DUE_WHERE: Final = (
    "(r.claim_until IS NULL OR r.claim_until <= %(now)s OR r.claim_holder IS NULL OR r.claim_holder = '' "
    "OR r.claim_holder = ANY(%(dead)b::text[])) "
    "AND (r.status = 'running' OR (r.status = 'scheduled' AND r.due_at <= %(now)s) "
    "OR (r.status = 'parked' AND (r.due_at <= %(now)s OR EXISTS "
    "(SELECT 1 FROM {entries} e WHERE e.run = r.run AND e.path = r.parked_path))))"
)
# The caller's filters (Store.claim_due), arrays, NULL for "any".
FILTERS: Final = (
    " AND (%(workflows)b::text[] IS NULL OR r.workflow IS NULL OR r.workflow = ANY(%(workflows)b::text[])) "
    "AND (%(only)b::text[] IS NULL OR r.run = ANY(%(only)b::text[])) AND NOT (r.run = ANY(%(skip)b::text[]))"
)
DUE_WHERE: Final = _DUE_WHERE
# Rows another sweep (or a worker's claim) has locked are passed over, not waited for.
_DUE_ORDER: Final = ' ORDER BY r.due_at ASC NULLS FIRST, r.run COLLATE "C" LIMIT %(limit)s FOR UPDATE OF r SKIP LOCKED'
# Fair claiming (Store.claim_due): the due runs a worker can execute now, granted and started (running, the park
# lifted) by the statement that picks them. Unqueued runs only: a queued one is granted under its queue's limits
# (telo.journal.postgres_queues), in a transaction of its own.
_CLAIM_DUE: Final = (
    "WITH due AS (SELECT r.run, r.due_at FROM {runs} r WHERE " + _DUE_WHERE + FILTERS + " AND r.queue IS NULL"
    + _DUE_ORDER + ") UPDATE {runs} r SET claim_holder = %(h)s, claim_until = %(until)s, "
    "claim_fence = COALESCE(r.claim_fence, 0) + 1, status = 'running', parked_path = NULL, parked_resource = NULL, "
    "parked_token = NULL, parked_reason = NULL, due_at = NULL, updated_at = %(now)s FROM due WHERE r.run = due.run "
    "RETURNING {cols}, due.due_at AS was_due"
)
# A group of appends (rows in batch order, numbered by ORDINALITY so that each run's entries take their seqs in
# that order): stored unless the path has an entry (first writer wins; a path twice in the arrays is stored
# once), the run is unknown (the join drops it) or — given a fence (holder, token) — the run's claim is not that
# fence's; the run's row is read FOR SHARE, as by a single fenced append. RETURNING names what went in.
_APPEND_MANY: Final = (
    _INSERT_ENTRY + "SELECT u.run, u.path, u.kind, u.decision, u.target, u.value, u.v, u.crc, u.at "
    "FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::integer[], "
    "%b::bigint[], %b::bigint[], %b::text[], %b::bigint[]) WITH ORDINALITY "
    "AS u(run, path, kind, decision, target, value, v, crc, at, f_holder, f_token, ord) "
    "JOIN {runs} r ON r.run = u.run "
    "WHERE u.f_holder IS NULL OR (r.claim_holder = u.f_holder AND r.claim_fence = u.f_token) "
    "ORDER BY u.ord FOR SHARE OF r ON CONFLICT (run, path) DO NOTHING RETURNING run, path, seq"
)
# A group of admissions, each optionally claimed with its row (fencing token 1); RETURNING names those admitted.
_ADMIT_MANY: Final = (
    "INSERT INTO {runs} (run, status, due_at, inputs, inputs_codec_version, workflow, manifest_digest, "
    "digest_scope, created_at, updated_at, epoch, claim_holder, claim_until, claim_fence, queue, queue_key, "
    "priority) "
    "SELECT u.run, u.status, u.due_at, u.inputs, u.inputs_v, u.workflow, u.digest, u.scope, u.now, u.now, 0, "
    "u.holder, u.until, u.fence, u.queue, u.queue_key, u.priority "
    "FROM unnest(%b::text[], %b::text[], %b::bigint[], %b::text[], %b::integer[], %b::text[], %b::text[], "
    "%b::text[], %b::bigint[], %b::text[], %b::bigint[], %b::bigint[], %b::text[], %b::text[], %b::bigint[]) "
    "WITH ORDINALITY AS u(run, status, due_at, inputs, inputs_v, workflow, digest, scope, now, holder, until, "
    "fence, queue, queue_key, priority, ord) "
    "ORDER BY u.ord ON CONFLICT (run) DO NOTHING RETURNING run"
)
# A group of completions (distinct runs), each fenced or not; RETURNING the settled records.
_COMPLETE_MANY: Final = (
    "UPDATE {{runs}} r SET status = u.status, result = u.result, result_codec_version = u.result_v, "
    "error = u.error, collapsed_regions = u.regions, collapse_reasons = u.reasons, replayed_steps = u.replayed, "
    "due_at = NULL, parked_path = NULL, parked_resource = NULL, parked_token = NULL, parked_reason = NULL, "
    "claim_holder = NULL, claim_until = NULL, updated_at = u.now "
    "FROM unnest(%b::text[], %b::text[], %b::text[], %b::integer[], %b::text[], %b::integer[], %b::text[], "
    "%b::integer[], %b::bigint[], %b::text[], %b::bigint[]) "
    "AS u(run, status, result, result_v, error, regions, reasons, replayed, now, f_holder, f_token) "
    "WHERE r.run = u.run AND (u.f_holder IS NULL OR (r.claim_holder = u.f_holder AND r.claim_fence = u.f_token)) "
    "RETURNING {cols}"
)


@dataclass(frozen=True, slots=True)
class PgSql:
    """The statements of one store's two tables (see the module docstring)."""

    parts: dict[str, sql.Composable]
    channel: str  # the wake-up channel NOTIFYed when a run becomes due (telo.journal.postgres_wake)
    select_run: str
    admit: str
    claim_of: str  # (claim_holder, claim_fence): why a fenced write was refused
    run_exists: str
    complete: str
    complete_fenced: str
    park: str  # releases the claim
    park_fenced: str  # keeps it: the execution releases it once its body has unwound
    unpark: str
    parked_on: str
    dead_holder_candidates: str
    queue_runs: str  # Store.runs_of_queue (issue 16)
    due: str
    claim_due: str
    claim: str
    claim_current: str
    claim_from: str  # a dead holder's claim taken over: compare-and-set on the claim we judged
    renew: str
    renew_many: str  # each (run, holder, token) of arrays extended to its until, passing over locked rows
    release: str
    release_fenced: str
    deliver_find: str
    deliver_insert: str
    deliver_unpark: str
    append: str
    append_fenced: str
    lock_appends: str  # append_in_order's per-run lock, keyed by "<channel>:<run>" (unique per table)
    select_entry: str
    select_entries: str
    entry_mark: str  # Store.journal_mark: the entries' count and highest seq
    truncate: str
    statuses: str  # (run, status) of each run in an array
    select_runs: str  # the record of each run in an array
    notify_many: str  # a NOTIFY per run of an array, delivered when the transaction commits
    # group statements: one array per column (see the module docstring)
    append_many: str
    unappend_many: str  # takes a group's rows out again, each only if it still holds the seq it was given
    admit_many: str
    complete_many: str

    @classmethod
    def for_names(cls, names: Names) -> PgSql:
        parts: dict[str, sql.Composable] = {
            "runs": names.runs_id,
            "entries": names.entries_id,
            "cols": sql.SQL(", ").join(map(sql.Identifier, RUN_COLS)),
            "ecols": sql.SQL(", ").join(map(sql.Identifier, ENTRY_COLS)),
        }

        def fmt(query: str) -> str:
            return sql.SQL(query).format(**parts).as_string(None)

        def update(assignments: str, fenced: bool) -> str:
            return fmt(f"UPDATE {{runs}} SET {assignments} WHERE run = %(run)s{_FENCED if fenced else ''} "
                       "RETURNING {cols}")

        # INSERT … SELECT … WHERE EXISTS refuses an entry for a run never admitted, like the memory store; the
        # casts type the parameters, which a bare SELECT list would leave as text. A fenced append reads the
        # run's row FOR SHARE: a concurrent takeover (an UPDATE of that row) then either waits for this entry
        # to commit — and its new holder reads it — or commits first, and the re-checked condition refuses it.
        def append(where: str) -> str:
            return fmt(_INSERT_ENTRY + "SELECT %(run)s::text, %(path)s::text, %(kind)s::text, %(decision)s::text, "
                       f"%(target)s::text, %(value)s::text, %(v)s::integer, %(checksum)s::bigint, %(at)s::bigint "
                       f"{where} "
                       "ON CONFLICT (run, path) DO NOTHING RETURNING seq")

        return cls(
            parts=parts,
            channel=names.channel,
            select_run=fmt("SELECT {cols} FROM {runs} WHERE run = %s"),
            admit=fmt(
                "INSERT INTO {runs} (run, status, due_at, inputs, inputs_codec_version, workflow, manifest_digest, "
                "digest_scope, created_at, updated_at, epoch) VALUES (%(run)s, %(status)s, %(due_at)s, %(inputs)s, "
                "%(inputs_v)s, %(workflow)s, %(digest)s, %(scope)s, %(now)s, %(now)s, 0) "
                "ON CONFLICT (run) DO NOTHING RETURNING {cols}"
            ),
            claim_of=fmt("SELECT claim_holder, claim_fence FROM {runs} WHERE run = %s"),
            run_exists=fmt("SELECT 1 FROM {runs} WHERE run = %s"),
            complete=update(_COMPLETE, False),
            complete_fenced=update(_COMPLETE, True),
            park=update(_PARK + "claim_holder = NULL, claim_until = NULL, updated_at = %(now)s", False),
            park_fenced=update(_PARK + "updated_at = %(now)s", True),
            unpark=fmt(f"UPDATE {{runs}} SET status = 'running', {_CLEAR_PARK}, due_at = NULL, updated_at = %s "
                       "WHERE run = %s AND status = 'parked'"),
            parked_on=fmt("SELECT {cols} FROM {runs} WHERE parked_token = %s AND status = 'parked' "
                          'ORDER BY COALESCE(created_at, 0), run COLLATE "C" LIMIT 1'),
            queue_runs=fmt("SELECT {cols} FROM {runs} WHERE queue = %s AND status IN ('running', 'parked') "
                           'ORDER BY run COLLATE "C"'),
            dead_holder_candidates=fmt("SELECT DISTINCT claim_holder FROM {runs} WHERE claim_until > %s "
                                       "AND position(%s in claim_holder) > 0"),
            due=fmt("SELECT r.run FROM {runs} r WHERE " + _DUE_WHERE + _DUE_ORDER),
            claim_due=fmt(_CLAIM_DUE.replace("{cols}", ", ".join(f"r.{c}" for c in RUN_COLS))),
            claim=fmt(f"UPDATE {{runs}} SET {_GRANT} WHERE run = %(run)s AND "
                      "(claim_until IS NULL OR claim_until <= %(now)s OR claim_holder IS NULL OR claim_holder = '') "
                      "RETURNING claim_fence"),
            claim_current=fmt("SELECT claim_holder, claim_until FROM {runs} WHERE run = %s"),
            claim_from=fmt(f"UPDATE {{runs}} SET {_GRANT} "
                           "WHERE run = %(run)s AND claim_holder = %(other)s AND claim_until = %(was)s "
                           "RETURNING claim_fence"),
            renew=fmt("UPDATE {runs} SET claim_until = %s WHERE run = %s AND claim_holder = %s AND claim_fence = %s"),
            renew_many=fmt("WITH mine AS (SELECT r.run, u.until FROM {runs} r JOIN unnest(%b::text[], %b::text[], "
                           "%b::bigint[], %b::bigint[]) AS u(run, holder, token, until) ON r.run = u.run "
                           "AND r.claim_holder = u.holder AND r.claim_fence = u.token FOR UPDATE OF r SKIP LOCKED) "
                           "UPDATE {runs} r SET claim_until = mine.until FROM mine WHERE r.run = mine.run "
                           "RETURNING r.run"),
            release=fmt("UPDATE {runs} SET claim_holder = NULL, claim_until = NULL "
                        "WHERE run = %s AND claim_holder = %s"),
            release_fenced=fmt("UPDATE {runs} SET claim_holder = NULL, claim_until = NULL "
                               "WHERE run = %s AND claim_holder = %s AND claim_fence = %s"),
            deliver_find=fmt("SELECT run, parked_path FROM {runs} WHERE parked_token = %s AND status = 'parked' "
                             'ORDER BY COALESCE(created_at, 0), run COLLATE "C" LIMIT 1 FOR UPDATE'),
            deliver_insert=fmt(_INSERT_ENTRY + "VALUES (%s, %s, 'step', NULL, NULL, %s, %s, %s, %s) "
                               "ON CONFLICT (run, path) DO NOTHING RETURNING seq"),
            deliver_unpark=fmt(f"UPDATE {{runs}} SET status = 'running', {_CLEAR_PARK}, due_at = NULL, "
                               "updated_at = %s WHERE run = %s"),
            append=append("WHERE EXISTS (SELECT 1 FROM {runs} WHERE run = %(run)s)"),
            lock_appends="SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            append_fenced=append("FROM {runs} r WHERE r.run = %(run)s AND r.claim_holder = %(f_holder)s "
                                 "AND r.claim_fence = %(f_token)s FOR SHARE OF r"),
            select_entry=fmt("SELECT {ecols} FROM {entries} WHERE run = %s AND path = %s"),
            select_entries=fmt("SELECT {ecols} FROM {entries} WHERE run = %s ORDER BY seq"),
            entry_mark=fmt("SELECT count(*), COALESCE(max(seq), 0) FROM {entries} WHERE run = %s"),
            truncate=fmt("DELETE FROM {entries} WHERE run = %s AND seq < %s"),
            statuses=fmt("SELECT run, status FROM {runs} WHERE run = ANY(%b::text[])"),
            select_runs=fmt("SELECT {cols} FROM {runs} WHERE run = ANY(%b::text[])"),
            notify_many=fmt("SELECT pg_notify(%s, r) FROM unnest(%b::text[]) AS r"),
            append_many=fmt(_APPEND_MANY),
            unappend_many=fmt("DELETE FROM {entries} e USING unnest(%b::text[], %b::text[], %b::bigint[]) "
                              "AS u(run, path, seq) WHERE e.run = u.run AND e.path = u.path AND e.seq = u.seq"),
            admit_many=fmt(_ADMIT_MANY),
            complete_many=fmt(_COMPLETE_MANY.format(cols=", ".join(f"r.{c}" for c in RUN_COLS))),
        )

    def update(self, columns: Iterable[str], *, fenced: bool) -> sql.Composed:
        """``update_run``: each of ``columns`` set from the parameter of its name, the updated row returned."""
        assignments = sql.SQL(", ").join(
            sql.SQL("{} = {}").format(sql.Identifier(col), sql.Placeholder(col)) for col in columns
        )
        return sql.SQL(f"UPDATE {{runs}} SET {{set}} WHERE run = %(run)s{_FENCED if fenced else ''} "
                       "RETURNING {cols}").format(**self.parts, set=assignments)

    def list_runs(self, where: list[str]) -> sql.Composed:
        """Runs matching every condition of ``where``, newest first (:mod:`telo.journal.paging`)."""
        return sql.SQL(
            "SELECT {cols} FROM {runs}"
            + (" WHERE " + " AND ".join(where) if where else "")
            + ' ORDER BY COALESCE(created_at, 0) DESC, run COLLATE "C" DESC LIMIT %(limit)s'
        ).format(**self.parts)
