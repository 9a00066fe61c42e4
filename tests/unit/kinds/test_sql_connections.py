"""Upstream's connection kinds (issue 19; upstream facts, "postgres" and "sqlite"): ``Postgres.Connection`` with
its bounded pool, ``SQLite.Connection`` (a file, or one in-memory connection), both taken wherever a
``Sql.Connection`` is; the journals taking them as ``connection: !ref``; and ``Postgres.Table``/``Schema``
(and SQLite's), declared so manifests load and refused at each declaration.
"""

from __future__ import annotations

import asyncio
import logging
import os
import textwrap
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from telo.analysis import check
from telo.engine.dispatch import dispatch
from telo.errors import TeloError
from telo.kinds import sql_pool
from telo.kinds.controllers import load_application
from telo.kinds.sql_connections import PostgresConnection, SqliteConnection
from telo.manifest import ManifestLoadError
from telo.runtime.app import Application
from telo.runtime.resource import as_invocable
from telo.specs import BUILTIN_KINDS, BUILTIN_MODULES, conforms
from tests.pg_support import fresh_prefix, pg_url

T = TypeVar("T")
PASSWORD = "s3cr3t pw"  # a space: libpq quotes it whole when it refuses the string


def write(tmp_path: Path, body: str, *, imports: str = "") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "app.yaml"
    path.write_text(textwrap.dedent(f"""\
        kind: Telo.Application
        metadata: {{ name: Conn }}
        imports: {{ Sql: sql, Pg: postgres, Lite: sqlite, Py: python, Run: run{imports} }}
        variables:
          pg: {{ env: TELO_TEST_PG_URL, type: string, default: "postgresql://unused" }}
        ---
        """) + textwrap.dedent(body))
    return path


def with_app(path: Path, use: Callable[[Application], Awaitable[T]], *, static_checks: bool = True) -> T:
    async def main() -> T:
        app = load_application(path, env=dict(os.environ), static_checks=static_checks)
        await app.start()
        try:
            return await use(app)
        finally:
            await app.close()

    return asyncio.run(main())


async def call(app: Application, name: str, inputs: Any = None) -> Any:
    return await dispatch(as_invocable(app.resources[name]), inputs or {}, events=app.events)


# --- the module table and the loader -------------------------------------------------------------------------------


def test_the_modules_and_their_kinds_as_upstream_names_them() -> None:
    assert set(BUILTIN_MODULES["postgres"].kinds) == {"Connection", "Table", "Schema"}
    assert set(BUILTIN_MODULES["sqlite"].kinds) == {"Connection", "Table", "Schema"}
    assert set(BUILTIN_MODULES["sql-sqlite"].kinds) == {"Connection"}  # the older name: the connection only
    assert BUILTIN_MODULES["sql-sqlite"].kinds["Connection"] is BUILTIN_MODULES["sqlite"].kinds["Connection"]
    assert BUILTIN_MODULES["postgres"].canonical == "Postgres" and BUILTIN_MODULES["sqlite"].canonical == "SQLite"
    for kind in ("Postgres.Connection", "SQLite.Connection"):
        assert conforms(BUILTIN_KINDS[kind], "Sql.Connection", BUILTIN_KINDS)


def test_every_sql_connection_slot_takes_them_and_a_postgres_slot_refuses_sqlite(tmp_path: Path) -> None:
    path = write(tmp_path, """\
        kind: Lite.Connection
        metadata: { name: lite }
        ---
        kind: Pg.Connection
        metadata: { name: pg }
        connectionString: postgresql://app@localhost/shop
        ---
        kind: Sql.Exec
        metadata: { name: a }
        connection: !ref lite
        sql: SELECT 1
        ---
        kind: Sql.Query
        metadata: { name: b }
        connection: !ref pg
        ---
        kind: Sql.Transaction
        metadata: { name: c }
        connection: !ref pg
        steps: [{ name: x, invoke: !ref b, inputs: { sql: SELECT 1 } }]
        """)
    assert check(path) == []
    refused = write(tmp_path / "r", """\
        kind: Lite.Connection
        metadata: { name: lite }
        ---
        kind: Pg.Schema
        metadata: { name: schema }
        connection: !ref lite
        """)
    codes = [d.code for d in check(refused)]
    assert "ERR_MANIFEST_REFERENCE_KIND" in codes


