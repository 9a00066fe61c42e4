"""Module ``sql`` (library ``Sql``): connections, transactions and statements (reference §5, §7)."""

from __future__ import annotations

from .common import compile_time, config, input_type, output_type, ref, runtime, steps
from .model import KindSpec, ModuleSpec, module

M = "Sql"

ATOMIC_REASON = (
    "the body's writes commit or roll back together with the transaction; a journal on the same connection "
    "records inside it"
)
NO_SUSPEND_REASON = "an open database transaction cannot outlive the process, so its body may not park"
# Sql.Selection's comparisons (upstream's op names), each with its SQL operator
SELECTION_OPS = {"eq": "=", "ne": "<>", "lt": "<", "lte": "<=", "gt": ">", "gte": ">=", "like": "LIKE",
                 "ilike": "ILIKE", "in": "IN", "not_in": "NOT IN", "is_null": "IS NULL", "is_not_null": "IS NOT NULL"}

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
            "steps": steps(**{"x-telo-provides-zone": {"atomic": ATOMIC_REASON, "noSuspend": NO_SUSPEND_REASON},
                              "x-telo-steps-or-ref": True},
                           description="The body: a `!ref` to an executable (a `Run.Sequence` or any invocable, as "
                                       "upstream writes it; it gets the body's `inputs` and its result is the "
                                       "transaction's) or a list of steps (telo; the result is `{steps}`). Every "
                                       "statement it reaches on the same connection joins the transaction; it may "
                                       "not park."),
            "inputs": runtime(type="object", description="The body's `inputs`, evaluated from the call's."),
        },
        ("connection", "steps"),
    ),
    "invocable",
    description="Runs its body in one database transaction: committed when it succeeds, rolled back when it "
                "fails. Membership is ambient and per connection: statements reached through the body on the same "
                "connection join it (a nested `Sql.Transaction` on it is a SAVEPOINT); statements on another "
                "connection do not. On the journal's own database, the journal records inside it (exactly-once).",
    example="""\
kind: Sql.Transaction
metadata: { name: transfer }
connection: !ref db
steps: !ref moveMoney   # a Run.Sequence whose steps debit and credit
""",
)

_STATEMENT_FIELDS = {
    "connection": ref("Sql.Connection", description="The connection (inside a `Sql.Transaction` on it, the "
                                                    "statement joins the transaction)."),
    "transaction": ref("Sql.Transaction",
                       description="A requirement, not a binding: the statement must run inside a `Sql.Transaction` "
                                   "on its connection; outside one it fails with ERR_ZONE_REQUIRED, and `telo "
                                   "check` reports a path that reaches it outside one."),
    "inputs": runtime(type="object", description="Default call inputs (`sql`, `bindings`, or named parameters), "
                                                 "under the call's own."),
    "sql": {"type": ["string", "object"], "minLength": 1,
            "description": "telo: the statement, fixed in the declaration (upstream passes it as the call input "
                           "`sql`): a `!sql` text, whose `${{ expr }}` parts see the call's `inputs` and are bound; "
                           "or text with placeholders — SQLite `?` (positional) or `:name`, PostgreSQL `%s` or "
                           "`%(name)s` — filled from `params` or, without `params`, from the call's inputs."},
    "params": runtime(type=["array", "object"],  # positional or named parameters
                      description="telo: the fixed statement's parameters, a list (positional) or a mapping "
                                  "(named)."),
}
_CALL = """\
The call's inputs (upstream): `sql`, the statement — a string, or a `!sql` text whose `${{ expr }}` parts bind \
as parameters — and `bindings`, a list for hand-written placeholders (`?` on SQLite, `$1, $2…` on PostgreSQL), \
never combined with a `!sql` text."""

