"""The journal modules (reference §7): each exports one ``Journal`` extending ``DurableLocal.Journal``.

All their fields are compile-time: a journal is opened once, at initialisation.
"""

from __future__ import annotations

from .common import NAME_PATTERN, compile_time, config, duration, exactly_one, ref
from .model import KindSpec, ModuleSpec, module

_CONTRACT = "DurableLocal.Journal"
# The lease of the claims an execution holds on its runs (telo.journal.claims): renewed every third of it; a
# holder silent for longer (paused, partitioned) loses the run to another worker. At least 1s.
_CLAIM_TTL = compile_time(**duration(default="60s"),
                          description="The lease of the claim a worker holds on a run (a duration string, at "
                                      "least 1s), renewed every third of it; a holder silent for longer loses the "
                                      "run to another worker and is fenced out. Keep it well above a live "
                                      "worker's pauses.")

FILE = KindSpec(
    "DurableJournalFile", "Journal",
    # One NDJSON file per run under `directory`, created recursively at init.
    config({"directory": compile_time(type="string", minLength=1, **{"x-telo-type": "Telo.HostPath"},
                                      description="The directory of the run files (created if missing), "
                                                  "relative to the manifest."),
            "claimTtl": _CLAIM_TTL},
           ("directory",)),
    "provider", extends=_CONTRACT,
    description="The upstream NDJSON journal: one file per run, named `encodeURIComponent(runId).ndjson` (a run "
                "id whose file name would pass 255 bytes is refused, ERR_DURABLE_RUN_ID_INVALID).",
    example="""\
kind: DurableJournalFile.Journal
metadata: { name: runs }
directory: .telo/runs
""",
)

SQLITE = KindSpec(
    "DurableJournalSqlite", "Journal",
    config(
        {
            "path": compile_time(type="string", minLength=1, **{"x-telo-type": "Telo.HostPath"},
                                 description="The database file (created if missing), relative to the manifest "
                                             "(or give `connection`)."),
            "connection": ref("Sql.Connection",  # a SQLite.Connection (or a Sql.Connection to a SQLite file)
                              description="A `SQLite.Connection` whose file holds the journal (or give `path`): "
                                          "a `Sql.Transaction` on it is journaled per step."),
            # FULL by default: a commit is on disk before a step is reported done (docs/design.md).
            "synchronous": compile_time(enum=["OFF", "NORMAL", "FULL", "EXTRA"], default="FULL",
                                        description="SQLite's `synchronous` pragma: `FULL` puts a commit on disk "
                                                    "before a step is reported done; lower levels trade that "
                                                    "for speed."),
            "claimTtl": _CLAIM_TTL,
        },
        oneOf=exactly_one("path", "connection"),
    ),
    "provider", extends=_CONTRACT,
    description="The embedded default journal: one SQLite file in WAL mode (exactly one of `path` or `connection`).",
    example="""\
kind: DurableJournalSqlite.Journal
metadata: { name: runs }
path: .telo/runs.db
""",
)

POSTGRES = KindSpec(
    "DurableJournalPostgres", "Journal",
    config(
        {
            "connection": ref("Sql.Connection",  # upstream: a Postgres.Connection (ours: a postgresql:// url too)
                              description="A `Postgres.Connection` to the database (or give `url`): the journal "
                                          "opens its own connections to it, and a `Sql.Transaction` on that "
                                          "connection is journaled per step, inside the transaction."),
            "url": compile_time(type="string", minLength=1,  # ours: connect without a Sql.Connection
                                description="A `postgresql://` URL (or give `connection`)."),
            "table": compile_time(type="string", pattern=NAME_PATTERN, default="telo_durable",
                                  description="The journal's table name."),
            "createTable": compile_time(type="boolean", default=True,
                                        description="Create the tables at start if they are missing."),
            "notifyChannel": compile_time(type="string", pattern=NAME_PATTERN,  # default `<table>_wake`
                                          description="The LISTEN/NOTIFY channel of wake-ups (default "
                                                      "`<table>_wake`)."),
            "claimTtl": _CLAIM_TTL,
        },
        oneOf=exactly_one("connection", "url"),
    ),
    "provider", extends=_CONTRACT,
    description="A PostgreSQL journal that many workers share (exactly one of `connection` or `url`); wake-ups "
                "travel by LISTEN/NOTIFY.",
    example="""\
kind: DurableJournalPostgres.Journal
metadata: { name: runs }
url: postgresql://telo@localhost:5432/telo
""",
)

JOURNAL_FILE: ModuleSpec = module("durable-journal-file", "DurableJournalFile", FILE)
JOURNAL_SQLITE: ModuleSpec = module("durable-journal-sqlite", "DurableJournalSqlite", SQLITE)
JOURNAL_POSTGRES: ModuleSpec = module("durable-journal-postgres", "DurableJournalPostgres", POSTGRES)
