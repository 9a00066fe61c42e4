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

CONNECTION = KindSpec(M, "Connection",
                      config({"url": compile_time(type="string", minLength=1)}, ("url",)), "provider")

TRANSACTION = KindSpec(
    M, "Transaction",
    config(
        {
            "connection": ref("Sql.Connection"),
            "steps": steps(**{"x-telo-provides-zone": {"atomic": ATOMIC_REASON, "noSuspend": NO_SUSPEND_REASON}}),
            "inputs": runtime(type="object"),
        },
        ("connection", "steps"),
    ),
    "invocable",
)

_STATEMENT = config(
    {
        "connection": ref("Sql.Connection"),
        "sql": {"type": "string", "minLength": 1},
        "params": runtime(type=["array", "object"]),  # positional or named parameters
    },
    ("connection", "sql"),
)

QUERY = KindSpec(M, "Query", _STATEMENT, "invocable")
EXEC = KindSpec(M, "Exec", _STATEMENT, "invocable")

SQL: ModuleSpec = module("sql", M, CONNECTION, TRANSACTION, QUERY, EXEC)