@pytest.mark.parametrize("body, code", [
    ("kind: Pg.Connection\nmetadata: { name: db }\n", "ERR_MANIFEST_VALIDATION_FAILED"),  # connectionString required
    ("kind: Pg.Connection\nmetadata: { name: db }\nconnectionString: postgres://h/db\nhost: h\n",
     "ERR_MANIFEST_VALIDATION_FAILED"),  # no other fields
    ("kind: Pg.Connection\nmetadata: { name: db }\nconnectionString: postgres://h/db\npool: { size: 3 }\n",
     "ERR_MANIFEST_VALIDATION_FAILED"),
    ("kind: Pg.Connection\nmetadata: { name: db }\nconnectionString: postgres://h/db\npool: { max: 0 }\n",
     "ERR_MANIFEST_VALIDATION_FAILED"),
    ("kind: Lite.Connection\nmetadata: { name: db }\nurl: x.db\n", "ERR_MANIFEST_VALIDATION_FAILED"),
])
def test_the_connections_fields_are_checked_at_load(tmp_path: Path, body: str, code: str) -> None:
    assert code in [d.code for d in check(write(tmp_path, body))]


# --- Postgres.Connection: its string, its bounds, the password -------------------------------------------------


def pg_connection(tmp_path: Path, string: str, pool: str = "") -> PostgresConnection:
    path = write(tmp_path, f"kind: Pg.Connection\nmetadata: {{ name: db }}\nconnectionString: {string}\n{pool}")
    app = load_application(path, env=dict(os.environ))
    app.create_resources()
    conn = app.resources["db"]
    assert isinstance(conn, PostgresConnection)
    return conn


def test_the_pool_bounds_default_as_upstream_and_a_min_above_the_default_max_raises_it(tmp_path: Path) -> None:
    conn = pg_connection(tmp_path, "postgresql://app@localhost/shop")
    assert conn.bounds() == conn.bounds().__class__(1, 10, 10_000, 30_000)
    conn = pg_connection(tmp_path / "b", "postgres://app@localhost/shop",
                         "pool: { min: 12, idleTimeoutMs: 1m, connectionTimeoutMs: 0 }\n")
    bounds = conn.bounds()
    assert (bounds.min, bounds.max, bounds.idle_timeout_ms) == (12, 12, 60_000)
    assert bounds.timeout_s > 86_400  # 0: no limit
    bad = pg_connection(tmp_path / "c", "postgres://app@localhost/shop", "pool: { min: 3, max: 2 }\n")
    with pytest.raises(TeloError) as err:
        asyncio.run(bad.init())
    assert err.value.code == "ERR_MANIFEST_VALIDATION_FAILED" and "min 3 and max 2" in err.value.message


@pytest.mark.parametrize("string", [f"'mysql://app:{PASSWORD}@h/db'", f"'postgresql://app:{PASSWORD}@h:x/db'",
                                    f"'postgresql://app:{PASSWORD}@h/db?bogus=1'",
                                    # as a query parameter, a bad %-escape of it quoted by libpq (from review)
                                    "'postgresql://h/db?user=u&password=s3cr3t%ZZtop'"])
def test_a_connection_string_libpq_refuses_fails_at_boot_without_its_password(tmp_path: Path, string: str) -> None:
    conn = pg_connection(tmp_path, string)
    with pytest.raises(TeloError) as err:
        asyncio.run(conn.init())
    assert err.value.code == "ERR_SQL_URL_INVALID"
    assert "s3cr3t" not in str(err.value) and "Postgres.Connection 'db'" in err.value.message


