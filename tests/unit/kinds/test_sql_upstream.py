"""The ``sql`` module as upstream manifests write it (issue 19; upstream facts, "sql"): the statement in the
call's ``sql`` input — a ``!sql`` text whose ``${{ }}`` parts are bound, never spliced, or text with ``bindings`` —
results ``{rows, rowCount}``, ``Sql.Selection``, ``Sql.Transaction`` whose body is a ``!ref`` to a
``Run.Sequence`` (ambient membership per connection), and ``transaction:`` as a requirement
(ERR_ZONE_REQUIRED at run time and in ``telo check``). Each runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from telo.analysis import check
from telo.engine.dispatch import dispatch
from telo.errors import TeloError
from telo.kinds.controllers import load_application
from telo.kinds.sql_text import positional, render_bound, selection
from telo.manifest import SqlText, load_manifest
from telo.runtime.resource import as_invocable
from tests.pg_support import fresh_prefix, pg_url

MANIFEST = """\
kind: Telo.Application
metadata: { name: SqlUpstream }
imports: { Sql: sql, Run: run }
---
kind: Sql.Connection
metadata: { name: db }
url: "%(url)s"
---
kind: Sql.Command
metadata: { name: command }
connection: !ref db
---
kind: Sql.Query
metadata: { name: query }
connection: !ref db
---
kind: Sql.Command
metadata: { name: guarded }
connection: !ref db
transaction: !ref tx
---
kind: Sql.Selection
metadata: { name: pick }
connection: !ref db
from: %(table)s
columns: [name, qty]
where: [{ column: qty, op: gte, value: !cel "inputs.min" }]
orderBy: [{ column: qty, direction: desc }, name]
limit: !cel "inputs.limit"
---
kind: Run.Sequence
metadata: { name: body }
steps:
  - name: first
    invoke: !ref guarded
    inputs: { sql: !sql "INSERT INTO %(table)s (name, qty) VALUES (${{ inputs.name }}, 1)" }
  - name: second
    invoke: !ref guarded
    inputs: { sql: !sql "INSERT INTO %(table)s (name, qty) VALUES (${{ inputs.name + '-2' }}, ${{ inputs.qty }})" }
  - name: broken
    when: !cel "inputs.fail"
    invoke: !ref command
    inputs: { sql: "INSERT INTO no_such_table VALUES (1)" }
  - { name: count, invoke: !ref query, inputs: { sql: "SELECT count(*) AS n FROM %(table)s" } }
