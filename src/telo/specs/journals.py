"""The journal modules (reference §7): each exports one ``Journal`` extending ``DurableLocal.Journal``.

All their fields are compile-time: a journal is opened once, at initialisation.
"""

from __future__ import annotations

from .common import NAME_PATTERN, compile_time, config, duration, exactly_one, ref
from .model import KindSpec, ModuleSpec, module

_CONTRACT = "DurableLocal.Journal"
# The lease of the claims an execution holds on its runs (telo.journal.claims): renewed every third of it; a
# holder silent for longer (paused, partitioned) loses the run to another worker. At least 1s.
_CLAIM_TTL = compile_time(**duration(default="60s"))

FILE = KindSpec(
    "DurableJournalFile", "Journal",
    # One NDJSON file per run under `directory`, created recursively at init.
    config({"directory": compile_time(type="string", minLength=1, **{"x-telo-type": "Telo.HostPath"}),
            "claimTtl": _CLAIM_TTL},
           ("directory",)),
    "provider", extends=_CONTRACT,
)

SQLITE = KindSpec(
    "DurableJournalSqlite", "Journal",
    config(
        {
            "path": compile_time(type="string", minLength=1, **{"x-telo-type": "Telo.HostPath"}),
            # FULL by default: a commit is on disk before a step is reported done (docs/design.md).
            "synchronous": compile_time(enum=["OFF", "NORMAL", "FULL", "EXTRA"], default="FULL"),
            "claimTtl": _CLAIM_TTL,
        },
        ("path",),
    ),
    "provider", extends=_CONTRACT,
)

POSTGRES = KindSpec(
    "DurableJournalPostgres", "Journal",
    config(
        {
            "connection": ref("Sql.Connection"),  # upstream: a Postgres.Connection
            "url": compile_time(type="string", minLength=1),  # ours: connect without a Sql.Connection
            "table": compile_time(type="string", pattern=NAME_PATTERN, default="telo_durable"),
            "createTable": compile_time(type="boolean", default=True),
            "notifyChannel": compile_time(type="string", pattern=NAME_PATTERN),  # default `<table>_wake`
            "claimTtl": _CLAIM_TTL,
        },
        oneOf=exactly_one("connection", "url"),
    ),
    "provider", extends=_CONTRACT,
)

JOURNAL_FILE: ModuleSpec = module("durable-journal-file", "DurableJournalFile", FILE)
JOURNAL_SQLITE: ModuleSpec = module("durable-journal-sqlite", "DurableJournalSqlite", SQLITE)
JOURNAL_POSTGRES: ModuleSpec = module("durable-journal-postgres", "DurableJournalPostgres", POSTGRES)
