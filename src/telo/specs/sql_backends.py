"""The SQL backend modules, as upstream ships them: ``postgres`` (``Postgres``) and ``sqlite`` with its older name
``sql-sqlite`` (``SQLite``). Their ``Connection`` kinds extend ``Sql.Connection``, so every ``Sql.*`` statement and
``Sql.Transaction`` takes them (upstream-sql-and-scheduler.md).

Declarative schema (``Postgres.Table``/``Postgres.Schema``, and SQLite's) is not implemented yet: the kinds are
declared with upstream's fields so that a manifest using them loads, and each declaration is refused with what is
missing (``KindSpec.unimplemented``). Their schemas stay open — a field of upstream's that these facts do not list
adds no second error to that refusal.
"""

from __future__ import annotations

from typing import Any

from .common import compile_time, config, ms_or_duration, ref
from .model import KindSpec, ModuleSpec, module

PG, LITE = "Postgres", "SQLite"

# What Postgres.Connection defaults to where upstream's (node-postgres) defaults are not ours to copy.
DEFAULT_POOL_MAX = 10
DEFAULT_IDLE_TIMEOUT_MS = 10_000
DEFAULT_CONNECTION_TIMEOUT_MS = 30_000

_POOL = compile_time(
    type="object",
    description="The connection pool: `min` (default 1) connections kept open once the pool is opened, at most "
                "`max` (default 10) at once, `idleTimeoutMs` (default 10 s; 0 keeps them) before a connection "
                "above `min` unused is closed, `connectionTimeoutMs` (default 30 s; 0 waits for ever) that a "
                "statement or a transaction waits for a connection before it fails.",
    properties={
        "min": {"type": "integer", "minimum": 0, "default": 1,
                "description": "Connections the pool keeps open once opened."},
        "max": {"type": "integer", "minimum": 1, "default": DEFAULT_POOL_MAX,
                "description": "Connections open at once, at most: a statement or transaction beyond them waits."},
        "idleTimeoutMs": ms_or_duration(minimum=0, default=DEFAULT_IDLE_TIMEOUT_MS,
                                        description="How long a connection above `min` may stay unused before "
                                                    "it is closed (0: never)."),
        "connectionTimeoutMs": ms_or_duration(minimum=0, default=DEFAULT_CONNECTION_TIMEOUT_MS,
                                              description="How long a caller waits for a connection, opening one "
                                                          "included, before ERR_SQL_FAILED (0: no limit)."),
    },
    additionalProperties=False,
)

PG_CONNECTION = KindSpec(
    PG, "Connection",
    config(
        {
            "connectionString": compile_time(
                type="string", minLength=1,
                description="The database, `postgres://` or `postgresql://` (libpq's parameters pass through: "
                            "`?sslmode=require`, `verify-full` …). A password in it is never printed."),
            "pool": _POOL,
        },
        ("connectionString",),
    ),
    "provider", extends="Sql.Connection",
    description="A PostgreSQL database for `Sql.*` statements and transactions, through a pool of autocommit "
                "connections opened at the first statement (not at boot); a `Sql.Transaction` holds one of them "
                "for its duration. `durable-journal-postgres` takes it as `connection: !ref db`: a `Sql."
                "Transaction` on it is then journaled per step, inside the transaction (the journal keeps its own "
                "connections to the same database).",
    example="""\
kind: Postgres.Connection
metadata: { name: db }
connectionString: postgresql://app@localhost:5432/shop?sslmode=disable
pool: { max: 5, idleTimeoutMs: 30000 }
""",
)

LITE_CONNECTION = KindSpec(
    LITE, "Connection",
    config({"file": compile_time(
        type="string", minLength=1, **{"x-telo-type": "Telo.HostPath"},
        description="The database file, relative to the manifest's directory (its parent directory is created). "
                    "Omitted or `:memory:`: an in-memory database.")}),
    "provider", extends="Sql.Connection",
    description="A SQLite database for `Sql.*` statements and transactions. In memory (no `file`, or "
                "`:memory:`), the database lives in ONE connection this resource keeps open: every statement of "
                "the resource shares it, one at a time (a `Sql.Transaction` holds it until it ends), and it is "
                "gone when the application stops. A `durable-journal-sqlite` on the same file (`connection: !ref "
                "db`) journals a `Sql.Transaction` on it per step.",
    example="""\
kind: SQLite.Connection
metadata: { name: db }
file: ./data/shop.db
""",
)

