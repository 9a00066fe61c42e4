"""The ``sql`` kinds, and how a ``Sql.Transaction`` region is journaled (spec §8; reference §4, §5, §7, §9).

A transaction on the journal's own database is opened through the journal store: the body is journaled per
step, exactly once (a rollback — or a SIGKILL — leaves neither the rows nor their entries). On any other
database the region collapses and the run counts it. Both outcomes are reported as ``durable.zone.mode``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from telo.engine.dispatch import dispatch
from telo.errors import TeloError
from telo.journal.model import Entry, RunRecord
from telo.kinds import sql_drivers as drivers
from telo.kinds.controllers import load_application
from telo.manifest import ManifestLoadError
from telo.specs.sql import ATOMIC_REASON, NO_SUSPEND_REASON
from telo.values import Timestamp
from tests.pg_support import fresh_prefix, pg_url

REPO_ROOT = Path(__file__).resolve().parents[3]

HELPERS = '''
import os
import time
from pathlib import Path


def boom(inputs):
    raise RuntimeError("boom")


def flaky(inputs):
    """Fails on its first call (per marker file), succeeds afterwards."""
    marker = Path(inputs["marker"])
    if not marker.exists():
        marker.write_text("failed once")
        raise RuntimeError("first attempt fails")
    return "ok"


def hang(inputs):
    """Under SQL_CRASH_MARK: say so, then wait to be killed."""
    mark = os.environ.get("SQL_CRASH_MARK")
    if mark:
        Path(mark).write_text("inside")
        time.sleep(600)
    return "passed"
'''

HEADER = """\
kind: Telo.Application
metadata: {{ name: SqlTest }}
imports:
  Local: durable-local
  Durable: durable
  Journal: durable-journal-sqlite
  PgJournal: durable-journal-postgres
  Sql: sql
  Py: python
variables:
  pg: {{ env: TELO_TEST_PG_URL, type: string, default: "postgresql://unused" }}