def test_the_pool_opens_at_the_first_statement_and_a_timeout_names_no_password(tmp_path: Path) -> None:
    # Nothing listens on port 1: the pool cannot connect, and the taker gives up after connectionTimeoutMs.
    conn = pg_connection(tmp_path, "'postgresql://app:s3cr3t@127.0.0.1:1/shop'",
                         "pool: { connectionTimeoutMs: 300 }\n")

    async def use() -> None:
        await conn.init()
        assert conn.pool.pool is None  # not at boot
        assert conn.snapshot() == {"url": "postgresql://app:s3cr3t@127.0.0.1:1/shop"}  # what a journal opens
        try:
            with pytest.raises(TeloError) as err:
                await conn.acquire()
            assert conn.pool.pool is not None
        finally:
            await conn.teardown()
        assert err.value.code == "ERR_SQL_FAILED" and "within 0.3 s" in err.value.message
        assert "s3cr3t" not in str(err.value) and "127.0.0.1:1" in err.value.message

    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)  # its connect retries, expected here
    try:
        asyncio.run(use())
    finally:
        logging.getLogger("psycopg.pool").setLevel(logging.NOTSET)


# --- Postgres.Connection on a server ------------------------------------------------------------------------------

PG_BODY = """\
kind: Pg.Connection
metadata: { name: db }
connectionString: !cel "variables.pg + '%(query)s'"
pool: %(pool)s
---
kind: Sql.Exec
metadata: { name: ddl }
connection: !ref db
sql: CREATE TABLE IF NOT EXISTS %(table)s (pid INTEGER, tag TEXT)
---
kind: Sql.Exec
metadata: { name: mark }
connection: !ref db
sql: INSERT INTO %(table)s SELECT pg_backend_pid(), %%(tag)s FROM pg_sleep(%(nap)s)
---
kind: Sql.Query
metadata: { name: pids }
connection: !ref db
---
kind: Sql.Transaction
metadata: { name: tx }
connection: !ref db
steps:
  - { name: a, invoke: !ref mark, inputs: { tag: !cel "inputs.tag" } }
"""


def pg_app(tmp_path: Path, *, pool: str, nap: float = 0.3, query: str = "") -> tuple[Path, str]:
    url = pg_url()
    os.environ.setdefault("TELO_TEST_PG_URL", url)
    table = f"{fresh_prefix()}_pool"
    sep = "&" if "?" in url else "?"
    return write(tmp_path, PG_BODY % {"pool": pool, "table": table, "nap": nap,
                                      "query": (sep + query) if query else ""}), table


@pytest.mark.postgres
def test_max_bounds_the_connections_three_concurrent_transactions_share_two(tmp_path: Path) -> None:
    path, table = pg_app(tmp_path, pool="{ min: 1, max: 2, idleTimeoutMs: 45000, connectionTimeoutMs: 20000 }",
                         query="sslmode=disable&application_name=telo_pool_test")  # libpq parameters pass through

    async def use(app: Application) -> tuple[list[Any], set[int], Any]:
        await call(app, "ddl")
        started = time.monotonic()
        results = await asyncio.gather(*(call(app, "tx", {"tag": f"t{i}"}) for i in range(3)))
        elapsed = time.monotonic() - started
        rows = await call(app, "pids", {"sql": f"SELECT DISTINCT pid FROM {table}"})
        name = await call(app, "pids", {"sql": "SELECT current_setting('application_name') AS n"})
        conn = app.resources["db"]
        assert isinstance(conn, PostgresConnection) and conn.pool.pool is not None
        pool = conn.pool.pool
        assert (pool.min_size, pool.max_size, pool.max_idle, pool.timeout) == (1, 2, 45.0, 20.0)
        assert elapsed >= 0.55, elapsed  # the third waited for one of the two to commit
        return results, {r["pid"] for r in rows["rows"]}, name["rows"][0]["n"]

    results, pids, name = with_app(path, use)
    assert [r["steps"]["a"]["result"] for r in results] == [{"rowcount": 1}] * 3
    assert 1 <= len(pids) <= 2  # never a third connection
    assert name == "telo_pool_test"


