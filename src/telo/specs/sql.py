"""Module ``sql`` (library ``Sql``): connections, transactions and statements (reference §5, §7)."""

from __future__ import annotations

from .common import compile_time, config, ref, runtime, steps
from .model import KindSpec, ModuleSpec, module

M = "Sql"

ATOMIC_REASON = (
    "the body's writes commit or roll back together with the transaction; a journal on the same connection "
    "records inside it"
)
NO_SUSPEND_REASON = "an open database transaction cannot outlive the process, so its body may not park"

CONNECTION = KindSpec(
    M, "Connection",
    config({"url": compile_time(type="string", minLength=1,
                                description="The database: `postgresql://…`, `sqlite:///absolute/path.db`, "
                                            "`sqlite:relative.db` or a plain path (relative to the manifest).")},
           ("url",)),
    "provider",
    description="A database connection for `Sql.*` statements (and the PostgreSQL journal).",
    example="""\
kind: Sql.Connection
metadata: { name: db }
url: sqlite:shop.db
""",
)

TRANSACTION = KindSpec(
    M, "Transaction",
    config(
        {
            "connection": ref("Sql.Connection", description="The connection the transaction runs on."),
            "steps": steps(**{"x-telo-provides-zone": {"atomic": ATOMIC_REASON, "noSuspend": NO_SUSPEND_REASON}},
                           description="Steps whose statements commit or roll back together; they may not park."),
            "inputs": runtime(type="object", description="The body's `inputs`, evaluated from the call's."),
        },
        ("connection", "steps"),
    ),
    "invocable",
    description="Runs its steps in one database transaction: committed when they succeed, rolled back when one "
                "fails. On the journal's own database, the journal records inside it (exactly-once).",
    example="""\
kind: Sql.Transaction
metadata: { name: transfer }
connection: !ref db
steps:
  - name: debit
    invoke: !ref debitAccount
    inputs: { id: !cel "inputs.from", amount: !cel "inputs.amount" }
""",
)

_STATEMENT = config(
    {
        "connection": ref("Sql.Connection", description="The connection (inside a `Sql.Transaction` on it, the "
                                                        "statement joins the transaction)."),
        "sql": {"type": "string", "minLength": 1,
                "description": "The SQL statement. Placeholders: SQLite `?` (positional) or `:name`; PostgreSQL "
                               "`%s` or `%(name)s`."},
        "params": runtime(type=["array", "object"],  # positional or named parameters
                          description="Its parameters: a list (positional) or a mapping (named)."),
    },
    ("connection", "sql"),
)

QUERY = KindSpec(M, "Query", _STATEMENT, "invocable",
                 description="Runs a query and returns its rows, a list of maps (column name → value).",
                 example="""\
kind: Sql.Query
metadata: { name: findOrder }
connection: !ref db
sql: SELECT * FROM orders WHERE id = ?
params: [!cel "inputs.id"]
""")
EXEC = KindSpec(M, "Exec", _STATEMENT, "invocable",
                description="Runs a statement that changes data; returns `{rowcount}`.",
                example="""\
kind: Sql.Exec
metadata: { name: debitAccount }
connection: !ref db
sql: UPDATE accounts SET balance = balance - ? WHERE id = ?
params: [!cel "inputs.amount", !cel "inputs.id"]
""")

SQL: ModuleSpec = module("sql", M, CONNECTION, TRANSACTION, QUERY, EXEC)