targets: {targets}
---
{journal}
---
kind: Sql.Connection
metadata: {{ name: db }}
url: {url}
---
kind: Sql.Exec
metadata: {{ name: ddl }}
connection: !ref db
sql: CREATE TABLE IF NOT EXISTS {table} (name TEXT, qty INTEGER)
---
kind: Sql.Exec
metadata: {{ name: insert }}
connection: !ref db
sql: INSERT INTO {table} (name, qty) VALUES ({p_name}, {p_qty})
---
kind: Sql.Query
metadata: {{ name: count }}
connection: !ref db
sql: SELECT count(*) AS n FROM {table}
---
kind: Py.Function
metadata: {{ name: boom }}
function: sql_test_helpers:boom
---
kind: Py.Function
metadata: {{ name: flaky }}
function: sql_test_helpers:flaky
---
kind: Py.Function
metadata: {{ name: hang }}
function: sql_test_helpers:hang
---
kind: Durable.Sleep
metadata: {{ name: nap }}
for: 1h
---
kind: Sql.Transaction
metadata: {{ name: tx }}
connection: !ref db
steps:
  - name: a
    invoke: !ref insert
    inputs: {{ name: a, qty: 1 }}
  - name: b
    invoke: !ref insert
    inputs: {{ name: b, qty: 2 }}
{extra_steps}
---
kind: Local.Workflow
metadata: {{ name: wf }}
journal: !ref runs
runId: !cel "'run:' + inputs.id"
steps:
  - name: ddl
    invoke: !ref ddl
  - name: tx
    invoke: !ref tx
{tx_step_extra}
"""

SQLITE_JOURNAL = "kind: Journal.Journal\nmetadata: { name: runs }\npath: ./journal.db"


@dataclass
class Scenario:
    path: Path
    table: str
    env: dict[str, str]

    def rows(self, url: str | None = None) -> list[tuple[Any, ...]]:
        target = drivers.parse_url(url or "./journal.db", self.path.parent, "test")
        conn = drivers.connect(target)
        try:
            found, _ = drivers.execute(conn, f"SELECT name, qty FROM {self.table} ORDER BY name", None, rows=True)
        finally:
            drivers.close(conn)
        return [(r["name"], r["qty"]) for r in found]


def scenario(tmp_path: Path, *, journal: str = SQLITE_JOURNAL, url: str = "./journal.db",
             extra_steps: str = "", tx_step_extra: str = "", targets: str = "[]", postgres: bool = False,
             table: str = "items") -> Scenario:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "sql_test_helpers.py").write_text(HELPERS)
    text = HEADER.format(
        targets=targets, journal=journal, url=url, table=table, extra_steps=textwrap.indent(extra_steps, "  "),
        tx_step_extra=textwrap.indent(tx_step_extra, "    "),
        p_name="%(name)s" if postgres else ":name", p_qty="%(qty)s" if postgres else ":qty",
    )
    path = tmp_path / "app.yaml"
    path.write_text(text)
    env = dict(os.environ)
    return Scenario(path, table, env)


@dataclass
class Outcome:
    status: str
    error: Any
    record: RunRecord
    entries: list[Entry]

    def paths(self) -> list[str]:
        return [e.path for e in self.entries]


def run_workflow(sc: Scenario, run_id: str = "1", *, static_checks: bool = True) -> Outcome:
    async def main() -> Outcome:
        app = load_application(sc.path, env=sc.env, static_checks=static_checks)
        await app.start()
        try:
            wf: Any = app.resources["wf"]
            await dispatch(wf, {"id": run_id}, events=app.events)
            await app.wait_holds()
            execution = wf.executions[f"run:{run_id}"]
            store = wf.journal.store
            record = store.read_run(f"run:{run_id}")
            assert record is not None
            return Outcome(execution.status, execution.error, record, store.read_entries(f"run:{run_id}"))
        finally:
            await app.close()

    return asyncio.run(main())


def inner(out: Outcome) -> list[str]:
    """The entries recorded inside the transaction's region (``steps/tx/inputs`` is the outer step's)."""
    return [p for p in out.paths() if p.startswith("steps/tx/") and p != "steps/tx/inputs"]


def zone_modes(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str | None]]:
    return [(getattr(r, "durable.zone"), getattr(r, "durable.zone.mode"), getattr(r, "durable.zone.attestation", None))
            for r in caplog.records if r.getMessage() == "durable.zone.mode"]


# --- URLs and statements -----------------------------------------------------------------------------------


def test_urls_name_sqlite_files_relative_to_the_manifest_or_postgresql(tmp_path: Path) -> None:
    base = tmp_path
    assert drivers.parse_url("sqlite:///tmp/x.db", base, "t") == drivers.SqlTarget("sqlite", "/tmp/x.db")
    assert drivers.parse_url("data/app.db", base, "t") == drivers.SqlTarget("sqlite", str(base / "data/app.db"))
    assert drivers.parse_url("sqlite:rel.db", base, "t") == drivers.SqlTarget("sqlite", str(base / "rel.db"))
    assert drivers.parse_url("postgresql://u@h/db", base, "t").driver == "postgres"
    for bad in ("", "mysql://x/y", "sqlite://host/x.db", ":memory:"):
        with pytest.raises(TeloError) as err:
            drivers.parse_url(bad, base, "t")
        assert err.value.code == "ERR_SQL_URL_INVALID"


def test_same_database_compares_files_and_postgresql_identities(tmp_path: Path) -> None:
    class Fake:
        def __init__(self, kind: str, **kw: str) -> None:
            self.kind = kind
            self.__dict__.update(kw)

    f = tmp_path / "j.db"
    f.write_bytes(b"")
    sqlite_target = drivers.parse_url("./j.db", tmp_path, "t")
    assert drivers.same_database(sqlite_target, Fake("sqlite", path=str(f)))
    assert not drivers.same_database(sqlite_target, Fake("sqlite", path=str(tmp_path / "other.db")))
    assert not drivers.same_database(sqlite_target, Fake("file", path=str(f)))
    pg = drivers.parse_url("postgresql://postgres@127.0.0.1:5432/app", tmp_path, "t")
    assert drivers.same_database(pg, Fake("postgres", url="postgresql://postgres@localhost/app"))
    assert not drivers.same_database(pg, Fake("postgres", url="postgresql://postgres@localhost/other"))


def test_query_rows_are_maps_of_cel_values_and_exec_reports_rowcount(tmp_path: Path) -> None:
    conn = drivers.connect(drivers.parse_url("./v.db", tmp_path, "t"))
    try:
        _, n = drivers.execute(conn, "CREATE TABLE v (i INTEGER, d REAL, b BLOB, t TEXT, z)", {}, rows=False)
        _, n = drivers.execute(conn, "INSERT INTO v VALUES (:i, :d, :b, :t, :z)",
                               {"i": 7, "d": 1.5, "b": b"\x00x", "t": "é", "z": None}, rows=False)
        assert n == 1
        rows, _ = drivers.execute(conn, "SELECT * FROM v WHERE i = ?", [7], rows=True)
    finally:
        drivers.close(conn)
    assert rows == [{"i": 7, "d": 1.5, "b": b"\x00x", "t": "é", "z": None}]
    assert type(rows[0]["i"]) is int and type(rows[0]["d"]) is float


def test_parameters_and_driver_values_cross_into_the_cel_domain() -> None:
    import datetime
    import decimal

    assert drivers.to_param(Timestamp(0)) == "1970-01-01T00:00:00Z"
    assert drivers.to_param({"a": [1, True]}) == '{"a":[1,true]}'
    assert drivers.to_cel(decimal.Decimal("2.5")) == 2.5
    assert drivers.to_cel(datetime.datetime(1970, 1, 1, 0, 0, 1)) == Timestamp(1)
    assert drivers.to_cel(memoryview(b"ab")) == b"ab"
    assert drivers.to_cel(2**70) == str(2**70)
    with pytest.raises(TeloError):
        drivers.to_param(object())


def test_a_failed_statement_is_an_sql_error_with_the_drivers_message(tmp_path: Path) -> None:
    conn = drivers.connect(drivers.parse_url("./e.db", tmp_path, "t"))
    try:
        with pytest.raises(TeloError) as err:
            drivers.execute(conn, "SELECT * FROM nowhere", None, rows=True)
    finally:
        drivers.close(conn)
    assert err.value.code == "ERR_SQL_FAILED" and "nowhere" in err.value.message


# --- transactions outside a durable run --------------------------------------------------------------------


def _run_target(sc: Scenario) -> None:
    async def main() -> None:
        app = load_application(sc.path, env=sc.env)
        try:
            await app.main()
        finally:
            await app.close()

    asyncio.run(main())


def test_a_transaction_commits_its_body_and_a_failure_rolls_it_back(tmp_path: Path) -> None:
    sc = scenario(tmp_path, targets="[{ name: d, invoke: !ref ddl }, { name: t, invoke: !ref tx }]")
    _run_target(sc)
    assert sc.rows() == [("a", 1), ("b", 2)]
    failing = scenario(tmp_path / "f", extra_steps="- name: fail\n  invoke: !ref boom",
                       targets="[{ name: d, invoke: !ref ddl }, { name: t, invoke: !ref tx }]")
    with pytest.raises(TeloError) as err:
        _run_target(failing)
    assert err.value.code == "ERR_EXECUTION_FAILED"
    assert failing.rows() == []


def test_a_nested_transaction_is_a_savepoint_its_failure_undoes_only_itself(tmp_path: Path) -> None:
    extra = textwrap.dedent("""\
        - name: guarded
          try:
            - name: inner
              invoke:
                kind: Sql.Transaction
                connection: !ref db
                steps:
                  - { name: c, invoke: !ref insert, inputs: { name: c, qty: 3 } }
                  - { name: fail, invoke: !ref boom }
          catch:
            - { name: caught, value: !cel "error.code" }""")
    sc = scenario(tmp_path, extra_steps=extra, url="./other.db",
                  targets="[{ name: d, invoke: !ref ddl }, { name: t, invoke: !ref tx }]")
    _run_target(sc)
    assert sc.rows("./other.db") == [("a", 1), ("b", 2)]


# --- durable runs: perStep on the journal's own database, collapsed elsewhere ------------------------------


def test_on_the_journals_own_sqlite_file_the_body_is_journaled_per_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="telo.durable")
    sc = scenario(tmp_path)
    out = run_workflow(sc)
    assert out.status == "completed", out.error
    assert inner(out) == ["steps/tx/a/inputs", "steps/tx/a", "steps/tx/b/inputs", "steps/tx/b"]
    assert out.paths()[-1] == "steps/tx"  # the outer step's entry, written after COMMIT
    assert out.record.collapsed_regions == 0 and list(out.record.collapse_reasons) == []
    assert zone_modes(caplog) == [("Sql.Transaction", "perStep", "writesInside")]
    assert sc.rows() == [("a", 1), ("b", 2)]


def test_on_another_sqlite_file_the_region_collapses_and_is_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="telo.durable")
    sc = scenario(tmp_path, url="sqlite:///" + str(tmp_path / "other.db").lstrip("/"))
    out = run_workflow(sc)
    assert out.status == "completed", out.error
    assert inner(out) == []
    assert {"steps/tx/inputs", "steps/tx"} <= set(out.paths())  # the outer step, outside the region
    assert out.record.collapsed_regions == 1
    assert list(out.record.collapse_reasons) == [f"Sql.Transaction (atomic): {ATOMIC_REASON}"]
    assert zone_modes(caplog) == [("Sql.Transaction", "collapsed", None)]
    assert sc.rows(str(tmp_path / "other.db")) == [("a", 1), ("b", 2)]


def test_a_failure_inside_a_per_step_transaction_discards_rows_and_entries(tmp_path: Path) -> None:
    sc = scenario(tmp_path, extra_steps="- name: fail\n  invoke: !ref boom")
    out = run_workflow(sc)
    assert out.status == "failed" and out.error is not None and out.error["code"] == "ERR_EXECUTION_FAILED"
    # the rollback took the inner steps' entries with their rows; what stays is the transaction step's failure
    # receipt, written after it (telo.durable.failures)
    assert inner(out) == ["steps/tx/@failed"] and "steps/tx" not in out.paths()
    assert sc.rows() == []


def test_a_retried_per_step_transaction_executes_its_rolled_back_steps_again(tmp_path: Path) -> None:
    # The first attempt inserts a and b, then fails: the rollback takes rows AND entries. The retry must run
    # a and b again (not replay them from a forgotten cache), so each row exists exactly once.
    marker = tmp_path / "flaky.marker"
    sc = scenario(tmp_path, extra_steps=f"- name: shaky\n  invoke: !ref flaky\n  inputs: {{ marker: '{marker}' }}",
                  tx_step_extra="retry: { attempts: 1, initialDelay: 1, jitter: none }")
    out = run_workflow(sc)
    assert out.status == "completed", out.error
    assert sc.rows() == [("a", 1), ("b", 2)]
    assert {"steps/tx/a", "steps/tx/b", "steps/tx/shaky", "steps/tx"} <= set(out.paths())


def test_a_durable_sleep_inside_a_transaction_is_refused_quoting_the_zones_reason(tmp_path: Path) -> None:
    sc = scenario(tmp_path, extra_steps="- name: wait\n  invoke: !ref nap")
    # `telo check` (and every load) refuses this statically (ZONE_ATTRIBUTE_VIOLATED); the runtime guard
    # behind it is what this test exercises, so the static checks are skipped.
    with pytest.raises(ManifestLoadError) as refused:
        load_application(sc.path, env=sc.env)
    assert any(d.code == "ZONE_ATTRIBUTE_VIOLATED" for d in refused.value.diagnostics)
    out = run_workflow(sc, static_checks=False)
    assert out.status == "failed" and out.error is not None
    assert out.error["code"] == "ERR_DURABLE_SUSPEND_FORBIDDEN"
    assert NO_SUSPEND_REASON in out.error["message"]
    assert out.record.status == "failed" and out.record.parked is None
    assert sc.rows() == []


def test_a_sigkill_inside_a_per_step_transaction_leaves_neither_rows_nor_entries(tmp_path: Path) -> None:
    sc = scenario(tmp_path, extra_steps="- name: h\n  invoke: !ref hang",
                  targets="[{ name: start, invoke: !ref wf, inputs: { id: k } }]")
    mark = tmp_path / "inside.mark"
    env = {**sc.env, "SQL_CRASH_MARK": str(mark), "PYTHONPATH": str(REPO_ROOT / "src")}
    child = subprocess.Popen([sys.executable, "-m", "telo", "run", str(sc.path)], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not mark.exists():
            assert child.poll() is None, child.stdout.read().decode() if child.stdout else ""
            assert time.monotonic() < deadline, "the child never reached the transaction's last step"
            time.sleep(0.05)
        # Inside the transaction, a and b are inserted and journaled — uncommitted.
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout:
            child.stdout.close()

    def journal_paths() -> list[str]:
        with sqlite3.connect(tmp_path / "journal.db") as conn:
            return [r[0] for r in conn.execute("SELECT path FROM telo_durable_entries WHERE run = 'run:k' "
                                               "ORDER BY seq")]

    assert sc.rows() == []
    assert [p for p in journal_paths() if p.startswith("steps/tx")] == ["steps/tx/inputs"]
    assert "steps/ddl" in journal_paths()  # what committed before the transaction stays

    env.pop("SQL_CRASH_MARK")
    resumed = subprocess.run([sys.executable, "-m", "telo", "run", str(sc.path)], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert sc.rows() == [("a", 1), ("b", 2)]  # exactly once
    assert {"steps/tx/a", "steps/tx/b", "steps/tx/h", "steps/tx"} <= set(journal_paths())
    with sqlite3.connect(tmp_path / "journal.db") as conn:
        status = conn.execute("SELECT status, collapsed_regions FROM telo_durable_runs WHERE run = 'run:k'").fetchone()
    assert status == ("completed", 0)


# --- PostgreSQL ----------------------------------------------------------------------------------------------


@pytest.mark.postgres
def test_on_postgresql_a_journal_on_the_same_url_journals_the_body_per_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = pg_url()
    caplog.set_level(logging.INFO, logger="telo.durable")
    prefix = fresh_prefix()
    journal = f"kind: PgJournal.Journal\nmetadata: {{ name: runs }}\nconnection: !ref db\ntable: {prefix}"
    sc = scenario(tmp_path, journal=journal, url="!cel variables.pg", postgres=True, table=f"{prefix}_items")
    sc.env["TELO_TEST_PG_URL"] = url
    out = run_workflow(sc)
    assert out.status == "completed", out.error
    assert {"steps/tx/a", "steps/tx/b"} <= set(out.paths())
    assert out.record.collapsed_regions == 0
    assert zone_modes(caplog) == [("Sql.Transaction", "perStep", "writesInside")]
    assert sc.rows(url) == [("a", 1), ("b", 2)]

    failing = scenario(tmp_path / "f", journal=journal, url="!cel variables.pg", postgres=True,
                       table=f"{prefix}_items", extra_steps="- name: fail\n  invoke: !ref boom")
    failing.env["TELO_TEST_PG_URL"] = url
    out = run_workflow(failing, run_id="2")
    assert out.status == "failed"
    assert inner(out) == ["steps/tx/@failed"] and "steps/tx" not in out.paths()  # (its failure receipt stays)
    assert failing.rows(url) == [("a", 1), ("b", 2)]  # the second run's rows were rolled back


@pytest.mark.postgres
def test_on_postgresql_with_the_journal_elsewhere_the_region_collapses(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = pg_url()
    caplog.set_level(logging.INFO, logger="telo.durable")
    table = f"{fresh_prefix()}_items"
    sc = scenario(tmp_path, url="!cel variables.pg", postgres=True, table=table)
    sc.env["TELO_TEST_PG_URL"] = url
    out = run_workflow(sc)
    assert out.status == "completed", out.error
    assert inner(out) == []
    assert out.record.collapsed_regions == 1
    assert list(out.record.collapse_reasons) == [f"Sql.Transaction (atomic): {ATOMIC_REASON}"]
    assert zone_modes(caplog) == [("Sql.Transaction", "collapsed", None)]
    assert sc.rows(url) == [("a", 1), ("b", 2)]