@pytest.mark.postgres
def test_a_caller_waiting_past_connection_timeout_fails_and_the_holder_commits(tmp_path: Path) -> None:
    path, table = pg_app(tmp_path, pool="{ max: 1, connectionTimeoutMs: 200 }", nap=1.0)

    async def use(app: Application) -> tuple[Any, Any]:
        await call(app, "ddl")
        outcomes = await asyncio.gather(call(app, "tx", {"tag": "holder"}), _later(call(app, "tx", {"tag": "late"})),
                                        return_exceptions=True)
        rows = await call(app, "pids", {"sql": f"SELECT tag FROM {table}"})
        return outcomes, rows["rows"]

    (held, late), rows = with_app(path, use)
    assert held == {"steps": {"a": {"result": {"rowcount": 1}}}}
    assert isinstance(late, TeloError) and "within 0.2 s" in late.message and "all 1 of the pool" in late.message
    assert rows == [{"tag": "holder"}]


async def _later(awaitable: Awaitable[T]) -> T:
    await asyncio.sleep(0.1)
    return await awaitable


@pytest.mark.postgres
def test_acquire_waits_apart_from_the_loops_threads_and_a_cancelled_wait_gives_its_connection_back(
    tmp_path: Path,
) -> None:
    """The bug a bounded pool brings: waiters blocked on the event loop's default worker threads (6 on a 2-core
    machine) left the holders none to run their statements, BEGIN and COMMIT — every transaction past the fifth
    waiting failed after connectionTimeoutMs. ``acquire`` waits on threads of its own; 30 waiters on 2 connections
    all get one. A caller cancelled while it waits must not take a connection away from the pool for good."""
    path, _ = pg_app(tmp_path, pool="{ max: 2, connectionTimeoutMs: 5000 }")

    async def use(app: Application) -> None:
        conn = app.resources["db"]
        assert isinstance(conn, PostgresConnection)

        async def hold() -> None:
            db = await conn.acquire()
            try:
                await asyncio.to_thread(db.execute, "SELECT pg_sleep(0.02)")
            finally:
                await conn.release(db)

        await asyncio.wait_for(asyncio.gather(*(hold() for _ in range(30))), 20)
        first, second = await conn.acquire(), await conn.acquire()
        waiter = asyncio.ensure_future(conn.acquire())
        await asyncio.sleep(0.2)
        waiter.cancel()
        await conn.release(first)  # handed to the cancelled waiter's thread, which gives it straight back
        with pytest.raises(asyncio.CancelledError):
            await waiter
        again = await asyncio.wait_for(conn.acquire(), 3)  # leaked, this would time out
        await conn.release(again)
        await conn.release(second)

    with_app(path, use)


@pytest.mark.postgres
def test_more_concurrent_transactions_than_the_loops_threads_all_commit(tmp_path: Path) -> None:
    path, _ = pg_app(tmp_path, pool="{ max: 2, connectionTimeoutMs: 3000 }", nap=0.05)

    async def use(app: Application) -> list[Any]:
        await call(app, "ddl")
        return list(await asyncio.gather(*(call(app, "tx", {"tag": f"t{i}"}) for i in range(12)),
                                         return_exceptions=True))

    assert [r for r in with_app(path, use) if isinstance(r, BaseException)] == []


TWO_POOLS = """\
kind: Pg.Connection
metadata: { name: a }
connectionString: !cel variables.pg
pool: { max: 1, connectionTimeoutMs: 0 }
---
kind: Pg.Connection
metadata: { name: b }
connectionString: !cel variables.pg
pool: { max: 1, connectionTimeoutMs: 0 }
---
kind: Sql.Query
metadata: { name: onA }
connection: !ref a
---
kind: Sql.Query
metadata: { name: onB }
connection: !ref b
---
kind: Sql.Transaction
metadata: { name: tx }
connection: !ref a
steps:
  - { name: first, invoke: !ref onA, inputs: { sql: "SELECT pg_sleep(0.01)" } }
  - { name: second, invoke: !ref onB, inputs: { sql: "SELECT 1 AS one" } }
"""