# --- declarative schema: declared, not implemented --------------------------------------------------------------

_HINT = ("create the tables with a Sql.Exec (or Sql.Command) step — CREATE TABLE IF NOT EXISTS … — or with your "
         "migration tool")
_ANY = {"description": "Accepted as upstream writes it; the kind is not implemented."}


def _table(module: str) -> KindSpec:
    return KindSpec(
        module, "Table",
        config({
            "table": {"type": "string", "description": "The table's name."},
            "columns": {"type": "object", "additionalProperties": {"type": "object"},
                        "description": "Column name → `{type, primaryKey, nullable, unique, defaultExpression, "
                                       "…}`."},
            "indexes": {"type": "array", "description": "The table's indexes."},
            "foreignKeys": {"type": "array", "description": "The table's foreign keys."},
        }, additionalProperties=True),
        "provider",
        description=f"A table declared as data, reconciled by a `{module}.Schema`. **Not implemented by telo yet**: "
                    f"declaring one is ERR_KIND_NOT_IMPLEMENTED ({_HINT}).",
        example=f"""\
kind: {module}.Table
metadata: {{ name: orders }}
table: orders
columns:
  id: {{ type: text, primaryKey: true }}
  amount: {{ type: numeric, nullable: false }}
""",
        unimplemented="declarative schema", unimplemented_hint=_HINT,
    )


def _schema(module: str, extra: dict[str, Any]) -> KindSpec:
    return KindSpec(
        module, "Schema",
        config({
            "connection": ref(f"{module}.Connection", description="The database the schema is reconciled on."),
            **extra,
            "version": {"type": ["string", "integer"], "description": "The schema's version, recorded in the "
                                                                      "ledger."},
            "tables": {"type": "array", "items": ref(f"{module}.Table"),
                       "description": f"The `{module}.Table`s the schema holds."},
            "ledger": {**_ANY, "description": "Where applied versions and migrations are recorded."},
            "beforeMigrations": {**_ANY, "description": "Keyed imperative migrations run before reconciliation."},
            "migrations": {**_ANY, "description": "Keyed imperative migrations run after reconciliation."},
            "reclaim": {"type": "object", "description": "When a removed object is dropped: `{afterVersions, "
                                                         "afterDuration}` after its removal is recorded."},
        }, additionalProperties=True),
        "runnable",
        description="Reconciles the database with its tables, runs keyed migrations and reclaims removed objects "
                    "after a grace. **Not implemented by telo yet**: declaring one is ERR_KIND_NOT_IMPLEMENTED "
                    f"({_HINT}).",
        example=f"""\
kind: {module}.Schema
metadata: {{ name: schema }}
connection: !ref db
version: 3
tables: [!ref orders]
""",
        unimplemented="declarative schema and migrations", unimplemented_hint=_HINT,
    )


PG_TABLE = _table(PG)
PG_SCHEMA = _schema(PG, {"schema": {"type": "string", "default": "public",
                                    "description": "The PostgreSQL schema the tables live in."}})
LITE_TABLE = _table(LITE)
LITE_SCHEMA = _schema(LITE, {})

POSTGRES: ModuleSpec = module("postgres", PG, PG_CONNECTION, PG_TABLE, PG_SCHEMA)
SQLITE: ModuleSpec = module("sqlite", LITE, LITE_CONNECTION, LITE_TABLE, LITE_SCHEMA)
# The older module name: its Connection only (the same kind: one canonical `SQLite.Connection`).
SQL_SQLITE: ModuleSpec = module("sql-sqlite", LITE, LITE_CONNECTION)
