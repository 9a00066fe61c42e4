"""The ``sql`` module's statements: ``Sql.Query``, ``Sql.Command``, ``Sql.Selection`` and telo's ``Sql.Exec``
(upstream facts, "sql"; spec §8 for how a transaction around them is journaled, :mod:`telo.kinds.sql`).

Where the statement comes from, in this order:

* ``sql:`` in the declaration (telo's form, kept): fixed text whose parameters are ``params:`` or, without
  them, the call's inputs (named ``:name``/``%(name)s`` placeholders);
* the call's ``sql`` input (upstream's form): a string with optional ``bindings`` (``?`` on SQLite, ``$n`` on
  PostgreSQL), or a ``!sql`` text's bound statement, whose values are parameters — never both.

The declaration's ``inputs:`` are defaults under the call's. ``transaction:`` is a requirement: outside a
``Sql.Transaction`` on the statement's connection the call fails with ERR_ZONE_REQUIRED (``telo check`` reports
the paths it can see, :mod:`telo.analysis`). Inside one, the statement runs on that transaction's connection.
Results: ``{rows, rowCount}`` (Query: the rows returned; Command: the rows affected), ``Sql.Exec``: ``{rowcount}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any

from telo.errors import Code, TeloError
from telo.kinds import sql_drivers as drivers
from telo.kinds.sql import Connection, OnConnection, open_transaction
from telo.kinds.sql_text import is_bound, positional, render_bound, selection
from telo.manifest import SqlText
from telo.runtime.contracts import contract_for
from telo.runtime.resource import Host

Rows = tuple[list[dict[str, Any]], int]
PARAM_INVALID = Code.SQL_PARAM_INVALID
_RELEASING: set[asyncio.Task[None]] = set()  # releases scheduled after a cancelled statement (held till done)


def _later(release: Coroutine[Any, Any, None]) -> None:
    task = asyncio.ensure_future(release)
    _RELEASING.add(task)
    task.add_done_callback(_RELEASING.discard)


class _OnConnection(OnConnection):
    """Shared by the statements: running one, under the ``transaction:`` requirement."""

    async def execute(self, text: str, params: Any, *, rows: bool) -> Rows:
        """Run ``text`` on the open transaction of the connection, or alone (committing on its own)."""
        conn = self.connection
        tx = open_transaction(conn)
        if tx is None and self.config.get("transaction") is not None:
            raise TeloError(Code.ZONE_REQUIRED, f"{self.where} requires a Sql.Transaction on connection "
                            f"{conn.name!r} and was called outside one",
                            hint="invoke it from the body of a Sql.Transaction on that connection",
                            data={"connection": conn.name})
        return await run_sql(conn, text, params, rows=rows)


async def run_sql(conn: Connection, text: str, params: Any, *, rows: bool) -> Rows:
    """Run ``text`` on the open transaction of ``conn``, or alone on a pooled connection (committing on its
    own): the statements', and a ``Durable.Consume`` SQL source's (telo.kinds.consume)."""
    tx = open_transaction(conn)
    if tx is not None:
        def on_tx() -> Rows:
            with tx.lock:
                return drivers.execute(tx.connection, text, params, rows=rows)

        return await asyncio.to_thread(on_tx)

    # waiting for a pooled connection must not hold one of the loop's worker threads: the holders need
    # them to run their statements and give theirs back (Connection.acquire)
    db = await conn.acquire()
    running = asyncio.ensure_future(asyncio.to_thread(drivers.execute, db, text, params, rows=rows))
    try:
        return await asyncio.shield(running)
    finally:
        if running.done():
            await conn.release(db)
        else:  # cancelled: the statement runs on in its thread (a driver call cannot be interrupted) — its
            # connection goes back when it ends, not now, or another holder would run on it at the same time
            running.add_done_callback(lambda _: _later(conn.release(db)))


class _Statement(_OnConnection):
    rows = True

    async def init(self) -> None:
        fixed = self.config.get("sql")
        # a `!sql` text in the declaration is a bound statement evaluated per call (its ${{ }} see `inputs`)
        self.bound_sql = self.field("sql") if isinstance(fixed, SqlText | Mapping) else None
        self.fixed_sql = str(fixed) if fixed is not None and self.bound_sql is None else None
        self.params = self.field("params")
        self.defaults = self.field("inputs")

    def statement(self, inputs: Any) -> tuple[str, Any]:
        """The statement text and its parameters for one call (module docstring)."""
        call = dict(inputs) if isinstance(inputs, Mapping) else {}
        if self.defaults is not None:
            defaults = self.defaults.evaluate(self.call_scope(inputs))
            if isinstance(defaults, Mapping):
                call = {**defaults, **call}
        if self.fixed_sql is not None:
            return self.fixed_sql, (self.params.evaluate(self.call_scope(inputs)) if self.params is not None
                                    else call)
        driver = self.connection.target.driver
        sql, bindings = call.get("sql"), call.get("bindings")
        if self.bound_sql is not None:
            if self.params is not None:
                raise TeloError(PARAM_INVALID, f"{self.where}: a !sql statement binds its own values; `params` "
                                "cannot be given beside it", hint="drop `params`")
            sql = self.bound_sql.evaluate(self.call_scope(inputs))
        if is_bound(sql):
            if bindings is not None:
                raise TeloError(PARAM_INVALID, f"{self.where}: a !sql statement binds its own values; `bindings` "
                                "cannot be given beside it", hint="drop `bindings`, or write the statement as text")
            return render_bound(driver, sql)
        if not isinstance(sql, str) or not sql.strip():
            raise TeloError(PARAM_INVALID, f"{self.where}: the call's inputs need `sql` (a statement, or a !sql "
                            f"text), got {type(sql).__name__ if sql is not None else 'none'}",
                            hint='invoke it with inputs: { sql: !sql "SELECT … WHERE id = ${{ inputs.id }}" }')
        if bindings is None:
            return sql, None
        if not isinstance(bindings, list):
            raise TeloError(PARAM_INVALID, f"{self.where}: `bindings` must be a list, got {type(bindings).__name__}")
        return positional(driver, sql, bindings, self.where)


class Query(_Statement):
    """``Sql.Query``: ``{rows, rowCount}`` — the rows as maps (column name → CEL value), and how many."""

    kind = "Sql.Query"

    async def invoke(self, inputs: Any) -> Any:
        found, _ = await self.execute(*self.statement(inputs), rows=True)
        return {"rows": found, "rowCount": len(found)}


class Command(_Statement):
    """``Sql.Command``: ``{rows, rowCount}`` — the affected-row count, rows only when the statement returns some."""

    kind = "Sql.Command"

    async def invoke(self, inputs: Any) -> Any:
        found, count = await self.execute(*self.statement(inputs), rows=True)
        return {"rows": found, "rowCount": count}


class Exec(_Statement):
    """``Sql.Exec`` (telo's older spelling of Sql.Command): ``{rowcount}`` of the statement."""

    kind = "Sql.Exec"
    rows = False

    async def invoke(self, inputs: Any) -> Any:
        _, rowcount = await self.execute(*self.statement(inputs), rows=False)
        return {"rowcount": rowcount}


_SELECTION_FIELDS = ("from", "columns", "distinct", "distinctOn", "where", "groupBy", "having", "orderBy", "limit",
                     "offset")


class Selection(_OnConnection):
    """``Sql.Selection``: a SELECT built from its fields (evaluated per call), ``{rows, rowCount}``."""

    kind = "Sql.Selection"

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self.contract = contract_for(app, config)  # inputType / outputType, checked at the dispatch chokepoint

    async def init(self) -> None:
        self.fields = {name: self.field(name) for name in _SELECTION_FIELDS if self.config.get(name) is not None}

    async def invoke(self, inputs: Any) -> Any:
        scope = self.call_scope(inputs)
        values = {name: field.evaluate(scope) for name, field in self.fields.items() if field is not None}
        text, params = selection(self.connection.target.driver, values, self.where)
        found, _ = await self.execute(text, params, rows=True)
        return {"rows": found, "rowCount": len(found)}