@pytest.mark.postgres
def test_waiters_on_one_connection_never_starve_the_holder_of_another(tmp_path: Path) -> None:
    """Waiting in the pool on a shared set of 32 threads, 40 callers waiting for `a` left the transaction holding
    `a` no thread to take `b`: a deadlock (with a timeout: false "pool exhausted" failures). They wait on the
    event loop now."""
    os.environ.setdefault("TELO_TEST_PG_URL", pg_url())
    path = write(tmp_path, TWO_POOLS)

    async def use(app: Application) -> list[Any]:
        return list(await asyncio.wait_for(asyncio.gather(*(call(app, "tx") for _ in range(40))), 60))

    done = with_app(path, use)
    assert len(done) == 40 and all(r["steps"]["second"]["result"]["rows"] == [{"one": 1}] for r in done)


@pytest.mark.parametrize("backend", ["memory", "postgres"])
def test_a_cancelled_statement_keeps_its_connection_until_it_ends(tmp_path: Path, backend: str) -> None:
    """The connection went back when the caller was cancelled, while the statement still ran on it in its
    thread: the next statement then ran on the same connection at the same time (in memory), or the pool closed
    it under the running query (PostgreSQL)."""
    if backend == "postgres":
        os.environ.setdefault("TELO_TEST_PG_URL", pg_url())
        body = ("kind: Pg.Connection\nmetadata: { name: db }\nconnectionString: !cel variables.pg\n"
                "pool: { max: 1 }\n")
        slow, fast = "SELECT pg_sleep(0.6) AS slept", "SELECT 42 AS v"
    else:
        body = "kind: Lite.Connection\nmetadata: { name: db }\n"
        slow = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) "
                "SELECT count(*) AS slept FROM c")
        fast = "SELECT 42 AS v"
    path = write(tmp_path, body + "---\nkind: Sql.Query\nmetadata: { name: q }\nconnection: !ref db\n")

    async def use(app: Application) -> tuple[float, float, Any]:
        import time

        slow_call = asyncio.ensure_future(call(app, "q", {"sql": slow}))
        await asyncio.sleep(0.2)
        slow_call.cancel()
        cancelled_at = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await slow_call
        if backend == "memory":  # the one connection is still lent out: its statement runs on
            one = app.resources["db"].one  # type: ignore[attr-defined]
            assert not one._free.acquire(blocking=False)
        second = await asyncio.wait_for(call(app, "q", {"sql": fast}), 30)
        return cancelled_at, time.monotonic(), second

    cancelled_at, answered_at, second = with_app(path, use)
    assert second == {"rows": [{"v": 42}], "rowCount": 1}
    # the second statement waited for the slow one to end on the connection, rather than sharing it
    assert answered_at - cancelled_at > 0.15


# --- SQLite.Connection -----------------------------------------------------------------------------------------------

LITE_BODY = """\
kind: Lite.Connection
metadata: { name: db }
%(file)s
---
kind: Sql.Exec
metadata: { name: ddl }
connection: !ref db
sql: CREATE TABLE IF NOT EXISTS t (tag TEXT)
---
kind: Sql.Exec
metadata: { name: put }
connection: !ref db
sql: INSERT INTO t VALUES (:tag)
---
kind: Sql.Query
metadata: { name: count }
connection: !ref db
sql: SELECT count(*) AS n FROM t
---
kind: Py.Function
metadata: { name: slowFail }
function: lite_helpers:slow_fail
---
kind: Sql.Transaction
metadata: { name: doomed }
connection: !ref db
steps:
  - { name: a, invoke: !ref put, inputs: { tag: inside } }
  - { name: b, invoke: !ref slowFail }
"""

HELPERS = """\
import asyncio


async def slow_fail(inputs):
    await asyncio.sleep(0.3)
    raise RuntimeError("rolled back")
"""


def lite_app(tmp_path: Path, file: str | None) -> Path:
    (tmp_path / "lite_helpers.py").write_text(HELPERS)
    return write(tmp_path, LITE_BODY % {"file": "" if file is None else f"file: {file}"})