---
kind: Sql.Transaction
metadata: { name: tx }
connection: !ref db
steps: !ref body
"""


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, Path]:
    """``(driver, connection url, manifest)`` on a fresh table ``<table>`` (name TEXT, qty INTEGER)."""
    table = fresh_prefix()
    url = str(tmp_path / "shop.db") if request.param == "sqlite" else pg_url()
    path = tmp_path / "app.yaml"
    path.write_text(MANIFEST % {"url": url, "table": table})
    call(path, "command", {"sql": f"CREATE TABLE {table} (name TEXT, qty INTEGER)"})
    return request.param, table, path


def call(path: Path, resource: str, inputs: Any) -> Any:
    async def main() -> Any:
        app = load_application(path, env={})
        await app.start()
        try:
            return await dispatch(as_invocable(app.resources[resource]), inputs, events=app.events)
        finally:
            await app.close()

    return asyncio.run(main())


def names(path: Path, table: str) -> list[str]:
    found = call(path, "query", {"sql": f"SELECT name FROM {table} ORDER BY name"})
    return [r["name"] for r in found["rows"]]


# --- statements on both databases ---------------------------------------------------------------------------


def test_a_sql_text_binds_its_values_never_splices_them(db: tuple[str, str, Path]) -> None:
    _, table, path = db
    hostile = "x'); DROP TABLE " + table + "; --"
    text = f"INSERT INTO {table} (name, qty) VALUES (${{{{ inputs.name }}}}, ${{{{ inputs.qty }}}})"
    path.write_text(path.read_text() + "---\nkind: Run.Sequence\nmetadata: { name: insert }\nsteps:\n"
                    f"  - {{ name: one, invoke: !ref command, inputs: {{ sql: !sql \"{text}\" }} }}\n")
    call(path, "insert", {"name": hostile, "qty": 4})
    found = call(path, "query", {"sql": f"SELECT name, qty FROM {table}"})
    assert found == {"rows": [{"name": hostile, "qty": 4}], "rowCount": 1}  # stored as text; the table survives


def test_bindings_fill_hand_written_placeholders(db: tuple[str, str, Path]) -> None:
    driver, table, path = db
    mark = ["?", "?", "?"] if driver == "sqlite" else ["$1", "$2", "$1"]
    insert = f"INSERT INTO {table} (name, qty) VALUES ({mark[0]}, {mark[1]})"
    assert call(path, "command", {"sql": insert, "bindings": ["a", 3]}) == {"rows": [], "rowCount": 1}
    # a literal % beside parameters (psycopg would read it as a placeholder), and $1 used twice on PostgreSQL
    lookup = (f"SELECT name, '50%' AS pct, qty FROM {table} WHERE name = {mark[0]} AND qty > {mark[1]} - 1 "
              f"AND name = {mark[2]}")
    bindings = ["a", 3, "a"] if driver == "sqlite" else ["a", 3]
    assert call(path, "query", {"sql": lookup, "bindings": bindings}) == {
        "rows": [{"name": "a", "pct": "50%", "qty": 3}], "rowCount": 1}
    update = f"UPDATE {table} SET qty = qty + 1 WHERE qty >= {mark[0]}"
    assert call(path, "command", {"sql": update, "bindings": [0]})["rowCount"] == 1


def test_a_selection_builds_its_select_from_data(db: tuple[str, str, Path]) -> None:
    _, table, path = db
    for name, qty in (("a", 1), ("b", 5), ("c", 5), ("d", 9)):
        call(path, "command", {"sql": f"INSERT INTO {table} (name, qty) VALUES ('{name}', {qty})"})
    found = call(path, "pick", {"min": 5, "limit": 2})
    assert found == {"rows": [{"name": "d", "qty": 9}, {"name": "b", "qty": 5}], "rowCount": 2}


def test_a_transaction_whose_body_is_a_sequence_commits_or_rolls_back_together(db: tuple[str, str, Path]) -> None:
    _, table, path = db
    out = call(path, "tx", {"name": "ok", "qty": 2, "fail": False})
    assert out["count"]["result"]["rows"][0]["n"] == 2  # the sequence's result (its steps) is the transaction's
    with pytest.raises(TeloError) as failed:
        call(path, "tx", {"name": "undone", "qty": 3, "fail": True})
    assert failed.value.code == "ERR_SQL_FAILED"
    assert names(path, table) == ["ok", "ok-2"]  # the failed body's two inserts were rolled back with it


def test_a_sql_text_in_the_declaration_is_bound_per_call(db: tuple[str, str, Path]) -> None:
    """`sql: !sql` in the declaration sent the repr of a Python object to the database."""
    _, table, path = db
    path.write_text(path.read_text() + "---\nkind: Sql.Query\nmetadata: { name: byName }\nconnection: !ref db\n"
                    f"sql: !sql \"SELECT name, qty FROM {table} WHERE name = ${{{{ inputs.name }}}}\"\n"
                    "---\nkind: Sql.Query\nmetadata: { name: constant }\nconnection: !ref db\n"
                    "sql: !sql \"SELECT 7 AS seven\"\n")
    call(path, "command", {"sql": f"INSERT INTO {table} (name, qty) VALUES ('a''b', 2)"})
    assert call(path, "byName", {"name": "a'b"}) == {"rows": [{"name": "a'b", "qty": 2}], "rowCount": 1}
    assert call(path, "constant", {}) == {"rows": [{"seven": 7}], "rowCount": 1}


def test_a_statement_requiring_a_transaction_refuses_to_run_outside_one(db: tuple[str, str, Path]) -> None:
    _, table, path = db
    with pytest.raises(TeloError) as refused:
        call(path, "guarded", {"sql": f"INSERT INTO {table} (name, qty) VALUES ('x', 1)"})
    assert refused.value.code == "ERR_ZONE_REQUIRED" and "'db'" in refused.value.message
    assert names(path, table) == []


# --- telo check ---------------------------------------------------------------------------------------------


def test_telo_check_reports_a_path_reaching_a_required_transactions_statement_outside_one(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    text = MANIFEST % {"url": str(tmp_path / "x.db"), "table": "t"}
    path.write_text(text)
    assert [d for d in check(path) if d.severity == "error"] == []  # reached only inside `tx`: fine
    path.write_text(text.replace("imports: { Sql: sql, Run: run }",
                                 "imports: { Sql: sql, Run: run }\ntargets: [!ref outside]")
                    + "---\nkind: Run.Sequence\nmetadata: { name: outside }\nsteps:\n"
                      "  - { name: direct, invoke: !ref body }\n")
    [d] = [d for d in check(path) if d.severity == "error"]
    assert d.code == "ERR_ZONE_REQUIRED"
    # a target that is also a transaction's body: run at boot outside the transaction (was not reported)
    path.write_text(text.replace("imports: { Sql: sql, Run: run }", "imports: { Sql: sql, Run: run }\n"
                                 "targets: [!ref body]"))
    [target] = [d for d in check(path) if d.severity == "error"]
    assert target.code == "ERR_ZONE_REQUIRED" and "targets → Run.Sequence 'body' → Sql.Command 'guarded'" in \
        target.message
    path.write_text(text.replace("imports: { Sql: sql, Run: run }", "imports: { Sql: sql, Run: run }\n"
                                 "targets: [!ref outside]")
                    + "---\nkind: Run.Sequence\nmetadata: { name: outside }\nsteps:\n"
                      "  - { name: direct, invoke: !ref body }\n")
    [d] = [d for d in check(path) if d.severity == "error"]
    assert d.code == "ERR_ZONE_REQUIRED"
    assert "Sql.Command 'guarded' requires a Sql.Transaction on connection 'db'" in d.message
    assert "targets → Run.Sequence 'outside' → Run.Sequence 'body' → Sql.Command 'guarded'" in d.message
    assert d.pos is not None and d.pos.line == text.count("\n") + 6  # `outside`'s step: it needs the transaction


# --- text ---------------------------------------------------------------------------------------------------


def test_the_sql_tag_reads_its_interpolations_as_parameters(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text('kind: Telo.Application\nmetadata: { name: A }\nimports: { Run: run }\n---\n'
                    'kind: Run.Value\nmetadata: { name: v }\nvalue:\n'
                    '  bound: !sql "SELECT * FROM t WHERE a = ${{ inputs.a }} AND b = \'${{ x }}\'"\n'
                    '  plain: !sql "SELECT 1"\n'
                    '  whole: !sql "${{ inputs.q }}"\n')
    value = load_manifest(path, env={}).resources["v"].config["value"]
    assert isinstance(value["bound"], SqlText)
    assert [p if isinstance(p, str) else p.text for p in value["bound"].parts] == [
        "SELECT * FROM t WHERE a = ", "inputs.a", " AND b = '", "x", "'"]
    assert value["plain"] == {"text": ["SELECT 1"], "bindings": []}
    assert [p if isinstance(p, str) else p.text for p in value["whole"].parts] == ["", "inputs.q", ""]


def test_placeholders_in_each_drivers_style() -> None:
    bound = {"text": ["SELECT '5%' WHERE a = ", " AND b = ", ""], "bindings": [1, "x"]}
    assert render_bound("sqlite", bound) == ("SELECT '5%' WHERE a = ? AND b = ?", [1, "x"])
    assert render_bound("postgres", bound) == ("SELECT '5%%' WHERE a = %s AND b = %s", [1, "x"])
    assert render_bound("postgres", {"text": ["SELECT '5%'"], "bindings": []}) == ("SELECT '5%'", [])
    # $n inside quotes, identifiers, comments and dollar-quoted bodies is text, not a placeholder
    sql = ("SELECT $2, '$1', \"$1\", $$ $1 $$, $f$ $2 $f$ -- $1\n"
           "/* $2 */ FROM t WHERE a = $1 AND b LIKE '%x'")
    assert positional("postgres", sql, ["A", "B"], "q") == (
        "SELECT %s, '$1', \"$1\", $$ $1 $$, $f$ $2 $f$ -- $1\n/* $2 */ FROM t WHERE a = %s AND b LIKE '%%x'",
        ["B", "A"])
    with pytest.raises(TeloError, match=r"uses \$3, but `bindings` has 2"):
        positional("postgres", "SELECT $3", [1, 2], "q")
    # from review: an E'' literal's backslash-escaped quote, an identifier holding a $, bindings with no $n
    assert positional("postgres", "SELECT E'it\\'s $1' AS a, $1 AS b", ["x"], "q") == (
        "SELECT E'it\\'s $1' AS a, %s AS b", ["x"])
    assert positional("postgres", "SELECT price$1 FROM t WHERE id = $1", [7], "q") == (
        "SELECT price$1 FROM t WHERE id = %s", [7])
    with pytest.raises(TeloError, match=r"`bindings` has 1 value\(s\), but the statement has no \$n"):
        positional("postgres", "SELECT * FROM t WHERE id = 5", [7], "q")


def test_a_selection_quotes_identifiers_and_binds_every_value() -> None:
    text, params = selection("postgres", {
        "from": "shop.orders", "columns": ["id", "total"], "distinctOn": ["id"],
        "where": [{"column": "status", "op": "in", "value": ["open", "held"]},
                  {"column": "note", "op": "is_null"}, {"column": "name", "op": "ilike", "value": "%a%"}],
        "orderBy": ["id"], "limit": 5, "offset": 10}, "s")
    assert text == ('SELECT DISTINCT ON ("id") "id", "total" FROM "shop"."orders" WHERE "status" IN (%s, %s) '
                    'AND "note" IS NULL AND "name" ILIKE %s ORDER BY "id" LIMIT %s OFFSET %s')
    assert params == ["open", "held", "%a%", 5, 10]
    text, _ = selection("sqlite", {"from": "t", "where": [{"column": "n", "op": "ilike", "value": "a"},
                                                          {"column": "k", "op": "in", "value": []}]}, "s")
    assert text == 'SELECT * FROM "t" WHERE "n" LIKE ? AND 1 = 0'
    for bad in ({"from": "t; DROP TABLE t"}, {"from": "t", "columns": ["a, b"]},
                {"from": "t", "where": [{"column": "a", "op": "between", "value": 1}]}):
        with pytest.raises(TeloError) as refused:
            selection("sqlite", bad, "s")
        assert refused.value.code == "ERR_SQL_PARAM_INVALID"


# --- a !ref body inside a durable run -----------------------------------------------------------------------

DURABLE = """\
kind: Telo.Application
metadata: { name: SqlRefBody }
imports: { Sql: sql, Run: run, Local: durable-local, Journal: durable-journal-sqlite }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./journal.db
---
kind: Sql.Connection
metadata: { name: db }
url: "%(url)s"
---
kind: Sql.Command
metadata: { name: command }
connection: !ref db
transaction: !ref tx
---
kind: Run.Sequence
metadata: { name: body }
steps:
  - { name: ddl, invoke: !ref command, inputs: { sql: "CREATE TABLE IF NOT EXISTS items (name TEXT)" } }
  - { name: row, invoke: !ref command, inputs: { sql: !sql "INSERT INTO items VALUES (${{ inputs.name }})" } }
