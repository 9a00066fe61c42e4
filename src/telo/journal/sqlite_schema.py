"""The SQLite journal's tables and statements (reference §7 "Postgres journal", mirrored; its connections are
:mod:`telo.journal.sqlite_connect`); what its rows mean is :mod:`telo.journal.sqlite_rows`.

The SQLite journal keeps the PostgreSQL journal's two tables — same names ``<prefix>_runs`` /
``<prefix>_entries``, same columns, same indexes — so a journal moves between the two by copying rows, and
one reader understands both. telo's extension columns (``parked_reason``, ``parked_at``, ``manifest_digest``,
``digest_scope``, ``workflow``, ``created_at``, ``updated_at``, ``epoch``, ``claim_fence``) are nullable like
in PostgreSQL. ``claim_fence`` holds the fencing token of the run's latest claim grant
(:mod:`telo.journal.claims`): every grant sets it one higher, a release keeps it, and each fenced write of an
execution is a statement conditional on it (and on ``claim_holder``). One column is SQLite's own:
``last_seq``, the run's seq floor. PostgreSQL numbers entries with one BIGSERIAL; here an append numbers its
entry ``max(run's greatest seq, last_seq) + 1`` inside the write transaction — one ``INSERT … SELECT … FROM
runs`` that also checks the run exists and hands the seq back through ``RETURNING``, so the fast path is one
statement and writes no run row. ``truncate_before`` raises ``last_seq`` to the greatest seq it saw before
deleting, so numbers are never reused after compaction and ``seq`` stays strictly increasing per run.

A third table is telo's alone: ``<prefix>_queues``, the queue limits ``telo queues set`` overrides (issue 16,
:mod:`telo.journal.sqlite_queue_overrides`).

The schema version (:data:`SCHEMA_VERSION`, in ``PRAGMA user_version``) and how a journal of an older one is
upgraded in place are :mod:`telo.journal.sqlite_migrate`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from telo.errors import Code, JournalError
from telo.journal.queue_overrides import table_ddl
from telo.journal.sqlite_rows import ENTRY_SELECT, RECORD_SELECT

SCHEMA_VERSION: Final = 7  # what each version added: telo.journal.sqlite_migrate

_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# (column, type): the PostgreSQL journal's columns in upstream order, then telo's extensions, then last_seq.
RUN_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("run", "TEXT PRIMARY KEY"),
    ("status", "TEXT NOT NULL"),
    ("due_at", "INTEGER"),
    ("parked_path", "TEXT"),
    ("parked_resource", "TEXT"),
    ("parked_token", "TEXT"),
    ("inputs", "TEXT"),
    ("result", "TEXT"),
    ("error", "TEXT"),
    ("collapsed_regions", "INTEGER"),
    ("collapse_reasons", "TEXT"),
    ("replayed_steps", "INTEGER"),
    ("inputs_codec_version", "INTEGER"),
    ("result_codec_version", "INTEGER"),
    ("claim_holder", "TEXT"),
    ("claim_until", "INTEGER"),
    ("parked_reason", "TEXT"),
    ("parked_at", "INTEGER"),
    ("manifest_digest", "TEXT"),
    ("digest_scope", "TEXT"),
    ("workflow", "TEXT"),
    ("created_at", "INTEGER"),
    ("updated_at", "INTEGER"),
    ("epoch", "INTEGER"),
    ("last_seq", "INTEGER NOT NULL DEFAULT 0"),
    ("claim_fence", "INTEGER"),
    ("queue", "TEXT"),  # issue 16: the Local.Queue of a queued run, and its concurrency key's value
    ("queue_key", "TEXT"),
    ("priority", "INTEGER"),  # issue 16: the queued run's priority (NULL reads 0) and its first grant's time
    ("started_at", "INTEGER"),
    ("dedup_key", "TEXT"),  # issue 16 step 4 (telo.journal.keyed): a dedupKey/singleton key, a debounce key
    ("debounce_key", "TEXT"),
)

ENTRY_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("run", "TEXT NOT NULL"),
    ("path", "TEXT NOT NULL"),
    ("seq", "INTEGER NOT NULL"),
    ("entry_kind", "TEXT NOT NULL"),
    ("decision", "TEXT"),
    ("target", "TEXT"),  # JSON {kind, name, module?}; NULL for a delivery
    ("value", "TEXT"),  # frame text; NULL = produced nothing (differs from the JSON text "null")
    ("codec_version", "INTEGER"),  # NULL = legacy plain JSON with {"$bigint": "…"}
    ("checksum", "INTEGER"),  # telo extension: CRC-32 of the entry (telo.journal.integrity); NULL = unchecked
    ("written_at", "INTEGER"),  # telo extension: Entry.at, epoch ms the store wrote it; NULL = not recorded
)



_MULTI_INSERT: dict[tuple[str, int], str] = {}
_MULTI_ADMIT: dict[tuple[str, int], str] = {}
_MULTI_COMPLETE: dict[tuple[str, int], str] = {}

# An admission's row: 16 parameters (then its first claim and its token, NULL, NULL, 0 for none; then its queue,
# key and priority) and epoch 0.
_ADMIT_COLUMNS: Final = ("run, status, due_at, inputs, inputs_codec_version, workflow, manifest_digest, "
                         "digest_scope, created_at, updated_at, claim_holder, claim_until, claim_fence, queue, "
                         "queue_key, priority, epoch")
_ADMIT_VALUES: Final = "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0"
ADMIT_COLUMNS, ADMIT_VALUES = _ADMIT_COLUMNS, _ADMIT_VALUES  # (a keyed admission adds its keys: sqlite_keyed)
# A fenced write's condition: the run's claim is still the execution's (named parameters :holder, :token).
FENCED: Final = "claim_holder = :holder AND claim_fence = :token"
CLEAR_PARK: Final = ("parked_path = NULL, parked_resource = NULL, parked_token = NULL, parked_at = NULL, "
                      "parked_reason = NULL")


@dataclass(frozen=True, slots=True)
class Sql:
    """Every statement the store runs, formatted once for a validated prefix."""

    runs: str
    entries: str
    queues: str  # telo only (issue 16): the limits `telo queues set` overrides (sqlite_queue_overrides)
    due_where: str  # reference §7 dueRuns' condition on the run's status, of a runs row aliased r
    index_names: tuple[str, ...]
    ddl: tuple[str, ...]
    admit: str
    select_run: str
    append: str
    append_fenced: str
    insert_entry: str  # a row as given (tests writing legacy rows, the benchmark's raw loop)
    run_exists: str
    seq_bases: str
    raise_floor: str
    select_entry: str
    select_entries: str
    entry_mark: str  # Store.journal_mark: the entries' count and highest seq (the (run, seq) index)
    truncate: str
    unappend: str  # a row a group append wrote, taken out again (telo.journal.sqlite_append)
    complete_returning: str
    complete_fenced: str
    park: str
    park_fenced: str
    unpark: str
    claim: str
    claim_from: str
    renew: str
    holder_of: str
    claim_of: str
    release: str
    release_fenced: str
    parked_on: str
    due_free: str
    due_claimed: str

    @classmethod
    def for_prefix(cls, prefix: str) -> Sql:
        if not _NAME.fullmatch(prefix):
            raise JournalError(
                Code.JOURNAL_CONFIG_INVALID,
                f"the SQLite journal table prefix {prefix!r} is not a plain SQL name",
                hint="use letters, digits and underscores, not starting with a digit "
                "(^[A-Za-z_][A-Za-z0-9_]*$)",
                data={"table": prefix},
            )
        runs, entries, queues = f"{prefix}_runs", f"{prefix}_entries", f"{prefix}_queues"
        run_cols = ", ".join(f"{n} {t}" for n, t in RUN_COLUMNS)
        entry_cols = ", ".join(f"{n} {t}" for n, t in ENTRY_COLUMNS)
        ddl = (
            f"CREATE TABLE IF NOT EXISTS {runs} ({run_cols})",
            f"CREATE TABLE IF NOT EXISTS {entries} ({entry_cols}, PRIMARY KEY (run, path))",
            # Index names are upstream's (the seq index says "runs" although it indexes entries).
            f"CREATE INDEX IF NOT EXISTS {prefix}_runs_entries_seq_idx ON {entries} (run, seq)",
            f"CREATE INDEX IF NOT EXISTS {prefix}_runs_parked_token_idx ON {runs} (parked_token) "
            "WHERE parked_token IS NOT NULL",
            f"CREATE INDEX IF NOT EXISTS {prefix}_runs_due_idx ON {runs} (status, due_at)",
            # telo extension: the listing order (paging.py), on the very expression list_runs sorts by.
            f"CREATE INDEX IF NOT EXISTS {prefix}_runs_created_idx ON {runs} (ifnull(created_at, 0), run)",
            # telo extension (issue 16): a queue's runs, counted and picked by every queued claim
            f"CREATE INDEX IF NOT EXISTS {prefix}_runs_queue_idx ON {runs} (queue, status) WHERE queue IS NOT NULL",
            # ... and the starts a rateLimit counts in its window (only queued runs record started_at)
            f"CREATE INDEX IF NOT EXISTS {prefix}_runs_started_idx ON {runs} (queue, started_at) "
            "WHERE started_at IS NOT NULL",
            table_ddl(queues, "INTEGER"),  # telo extension (issue 16, v7): `telo queues set` overrides
            # telo extension (issue 16 step 4, v7; telo.journal.keyed): one live run per dedup key of a queue, one
            # unstarted run per debounce key of a queue's workflow — racing admissions make one run, not two
            f"CREATE UNIQUE INDEX IF NOT EXISTS {prefix}_runs_dedup_idx ON {runs} (queue, dedup_key) "
            "WHERE dedup_key IS NOT NULL AND status IN ('scheduled', 'running', 'parked')",
            f"CREATE UNIQUE INDEX IF NOT EXISTS {prefix}_runs_debounce_idx ON {runs} (queue, workflow, debounce_key) "
            "WHERE debounce_key IS NOT NULL AND status = 'scheduled' AND started_at IS NULL",
        )
        clear_park = CLEAR_PARK
        # reference §7 dueRuns, with the claim condition split out: due_free takes unclaimed and lapsed
        # runs; due_claimed lists live-by-time claims so the caller can keep those whose holder is dead.
        due_where = (
            f"(r.status = 'running' OR (r.status = 'scheduled' AND r.due_at <= :now) "
            f"OR (r.status = 'parked' AND (r.due_at <= :now OR EXISTS "
            f"(SELECT 1 FROM {entries} e WHERE e.run = r.run AND e.path = r.parked_path))))"
        )
        return cls(
            runs=runs,
            entries=entries,
            queues=queues,
            due_where=due_where,
            index_names=tuple(f"{prefix}_runs_{n}_idx" for n in ("entries_seq", "parked_token", "due", "created",
                                                                        "queue", "started", "dedup", "debounce")),
            ddl=ddl,
            admit=f"INSERT OR IGNORE INTO {runs} ({_ADMIT_COLUMNS}) VALUES ({_ADMIT_VALUES})",
            select_run=f"SELECT {RECORD_SELECT} FROM {runs} WHERE run = ?",
            # ?1 run, ?2 path, ?3 kind, ?4 decision, ?5 target, ?6 value, ?7 codec version, ?8 checksum, ?9 at
            append=f"INSERT OR IGNORE INTO {entries} "
            "(run, path, seq, entry_kind, decision, target, value, codec_version, checksum, written_at) "
            f"SELECT r.run, ?2, max(r.last_seq, ifnull((SELECT max(e.seq) FROM {entries} e "
            "WHERE e.run = r.run), 0)) + 1, ?3, ?4, ?5, ?6, ?7, ?8, ?9 "
            f"FROM {runs} r WHERE r.run = ?1 RETURNING seq",
            # ... and only while the run's claim is the execution's: ?10 holder, ?11 token
            append_fenced=f"INSERT OR IGNORE INTO {entries} "
            "(run, path, seq, entry_kind, decision, target, value, codec_version, checksum, written_at) "
            f"SELECT r.run, ?2, max(r.last_seq, ifnull((SELECT max(e.seq) FROM {entries} e "
            "WHERE e.run = r.run), 0)) + 1, ?3, ?4, ?5, ?6, ?7, ?8, ?9 "
            f"FROM {runs} r WHERE r.run = ?1 AND r.claim_holder = ?10 AND r.claim_fence = ?11 RETURNING seq",
            insert_entry=f"INSERT OR IGNORE INTO {entries} "
            "(run, path, seq, entry_kind, decision, target, value, codec_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            run_exists=f"SELECT 1 FROM {runs} WHERE run = ?",
            # the seq base of each run of a JSON array of ids, as one JSON object {run: base}: one statement
            # text whatever the count, and one row to fetch
            # ... each as [base, claim holder, fencing token]
            seq_bases=f"SELECT json_group_object(r.run, json_array(max(r.last_seq, ifnull((SELECT max(e.seq) "
            f"FROM {entries} e WHERE e.run = r.run), 0)), r.claim_holder, ifnull(r.claim_fence, 0))) "
            f"FROM {runs} r WHERE r.run IN (SELECT value FROM json_each(?))",
            raise_floor=f"UPDATE {runs} SET last_seq = max(last_seq, ifnull((SELECT max(seq) FROM {entries} "
            "WHERE run = ?1 AND seq < ?2), 0)) WHERE run = ?1",
            select_entry=f"SELECT {ENTRY_SELECT} FROM {entries} WHERE run = ? AND path = ?",
            select_entries=f"SELECT {ENTRY_SELECT} FROM {entries} WHERE run = ? ORDER BY seq",
            entry_mark=f"SELECT count(*), ifnull(max(seq), 0) FROM {entries} WHERE run = ?",
            truncate=f"DELETE FROM {entries} WHERE run = ? AND seq < ?",
            unappend=f"DELETE FROM {entries} WHERE run = ? AND path = ? AND seq = ?",
            complete_returning=f"UPDATE {runs} SET status = ?, result = ?, result_codec_version = ?, error = ?, "
            "collapsed_regions = ?, collapse_reasons = ?, replayed_steps = ?, due_at = NULL, "
            f"{clear_park}, claim_holder = NULL, claim_until = NULL, updated_at = ? WHERE run = ? "
            f"RETURNING {RECORD_SELECT}",
            complete_fenced=f"UPDATE {runs} SET status = ?, result = ?, result_codec_version = ?, error = ?, "
            "collapsed_regions = ?, collapse_reasons = ?, replayed_steps = ?, due_at = NULL, "
            f"{clear_park}, claim_holder = NULL, claim_until = NULL, updated_at = ? WHERE run = ? "
            f"AND claim_holder = ? AND claim_fence = ? RETURNING {RECORD_SELECT}",
            park=f"UPDATE {runs} SET status = 'parked', parked_path = ?, parked_resource = ?, parked_token = ?, "
            "parked_at = ?, parked_reason = ?, due_at = ?, claim_holder = NULL, claim_until = NULL, "
            "updated_at = ? WHERE run = ?",
            # a fenced park keeps the claim: the execution releases it once its body has unwound
            park_fenced=f"UPDATE {runs} SET status = 'parked', parked_path = ?, parked_resource = ?, "
            "parked_token = ?, parked_at = ?, parked_reason = ?, due_at = ?, updated_at = ? WHERE run = ? "
            "AND claim_holder = ? AND claim_fence = ?",
            unpark=f"UPDATE {runs} SET status = 'running', {clear_park}, due_at = NULL, updated_at = ? "
            "WHERE run = ? AND status = 'parked'",
            # reference §7 claimRun, verbatim but for the NULL holder (a row nobody ever claimed).
            # Every grant bumps the fencing token and hands it back. Reference §7 claimRun, but a live claim of
            # the same holder is not granted again (telo.journal.rules.may_claim).
            claim=f"UPDATE {runs} SET claim_holder = :holder, claim_until = :until, "
            "claim_fence = ifnull(claim_fence, 0) + 1 WHERE run = :run AND "
            "(claim_holder IS NULL OR claim_until IS NULL OR claim_until <= :now) "
            "RETURNING claim_fence",
            # taking over a dead holder's claim: compare-and-set on the holder text we judged dead
            claim_from=f"UPDATE {runs} SET claim_holder = :holder, claim_until = :until, "
            "claim_fence = ifnull(claim_fence, 0) + 1 WHERE run = :run AND claim_holder = :old "
            "RETURNING claim_fence",
            renew=f"UPDATE {runs} SET claim_until = :until WHERE run = :run AND {FENCED}",
            holder_of=f"SELECT claim_holder FROM {runs} WHERE run = ?",
            claim_of=f"SELECT claim_holder, ifnull(claim_fence, 0) FROM {runs} WHERE run = ?",
            release=f"UPDATE {runs} SET claim_holder = NULL, claim_until = NULL "
            "WHERE run = ? AND claim_holder = ?",
            release_fenced=f"UPDATE {runs} SET claim_holder = NULL, claim_until = NULL "
            "WHERE run = ? AND claim_holder = ? AND claim_fence = ?",
            # the first parked run in admission order, as the memory store's dict iteration finds it
            parked_on=f"SELECT {RECORD_SELECT} FROM {runs} WHERE parked_token = ? AND status = 'parked' "
            "ORDER BY rowid LIMIT 1",
            due_free=f"SELECT r.run, r.due_at FROM {runs} r WHERE {due_where} "
            "AND (r.claim_holder IS NULL OR r.claim_until IS NULL OR r.claim_until <= :now) "
            "ORDER BY r.due_at IS NOT NULL, r.due_at, r.run LIMIT :limit",
            due_claimed=f"SELECT r.run, r.due_at, r.claim_holder FROM {runs} r WHERE {due_where} "
            "AND r.claim_holder IS NOT NULL AND r.claim_until > :now",
        )

    def insert_entries(self, rows: int) -> str:
        """``INSERT OR IGNORE`` of ``rows`` entry rows at once (10 parameters each, ENTRY_COLUMNS order)."""
        text = _MULTI_INSERT.get((self.entries, rows))
        if text is None:
            values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * rows)
            text = _MULTI_INSERT[(self.entries, rows)] = (
                f"INSERT OR IGNORE INTO {self.entries} (run, path, seq, entry_kind, decision, target, value, "
                f"codec_version, checksum, written_at) VALUES {values}"
            )
        return text

    def admit_many(self, rows: int) -> str:
        """``INSERT OR IGNORE`` of ``rows`` admissions (16 parameters each), returning the runs inserted."""
        text = _MULTI_ADMIT.get((self.runs, rows))
        if text is None:
            values = ", ".join([f"({_ADMIT_VALUES})"] * rows)
            text = _MULTI_ADMIT[(self.runs, rows)] = (
                f"INSERT OR IGNORE INTO {self.runs} ({_ADMIT_COLUMNS}) VALUES {values} RETURNING run"
            )
        return text

    def complete_many(self, rows: int) -> str:
        """``complete`` of ``rows`` runs at once, 11 parameters each — run, status, result, its codec version,
        error, collapsed regions, collapse reasons, replayed steps, updated_at, then the fence's holder and
        token (NULL, NULL for an unfenced completion) — returning the records of those it settled."""
        text = _MULTI_COMPLETE.get((self.runs, rows))
        if text is None:
            values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * rows)
            text = _MULTI_COMPLETE[(self.runs, rows)] = (
                f"UPDATE {self.runs} SET status = v.column2, result = v.column3, result_codec_version = v.column4, "
                "error = v.column5, collapsed_regions = v.column6, collapse_reasons = v.column7, "
                f"replayed_steps = v.column8, due_at = NULL, {CLEAR_PARK}, claim_holder = NULL, "
                f"claim_until = NULL, updated_at = v.column9 FROM (VALUES {values}) AS v "
                f"WHERE {self.runs}.run = v.column1 AND (v.column10 IS NULL OR ({self.runs}.claim_holder = "
                f"v.column10 AND {self.runs}.claim_fence = v.column11)) RETURNING {RECORD_SELECT}"
            )
        return text

    def update(self, columns: Sequence[str], *, fenced: bool = False) -> str:
        sets = ", ".join(f"{c} = ?" for c in columns)
        return f"UPDATE {self.runs} SET {sets} WHERE run = ?" + (" AND claim_holder = ? AND claim_fence = ?"
                                                                  if fenced else "")

    def list_runs(self, status: bool, workflow: bool, since: bool, after: bool) -> str:
        where = ["1 = 1"]
        if status:
            where.append("status = :status")
        if workflow:
            where.append("workflow = :workflow")
        if since:
            where.append("ifnull(created_at, 0) >= :since")
        if after:
            where.append("(ifnull(created_at, 0), run) < (:after_created, :after_run)")
        return (
            f"SELECT {RECORD_SELECT} FROM {self.runs} WHERE {' AND '.join(where)} "
            "ORDER BY ifnull(created_at, 0) DESC, run DESC LIMIT :limit"
        )
