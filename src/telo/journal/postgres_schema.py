"""The PostgreSQL journal's tables and their DDL (reference §7 "Postgres journal", "DDL and races").

The two tables keep the upstream shape column for column, so a journal written by the Node runtime reads here
and one written here reads there. telo adds extension columns to ``<prefix>_runs`` (see
:data:`RUN_EXTENSION_COLUMNS`) and two to ``<prefix>_entries`` (``checksum``, ``written_at``: the entry's
``Entry.at``); they are nullable, so upstream writers that do not know them keep working (their rows read
NULL: unchecked, no time), and they are added with ``ALTER TABLE … ADD COLUMN`` when an upstream-created (or
older telo's) table lacks them. One table is telo's alone, ``<prefix>_queues``: the queue limits ``telo queues
set`` overrides (issue 16, :mod:`telo.journal.postgres_queue_overrides`), which upstream never reads.

Names: the prefix is validated against ``^[A-Za-z_][A-Za-z0-9_]*$`` like upstream, which interpolates it into
SQL unquoted, so PostgreSQL folds it to lower case there. We quote every name with :class:`sql.Identifier` (no
injection whatever the input) but fold the prefix to lower case first, so ``table="MyJournal"`` names the
very tables — and the very NOTIFY channel — an upstream writer with the same setting uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import psycopg
from psycopg import sql

from telo.errors import Code, JournalError
from telo.journal.queue_overrides import table_ddl

_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_IDENTIFIER: Final = 63  # NAMEDATALEN - 1: PostgreSQL silently truncates longer names

# SQLSTATEs that mean "someone else created it first" (reference §7): duplicate_table, duplicate_object,
# unique_violation (two CREATE … IF NOT EXISTS racing on the catalog's unique index), duplicate_column.
RACE_SQLSTATES: Final = frozenset({"42P07", "42710", "23505", "42701"})
_CAUSE_DEPTH: Final = 8

# (column, type) in upstream order; [N] columns included. Types follow the reference's table list.
RUN_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("run", "TEXT PRIMARY KEY"),
    ("status", "TEXT NOT NULL"),
    ("due_at", "BIGINT"),
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
    ("claim_until", "BIGINT"),
)

# telo extensions (RunRecord fields upstream has no column for). All nullable: upstream rows read as NULL.
RUN_EXTENSION_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("parked_reason", "TEXT"),
    ("manifest_digest", "TEXT"),
    ("digest_scope", "TEXT"),
    ("workflow", "TEXT"),
    ("created_at", "BIGINT"),
    ("updated_at", "BIGINT"),
    ("epoch", "INTEGER"),
    ("claim_fence", "BIGINT"),  # the fencing token of the latest claim grant (telo.journal.claims)
    ("queue", "TEXT"),  # issue 16: the Local.Queue of a queued run (telo.journal.queues) ...
    ("queue_key", "TEXT"),  # ... and its concurrency key's value, evaluated once at admission
    ("priority", "BIGINT"),  # ... its priority (lower first; NULL reads 0), evaluated once at admission
    ("started_at", "BIGINT"),  # ... and its first grant's time on the database's clock: the start a rateLimit counts
    ("dedup_key", "TEXT"),  # issue 16 step 4 (telo.journal.keyed): its dedupKey or singleton key ...
    ("debounce_key", "TEXT"),  # ... or its debounce key, evaluated once at admission
)

ENTRY_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("run", "TEXT NOT NULL"),
    ("path", "TEXT NOT NULL"),
    ("seq", "BIGSERIAL"),
    ("entry_kind", "TEXT NOT NULL"),
    ("decision", "TEXT"),
    ("target", "TEXT"),
    ("value", "TEXT"),
    ("codec_version", "INTEGER"),
    ("checksum", "BIGINT"),  # telo extension: CRC-32 of the entry (telo.journal.integrity); NULL = unchecked
    ("written_at", "BIGINT"),  # telo extension: Entry.at, epoch ms the store wrote it; NULL = not recorded
)

# Columns an older table may lack and that ALTER may add (never a key or NOT NULL column: a populated table
# cannot gain one of those, and every upstream version already has them).
_ADDABLE_RUN: Final = RUN_COLUMNS[2:] + RUN_EXTENSION_COLUMNS
_ADDABLE_ENTRY: Final = tuple(c for c in ENTRY_COLUMNS
                              if c[0] in ("decision", "target", "value", "codec_version", "checksum", "written_at"))


@dataclass(frozen=True, slots=True)
class Names:
    """Every SQL name derived from one prefix."""

    prefix: str
    runs: str
    entries: str
    channel: str

    @property
    def runs_id(self) -> sql.Identifier:
        return sql.Identifier(self.runs)

    @property
    def entries_id(self) -> sql.Identifier:
        return sql.Identifier(self.entries)

    @property
    def queues(self) -> str:
        """telo's own table (issue 16): the queue limits ``telo queues set`` overrides
        (:mod:`telo.journal.postgres_queue_overrides`); upstream never reads it."""
        return f"{self.prefix}_queues"

    def index_names(self) -> tuple[str, ...]:
        # The seq index's name says "runs" although it indexes the entries table: that is upstream's name.
        return (
            f"{self.prefix}_runs_entries_seq_idx",
            f"{self.prefix}_runs_parked_token_idx",
            f"{self.prefix}_runs_due_idx",
            f"{self.prefix}_runs_created_idx",
            f"{self.prefix}_runs_queue_idx",  # telo extension (issue 16)
            f"{self.prefix}_runs_started_idx",  # telo extension (issue 16): a rateLimit's window
            f"{self.prefix}_runs_dedup_idx",  # telo extensions (issue 16 step 4): one live run per dedup key ...
            f"{self.prefix}_runs_debounce_idx",  # ... and one unstarted run per debounce key
        )


def names_for(table: str, notify_channel: str | None) -> Names:
    """Validate the prefix (and channel) and derive the table, index and channel names."""
    for what, value in (("table", table), ("notify_channel", notify_channel)):
        if value is not None and not _NAME.fullmatch(value):
            raise JournalError(
                Code.JOURNAL_CONFIG_INVALID,
                f"the PostgreSQL journal {what} {value!r} is not a plain SQL name",
                hint="use letters, digits and underscores, not starting with a digit (^[A-Za-z_][A-Za-z0-9_]*$)",
                data={what: value},
            )
    prefix = table.lower()
    names = Names(prefix, f"{prefix}_runs", f"{prefix}_entries", (notify_channel or f"{prefix}_wake").lower())
    longest = max((names.runs, names.entries, names.channel, *names.index_names()), key=len)
    if len(longest) > _MAX_IDENTIFIER:
        raise JournalError(
            Code.JOURNAL_CONFIG_INVALID,
            f"the PostgreSQL journal prefix {table!r} is too long: {longest!r} exceeds {_MAX_IDENTIFIER} "
            f"characters and PostgreSQL would truncate it",
            hint="choose a prefix of at most 40 characters",
            data={"table": table},
        )
    return names


def is_race(exc: BaseException) -> bool:
    """True when ``exc`` (or a cause up to 8 levels down) carries a concurrent-create SQLSTATE."""
    seen: BaseException | None = exc
    for _ in range(_CAUSE_DEPTH):
        if seen is None:
            return False
        if getattr(seen, "sqlstate", None) in RACE_SQLSTATES:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _execute_tolerating_race(conn: psycopg.Connection[Any], stmt: sql.Composed) -> None:
    try:
        conn.execute(stmt)
    except psycopg.Error as exc:
        if not is_race(exc):
            raise


def _column_list(columns: tuple[tuple[str, str], ...]) -> sql.Composable:
    return sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(t)) for n, t in columns)


def _existing_columns(conn: psycopg.Connection[Any], table: str) -> set[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = %s",
        (table,),
    ).fetchall()
    return {str(r[0]) for r in rows}


def missing_columns(conn: psycopg.Connection[Any], names: Names) -> dict[str, list[str]]:
    """Columns telo needs that the tables lack; a missing table reports all of its columns."""
    out: dict[str, list[str]] = {}
    for table, wanted in (
        (names.runs, RUN_COLUMNS + RUN_EXTENSION_COLUMNS),
        (names.entries, ENTRY_COLUMNS),
    ):
        have = _existing_columns(conn, table)
        gaps = [n for n, _ in wanted if n not in have]
        if gaps:
            out[table] = gaps
    return out


def _existing_relations(conn: psycopg.Connection[Any], names: tuple[str, ...]) -> set[str]:
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relname = ANY(%s)",
        (list(names),),
    ).fetchall()
    return {str(r[0]) for r in rows}


def ensure_schema(conn: psycopg.Connection[Any], names: Names) -> None:
    """Create the tables and indexes, and add any missing column, so concurrent callers all succeed.

    Only what is missing is created: even ``CREATE INDEX IF NOT EXISTS`` takes a SHARE lock on its table
    before it finds the index exists, so opening a journal would otherwise wait behind every open write
    transaction on it (and make new writers queue behind that wait). ``conn`` is in autocommit mode: each
    statement commits alone, so one that loses a race (and is tolerated) does not abort the ones after it.
    """
    runs, entries = names.runs_id, names.entries_id
    index_names = names.index_names()
    existing = _existing_relations(conn, (names.runs, names.entries, names.queues, *index_names))
    if names.runs not in existing:
        _execute_tolerating_race(
            conn, sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(runs, _column_list(RUN_COLUMNS))
        )
    if names.entries not in existing:
        _execute_tolerating_race(
            conn,
            sql.SQL("CREATE TABLE IF NOT EXISTS {} ({}, PRIMARY KEY (run, path))").format(
                entries, _column_list(ENTRY_COLUMNS)
            ),
        )
    # Only what information_schema reports missing: an upstream-created table gains telo's columns, and a
    # table that has them is not touched (ALTER TABLE takes an ACCESS EXCLUSIVE lock).
    for table, ident, addable in ((names.runs, runs, _ADDABLE_RUN), (names.entries, entries, _ADDABLE_ENTRY)):
        have = _existing_columns(conn, table)
        for column, type_ in addable:
            if column not in have:
                _execute_tolerating_race(
                    conn,
                    sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} {}").format(
                        ident, sql.Identifier(column), sql.SQL(type_)
                    ),
                )
    if names.queues not in existing:  # telo extension (issue 16): `telo queues set` overrides
        quoted = sql.Identifier(names.queues).as_string(None)
        _execute_tolerating_race(conn, sql.SQL(table_ddl(quoted, "BIGINT")))  # type: ignore[arg-type]
    seq_idx, token_idx, due_idx, created_idx, queue_idx, started_idx, dedup_idx, debounce_idx = (
        sql.Identifier(n) for n in index_names)
    wanted = (
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (run, seq)").format(seq_idx, entries),
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (parked_token) WHERE parked_token IS NOT NULL").format(
            token_idx, runs
        ),
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (status, due_at)").format(due_idx, runs),
        # telo extension: serves list_runs' order (newest first, ids in code-point order like Python).
        sql.SQL('CREATE INDEX IF NOT EXISTS {} ON {} ((COALESCE(created_at, 0)) DESC, run COLLATE "C" DESC)').format(
            created_idx, runs
        ),
        # telo extension (issue 16): a queue's runs, counted and picked by every queued claim
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (queue, status) WHERE queue IS NOT NULL").format(queue_idx, runs),
        # ... and the starts a rateLimit counts in its window (only queued runs record started_at)
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (queue, started_at) WHERE started_at IS NOT NULL").format(
            started_idx, runs),
        # ... one live run per dedup key of a queue, one unstarted run per debounce key of a queue's workflow:
        # what racing admissions cannot double (telo.journal.keyed)
        sql.SQL("CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} (queue, dedup_key) WHERE dedup_key IS NOT NULL "
                "AND status IN ('scheduled', 'running', 'parked')").format(dedup_idx, runs),
        sql.SQL("CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} (queue, workflow, debounce_key) WHERE debounce_key IS "
                "NOT NULL AND status = 'scheduled' AND started_at IS NULL").format(debounce_idx, runs),
    )
    for name, stmt in zip(index_names, wanted, strict=True):
        if name not in existing:
            _execute_tolerating_race(conn, stmt)