def test_a_file_is_relative_to_the_manifest_and_its_directory_is_created_at_boot(tmp_path: Path) -> None:
    path = lite_app(tmp_path, "./data/nested/app.db")

    async def use(app: Application) -> Any:
        conn = app.resources["db"]
        assert isinstance(conn, SqliteConnection) and not conn.memory
        assert (tmp_path / "data" / "nested").is_dir()
        assert conn.snapshot() == {"file": str(tmp_path / "data" / "nested" / "app.db")}
        await call(app, "ddl")
        await call(app, "put", {"tag": "x"})
        return await call(app, "count")

    assert with_app(path, use)["rows"] == [{"n": 1}]
    assert (tmp_path / "data" / "nested" / "app.db").is_file()


@pytest.mark.parametrize("file", [None, "':memory:'"])
def test_in_memory_every_statement_shares_the_one_connection(tmp_path: Path, file: str | None) -> None:
    path = lite_app(tmp_path, file)

    async def use(app: Application) -> Any:
        conn = app.resources["db"]
        assert isinstance(conn, SqliteConnection) and conn.memory and conn.snapshot() == {"file": ":memory:"}
        await call(app, "ddl")  # another connection would see none of this table
        for tag in ("a", "b"):
            await call(app, "put", {"tag": tag})
        return await call(app, "count")

    assert with_app(path, use)["rows"] == [{"n": 2}]
    assert list(tmp_path.glob("*.db")) == [] and not (tmp_path / ":memory:").exists()


def test_in_memory_a_transaction_holds_the_connection_a_statement_outside_waits_for_it(tmp_path: Path) -> None:
    """On one shared connection a statement issued beside an open transaction would run INSIDE it, and its row
    would vanish with the rollback: it must wait for the transaction to end."""
    path = lite_app(tmp_path, None)

    async def use(app: Application) -> tuple[Any, Any]:
        await call(app, "ddl")
        outcome = await asyncio.gather(call(app, "doomed"), _later(call(app, "put", {"tag": "beside"})),
                                       return_exceptions=True)
        return outcome, await call(app, "count")

    (doomed, beside), count = with_app(path, use)
    assert isinstance(doomed, BaseException) and beside == {"rowcount": 1}
    assert count["rows"] == [{"n": 1}]  # the row beside survived the rollback; the transaction's is gone


def test_in_memory_the_database_goes_with_teardown(tmp_path: Path) -> None:
    path = lite_app(tmp_path, None)

    async def use(app: Application) -> SqliteConnection:
        await call(app, "ddl")
        conn = app.resources["db"]
        assert isinstance(conn, SqliteConnection)
        return conn

    conn = with_app(path, use)
    with pytest.raises(TeloError) as err:
        conn.take()
    assert err.value.code == "ERR_SQL_FAILED" and "closed" in err.value.message


def test_closing_the_one_connection_wakes_its_waiters_at_once() -> None:
    """A taker waiting for an in-memory database the application is closing must not sit out the 30 s timeout
    (it held a waiter thread, and process exit, that long)."""
    class Fake:
        def close(self) -> None:
            pass

    one = sql_pool.OneConnection(Fake, timeout_s=30, where="SQLite.Connection 'db'")
    held = one.take()
    outcomes: list[BaseException] = []

    def wait() -> None:
        try:
            one.take()
        except TeloError as exc:
            outcomes.append(exc)

    waiters = [threading.Thread(target=wait) for _ in range(3)]
    for thread in waiters:
        thread.start()
    time.sleep(0.1)
    started = time.monotonic()
    one.close()
    one.give(held)  # the holder ends after the close: nothing to give back
    for thread in waiters:
        thread.join(5)
    assert time.monotonic() - started < 2
    assert [str(e) for e in outcomes] == ["ERR_SQL_FAILED: SQLite.Connection 'db' is closed"] * 3


@pytest.mark.postgres
def test_a_caller_waiting_when_the_pool_closes_is_told_so(tmp_path: Path) -> None:
    path, _ = pg_app(tmp_path, pool="{ max: 1, connectionTimeoutMs: 20000 }")

    async def use(app: Application) -> None:
        conn = app.resources["db"]
        assert isinstance(conn, PostgresConnection)
        held = await conn.acquire()
        waiter = asyncio.ensure_future(conn.acquire())
        await asyncio.sleep(0.2)
        started = time.monotonic()
        await conn.teardown()
        with pytest.raises(TeloError) as err:
            await waiter
        assert time.monotonic() - started < 5 and "is closed" in err.value.message
        conn.give(held)

    with_app(path, use)


