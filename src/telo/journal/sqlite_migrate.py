"""The SQLite journal's schema versions, and how a journal of an older one is upgraded in place (the tables,
columns and indexes themselves are :mod:`telo.journal.sqlite_schema`'s).

The schema version lives in ``PRAGMA user_version``; tables and indexes are created with ``IF NOT EXISTS``
inside ``BEGIN IMMEDIATE``, so two processes opening a fresh file at once serialise on SQLite's write lock and
the second one finds everything in place. What each version added:

- 2: the runs' ``claim_fence`` (:mod:`telo.journal.claims`; NULL reads as token 0);
- 3: the entries' ``checksum`` (:mod:`telo.journal.integrity`; NULL: written without one);
- 4: the entries' ``written_at`` (``Entry.at``, epoch ms from the store's clock; NULL: no time);
- 5: the runs' ``queue`` and ``queue_key`` and their index (issue 16, :mod:`telo.journal.queues`; NULL: a run
  of no queue);
- 6: the runs' ``priority`` and ``started_at`` and the index of the starts a queue's ``rateLimit`` counts
  (issue 16, docs/proposals/admission-control.md step 3; NULL: priority 0, never started by a queued grant);
- 7: the table ``<prefix>_queues`` of the limits ``telo queues set`` overrides (issue 16,
  :mod:`telo.journal.sqlite_queue_overrides`; created empty: every queue has its manifest's limits); the runs'
  ``dedup_key`` and ``debounce_key`` and their unique partial indexes (issue 16 step 4, :mod:`telo.journal.keyed`;
  NULL: a run admitted with no such key).

An older journal gains the missing columns (``ALTER TABLE … ADD COLUMN``, every one nullable, so its rows read as
the list above says) and indexes the first time this telo opens it; a journal of a newer version is refused
(``ERR_JOURNAL_SCHEMA_NEWER``) rather than written in a shape this telo does not know.
"""

from __future__ import annotations

import sqlite3

from telo.errors import Code, JournalError
from telo.journal.sqlite_schema import ENTRY_COLUMNS, RUN_COLUMNS, SCHEMA_VERSION, Sql


def create_schema(conn: sqlite3.Connection, sql: Sql, path: str) -> None:
    """Create the tables and indexes if missing, upgrade an older journal, and record the schema version (see
    the module docstring).

    A journal that is already complete is only read: opening a store must not wait for the write lock,
    which a running transaction may hold for a while.
    """
    if _schema_version(conn, path) == SCHEMA_VERSION and _complete(conn, sql):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _schema_version(conn, path)
        for stmt in sql.ddl[:2]:  # the tables, then their missing columns, then the indexes (which may use them)
            conn.execute(stmt)
        for table, columns in ((sql.runs, RUN_COLUMNS), (sql.entries, ENTRY_COLUMNS)):
            have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            for name, kind in columns:
                if name not in have:  # a journal of an older schema version (see the module docstring)
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        for stmt in sql.ddl[2:]:
            conn.execute(stmt)
        if version < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _schema_version(conn: sqlite3.Connection, path: str) -> int:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise JournalError(
            Code.JOURNAL_SCHEMA_NEWER,
            f"the SQLite journal {path!r} has schema version {version}; this telo knows up to {SCHEMA_VERSION}",
            hint="upgrade telo to open this journal",
            data={"path": path, "version": version},
        )
    return version


def _complete(conn: sqlite3.Connection, sql: Sql) -> bool:
    wanted = {sql.runs, sql.entries, sql.queues, *sql.index_names}
    found = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")}
    return wanted <= found