---
kind: Sql.Transaction
metadata: { name: tx }
connection: !ref db
steps: !ref body
---
kind: Local.Workflow
metadata: { name: wf }
journal: !ref runs
runId: "r"
steps:
  - { name: tx, invoke: !ref tx, inputs: { name: one } }
"""


@pytest.mark.parametrize("same_file", [True, False], ids=["journal-file", "other-file"])
def test_a_ref_body_is_journaled_per_step_on_the_journals_file_and_collapses_elsewhere(
        tmp_path: Path, same_file: bool) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(DURABLE % {"url": "./journal.db" if same_file else "./other.db"})

    async def main() -> tuple[str, list[str], int]:
        app = load_application(path, env={})
        await app.start()
        try:
            wf: Any = app.resources["wf"]
            await dispatch(wf, {}, events=app.events)
            await app.wait_holds()
            record = wf.journal.store.read_run("r")
            return record.status, [e.path for e in wf.journal.store.read_entries("r")], record.collapsed_regions
        finally:
            await app.close()

    status, paths, collapsed = asyncio.run(main())
    assert status == "completed"
    inside = [p for p in paths if p.startswith("steps/tx/")]
    if same_file:
        assert collapsed == 0
        assert "steps/tx/body/ddl" in inside and "steps/tx/body/row" in inside  # each statement journaled
    else:
        assert collapsed == 1 and inside == ["steps/tx/inputs"]