# --- the journals take them ----------------------------------------------------------------------------------------

DURABLE = """\
kind: Journal.Journal
metadata: { name: runs }
%(journal)s
---
kind: Lite.Connection
metadata: { name: db }
%(file)s
---
kind: Sql.Exec
metadata: { name: ddl }
connection: !ref db
sql: CREATE TABLE IF NOT EXISTS t (tag TEXT)
---
kind: Sql.Exec
metadata: { name: put }
connection: !ref db
sql: INSERT INTO t VALUES (:tag)
---
kind: Sql.Transaction
metadata: { name: tx }
connection: !ref db
steps:
  - { name: a, invoke: !ref put, inputs: { tag: a } }
---
kind: Local.Workflow
metadata: { name: wf }
journal: !ref runs
runId: run
steps:
  - { name: ddl, invoke: !ref ddl }
  - { name: tx, invoke: !ref tx }
"""


def durable_app(tmp_path: Path, journal: str, file: str) -> Path:
    return write(tmp_path, DURABLE % {"journal": journal, "file": file},
                 imports=", Local: durable-local, Journal: durable-journal-sqlite")


def run_wf(path: Path) -> tuple[str, list[str], int]:
    async def use(app: Application) -> tuple[str, list[str], int]:
        wf: Any = app.resources["wf"]
        await dispatch(wf, {}, events=app.events)
        await app.wait_holds()
        record = wf.journal.store.read_run("run")
        return record.status, [e.path for e in wf.journal.store.read_entries("run")], record.collapsed_regions

    return with_app(path, use)


def test_a_sqlite_journal_on_the_connections_file_journals_its_transaction_per_step(tmp_path: Path) -> None:
    status, paths, collapsed = run_wf(durable_app(tmp_path, "connection: !ref db", "file: ./state/app.db"))
    assert (status, collapsed) == ("completed", 0)
    assert {"steps/tx/a", "steps/tx"} <= set(paths)
    assert (tmp_path / "state" / "app.db").is_file()


def test_a_sqlite_journal_beside_the_connections_file_collapses_the_transaction(tmp_path: Path) -> None:
    status, paths, collapsed = run_wf(durable_app(tmp_path, "path: ./journal.db", "file: ./data.db"))
    assert (status, collapsed) == ("completed", 1)
    assert "steps/tx/a" not in paths


def test_a_journal_refuses_an_in_memory_or_a_foreign_connection(tmp_path: Path) -> None:
    with pytest.raises(TeloError) as err:
        run_wf(durable_app(tmp_path, "connection: !ref db", ""))
    assert err.value.code == "ERR_JOURNAL_CONFIG_INVALID" and "in-memory" in err.value.message
    path = write(tmp_path / "pg", """\
        kind: Journal.Journal
        metadata: { name: runs }
        connection: !ref db
        ---
        kind: Lite.Connection
        metadata: { name: db }
        file: x.db
        """, imports=", Journal: durable-journal-postgres")
    with pytest.raises(TeloError) as err:
        with_app(path, lambda app: asyncio.sleep(0))
    assert err.value.code == "ERR_JOURNAL_CONFIG_INVALID"
    assert "'db' (SQLite.Connection) is not a Postgres.Connection" in err.value.message