QUERY = KindSpec(M, "Query", config(_STATEMENT_FIELDS, ("connection",)), "invocable",
                 description="Runs a query and returns `{rows, rowCount}`: its rows as maps (column name → value) "
                             "and how many. " + _CALL,
                 example="""\
kind: Sql.Query
metadata: { name: findOrder }
connection: !ref db
# called as: { invoke: !ref findOrder, inputs: { sql: !sql "SELECT * FROM orders WHERE id = ${{ inputs.id }}" } }
""")
COMMAND = KindSpec(M, "Command", config(_STATEMENT_FIELDS, ("connection",)), "invocable",
                   description="Runs a statement without a row result (INSERT, UPDATE, DDL) and returns `{rows, "
                               "rowCount}`: `rowCount` is the affected-row count, `rows` empty unless the statement "
                               "returns rows (`RETURNING`). " + _CALL,
                   example="""\
kind: Sql.Command
metadata: { name: debit }
connection: !ref db
transaction: !ref transfer
inputs: { sql: "UPDATE accounts SET balance = balance - ? WHERE id = ?" }
""")
EXEC = KindSpec(M, "Exec", config(_STATEMENT_FIELDS, ("connection", "sql")), "invocable",
                description="telo's older spelling of `Sql.Command` with the statement fixed in `sql`; returns "
                            "`{rowcount}`.",
                example="""\
kind: Sql.Exec
metadata: { name: debitAccount }
connection: !ref db
sql: UPDATE accounts SET balance = balance - ? WHERE id = ?
params: [!cel "inputs.amount", !cel "inputs.id"]
""")

_CONDITION = {
    "type": "object",
    "properties": {
        "column": {"type": "string", "minLength": 1, "description": "A column (`name` or `table.name`)."},
        "op": {"enum": list(SELECTION_OPS), "default": "eq", "description": "The comparison."},
        "value": {"description": "The value, bound as a parameter (a list for `in`/`not_in`; none for "
                                 "`is_null`/`is_not_null`)."},
    },
    "required": ["column"],
    "additionalProperties": False,
}
_COLUMN_LIST = {"type": "array", "items": {"type": "string", "minLength": 1}}

SELECTION = KindSpec(
    M, "Selection",
    config(
        {
            "connection": _STATEMENT_FIELDS["connection"],
            "transaction": _STATEMENT_FIELDS["transaction"],
            "from": runtime(type="string", minLength=1, description="The table (or view), `name` or `schema.name`."),
            "columns": runtime(**_COLUMN_LIST, description="The columns; default every column (`*`)."),
            "distinct": runtime(type="boolean", default=False, description="SELECT DISTINCT."),
            "distinctOn": runtime(**_COLUMN_LIST, description="PostgreSQL's DISTINCT ON (these columns)."),
            "where": runtime(type="array", items=_CONDITION,
                             description="Conditions, all of which hold (AND); each value is a bound parameter."),
            "groupBy": runtime(**_COLUMN_LIST, description="GROUP BY these columns."),
            "having": runtime(type="array", items=_CONDITION, description="Conditions on the groups (AND)."),
            "orderBy": runtime(type="array", items={"anyOf": [
                {"type": "string", "minLength": 1},
                {"type": "object", "properties": {"column": {"type": "string", "minLength": 1},
                                                  "direction": {"enum": ["asc", "desc", "ASC", "DESC"]}},
                 "required": ["column"], "additionalProperties": False}]},
                description="ORDER BY: column names, or `{column, direction}`."),
            "limit": runtime(type="integer", minimum=0, description="At most this many rows."),
            "offset": runtime(type="integer", minimum=0, description="Skip this many rows first."),
            "inputType": input_type(),
            "outputType": output_type(),
        },
        ("connection", "from"),
    ),
    "invocable",
    description="A SELECT built from data — identifiers checked and quoted, every value bound as a parameter — "
                "returning `{rows, rowCount}` like `Sql.Query`. Fields may be CEL over the call's `inputs`.",
    example="""\
kind: Sql.Selection
metadata: { name: openOrders }
connection: !ref db
from: orders
columns: [id, amount]
where: [{ column: status, op: eq, value: open }, { column: amount, op: gte, value: !cel "inputs.min" }]
orderBy: [{ column: amount, direction: desc }]
limit: 10
""",
)

SQL: ModuleSpec = module("sql", M, CONNECTION, TRANSACTION, QUERY, COMMAND, EXEC, SELECTION)