@pytest.mark.postgres
def test_a_postgres_journal_on_the_connection_journals_its_transaction_per_step(tmp_path: Path) -> None:
    prefix = fresh_prefix()
    os.environ.setdefault("TELO_TEST_PG_URL", pg_url())
    path = write(tmp_path, f"""\
        kind: Journal.Journal
        metadata: {{ name: runs }}
        connection: !ref db
        table: {prefix}
        ---
        kind: Pg.Connection
        metadata: {{ name: db }}
        connectionString: !cel variables.pg
        ---
        kind: Sql.Exec
        metadata: {{ name: ddl }}
        connection: !ref db
        sql: CREATE TABLE IF NOT EXISTS {prefix}_t (tag TEXT)
        ---
        kind: Sql.Exec
        metadata: {{ name: put }}
        connection: !ref db
        sql: INSERT INTO {prefix}_t VALUES (%(tag)s)
        ---
        kind: Sql.Transaction
        metadata: {{ name: tx }}
        connection: !ref db
        steps:
          - {{ name: a, invoke: !ref put, inputs: {{ tag: a }} }}
        ---
        kind: Local.Workflow
        metadata: {{ name: wf }}
        journal: !ref runs
        runId: run
        steps:
          - {{ name: ddl, invoke: !ref ddl }}
          - {{ name: tx, invoke: !ref tx }}
        """, imports=", Local: durable-local, Journal: durable-journal-postgres")
    status, paths, collapsed = run_wf(path)
    assert (status, collapsed) == ("completed", 0)
    assert {"steps/tx/a", "steps/tx"} <= set(paths)


# --- declarative schema: declared, refused -------------------------------------------------------------------------

UPSTREAM_SCHEMA = """\
kind: Pg.Connection
metadata: { name: db }
connectionString: postgresql://app@localhost/shop
---
kind: Pg.Table
metadata: { name: orders }
table: orders
columns:
  id: { type: text, primaryKey: true }
  amount: { type: numeric, nullable: false, defaultExpression: "0" }
indexes: [{ columns: [amount] }]
---
kind: Pg.Schema
metadata: { name: schema }
connection: !ref db
schema: shop
version: 2
tables:
  - !ref orders
  - kind: Pg.Table
    metadata: { name: items }
    table: items
    columns: { id: { type: text } }
migrations: { "2-backfill": { sql: "UPDATE orders SET amount = 0" } }
reclaim: { afterVersions: 2, afterDuration: 7d }
"""


def test_telo_check_refuses_each_declarative_schema_declaration_saying_what_is_missing(tmp_path: Path) -> None:
    path = write(tmp_path, UPSTREAM_SCHEMA)
    found = check(path)
    assert {d.code for d in found} == {"ERR_KIND_NOT_IMPLEMENTED"}  # the upstream fields load
    messages = sorted(d.message for d in found)
    assert messages == [
        "Pg.Schema 'schema': Postgres.Schema (declarative schema and migrations) is not implemented by telo yet",
        "Pg.Table 'items': Postgres.Table (declarative schema) is not implemented by telo yet",
        "Pg.Table 'orders': Postgres.Table (declarative schema) is not implemented by telo yet",
    ]
    assert all(d.hint and "Sql.Exec" in d.hint and "migration tool" in d.hint for d in found)
    assert sorted(d.pos.line for d in found if d.pos) == [11, 19, 26]


def test_boot_refuses_them_too_with_or_without_the_static_checks(tmp_path: Path) -> None:
    path = write(tmp_path, UPSTREAM_SCHEMA)
    with pytest.raises(ManifestLoadError) as refused:
        load_application(path)
    assert [d.code for d in refused.value.diagnostics].count("ERR_KIND_NOT_IMPLEMENTED") == 3
    app = load_application(path, static_checks=False)
    with pytest.raises(TeloError) as err:
        app.create_resources()
    assert err.value.code == "ERR_KIND_NOT_IMPLEMENTED" and "is not implemented by telo yet" in err.value.message


def test_sqlite_schema_kinds_come_with_the_newer_module_only(tmp_path: Path) -> None:
    body = "kind: Lite.Table\nmetadata: { name: t }\ntable: t\n"
    assert [d.code for d in check(write(tmp_path, body))] == ["ERR_KIND_NOT_IMPLEMENTED"]
    older = tmp_path / "older"
    older.mkdir()
    (older / "app.yaml").write_text("kind: Telo.Application\nmetadata: { name: Old }\nimports: { Lite: sql-sqlite }\n"
                                    "---\n" + body)
    assert [d.code for d in check(older / "app.yaml")] == ["ERR_MANIFEST_UNKNOWN_KIND"]
