"""Durable stream iteration (``Durable.Consume``, issue 18) against a plain loop doing the same work.

Issue 18's row: "rows/s of stream iteration against a plain loop of the same work". The work: a table
``outbox`` of ``--rows`` rows consumed in key order, ``--batch`` rows a batch, each row marked in a table ``done``
(``id`` its primary key), exactly once: the batch's marks and the consumer's cursor commit in one transaction on
the same database. Two shapes of the work, each measured both ways:

- **a statement per batch**: one ``INSERT INTO done … SELECT`` over the batch's ids;
- **a statement per row**: one ``INSERT`` per row (telo: a ``Run.Iteration`` of ``Sql.Exec`` steps, each row a
  journaled step inside the batch's transaction).

The plain loop is what a careful hand-written consumer does: ``SELECT … WHERE id > :cursor ORDER BY id LIMIT B``,
then ``BEGIN``, the marks, an ``UPDATE`` of its cursor row, ``COMMIT`` — one durable commit per batch and nothing
journaled. telo: a ``Local.Workflow`` whose one step is a ``Durable.Consume`` with a ``query`` source on the
journal's own database and ``transaction: !ref db`` — each batch's ``@batch`` decision, its steps' entries, its
marks and its ``@cursor`` (``stream_cursor``) event commit together, and a crash resumes after the last committed
batch (tests/crash/test_consume_kill.py). Each round fills fresh tables and starts a fresh run; the variants run in
``--rounds`` rounds whose order rotates. A figure is the median of its rounds; "vs plain" is the median of the
per-round ratios; CPU µs/row is this process's ``time.process_time()`` (all threads) over the rows.

SQLite: one file (WAL, ``synchronous=FULL``) holds the journal and the tables, on the repository's filesystem.
``--postgres``: PostgreSQL 15 in a throwaway cluster of the script's own (``benchmarks/postgres.py``'s, fsync on),
or the server at ``--url``; the journal on a ``Postgres.Connection`` whose database holds the tables.

    .venv/bin/python benchmarks/consume.py [--rows 10000] [--batch 100] [--rounds 5] [--postgres] [--url URL]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

MANIFEST = """\
kind: Telo.Application
metadata: { name: ConsumeBench }
imports: { Durable: durable, Local: durable-local, Journal: %(journal_module)s, Sql: sql, Run: run%(more)s }
---
%(db)s---
kind: Journal.Journal
metadata: { name: runs }
%(journal)s---
kind: Sql.Exec
metadata: { name: markBatch }
connection: !ref db
sql: %(mark_batch)s
---
kind: Sql.Exec
metadata: { name: markRow }
connection: !ref db
sql: %(mark_row)s
---
kind: Run.Iteration
metadata: { name: markEach }
collection: !cel "inputs.ids"
steps:
  - { name: m, invoke: !ref markRow, inputs: { id: !cel "item" } }
---
kind: Durable.Consume
metadata: { name: perBatch }
source: { query: { connection: !ref db, sql: "SELECT id, body FROM outbox", key: id } }
batchSize: %(batch)d
transaction: !ref db
steps:
  - { name: mark, invoke: !ref markBatch, inputs: { ids: !cel "json(batch.items.map(r, r.id))" } }
---
kind: Durable.Consume
metadata: { name: perRow }
source: { query: { connection: !ref db, sql: "SELECT id, body FROM outbox", key: id } }
batchSize: %(batch)d
transaction: !ref db
steps:
  - { name: mark, invoke: !ref markEach, inputs: { ids: !cel "batch.items.map(r, r.id)" } }
---
kind: Local.Workflow
metadata: { name: drainBatch }
journal: !ref runs
runId: !cel "inputs.id"
steps:
  - { name: drain, invoke: !ref perBatch }
---
kind: Local.Workflow
metadata: { name: drainRow }
journal: !ref runs
runId: !cel "inputs.id"
steps:
  - { name: drain, invoke: !ref perRow }
"""


class Database:
    """The tables and the plain loops, on SQLite (``location`` a file) or PostgreSQL (a URL)."""

    def __init__(self, kind: str, location: str) -> None:
        self.kind = kind
        if kind == "sqlite":
            self.conn: Any = sqlite3.connect(location, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = FULL")
            self.param = "?"
        else:
            import psycopg

            self.conn = psycopg.connect(location, autocommit=True)
            self.param = "%s"

    def execute(self, sql: str, params: Any = ()) -> list[Any]:
        cur = self.conn.execute(sql.replace("?", self.param), params)
        return list(cur.fetchall()) if cur.description else []

    def fill(self, rows: int) -> None:
        """Fresh ``outbox`` (``rows`` rows), empty ``done`` and the plain loop's ``cursor`` row at 0."""
        for t in ("outbox", "done", "consumer_cursor"):
            self.execute(f"DROP TABLE IF EXISTS {t}")
        self.execute("CREATE TABLE outbox (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        self.execute("CREATE TABLE done (id INTEGER PRIMARY KEY)")
        self.execute("CREATE TABLE consumer_cursor (name TEXT PRIMARY KEY, at INTEGER NOT NULL)")
        self.execute("INSERT INTO consumer_cursor VALUES ('plain', 0)")
        if self.kind == "sqlite":
            self.execute("BEGIN")
            self.conn.executemany("INSERT INTO outbox VALUES (?, ?)", [(i, f"message {i}") for i in range(1, rows + 1)])
            self.execute("COMMIT")
        else:
            self.execute(f"INSERT INTO outbox SELECT i, 'message ' || i FROM generate_series(1, {rows}) i")

    def done(self) -> int:
        return int(self.execute("SELECT count(*) FROM done")[0][0])

    def mark_batch_sql(self, named: bool) -> str:
        """One statement marking a JSON array of ids (``named``: the manifest's ``:ids``/``%(ids)s`` spelling)."""
        if self.kind == "sqlite":
            return "INSERT INTO done (id) SELECT value FROM json_each(%s)" % (":ids" if named else "?")
        return ("INSERT INTO done (id) SELECT x::integer FROM jsonb_array_elements_text(%s::jsonb) AS t(x)"
                % ("%(ids)s" if named else "%s"))

    def plain(self, batch: int, per_row: bool) -> None:
        """The hand-written consumer: page by key, then the marks and the cursor in one transaction."""
        begin = "BEGIN IMMEDIATE" if self.kind == "sqlite" else "BEGIN"
        mark_batch = self.mark_batch_sql(False)
        mark_row = f"INSERT INTO done (id) VALUES ({self.param})"
        while True:
            at = self.execute("SELECT at FROM consumer_cursor WHERE name = 'plain'")[0][0]
            ids = [r[0] for r in self.execute("SELECT id, body FROM outbox WHERE id > ? ORDER BY id LIMIT ?",
                                              (at, batch))]
            if not ids:
                return
            self.execute(begin)
            if per_row:
                for i in ids:
                    self.conn.execute(mark_row, (i,))
            else:
                self.conn.execute(mark_batch, (json.dumps(ids),))
            self.execute("UPDATE consumer_cursor SET at = ? WHERE name = 'plain'", (ids[-1],))
            self.execute("COMMIT")

    def close(self) -> None:
        if self.kind == "postgres":
            for t in ("outbox", "done", "consumer_cursor"):
                self.execute(f"DROP TABLE IF EXISTS {t}")
        self.conn.close()


def manifest(db: Database, location: str, table: str, batch: int) -> str:
    if db.kind == "sqlite":
        head = {"journal_module": "durable-journal-sqlite", "more": "",
                "db": f"kind: Sql.Connection\nmetadata: {{ name: db }}\nurl: {json.dumps(location)}\n",
                "journal": f"path: {json.dumps(location)}\n"}
        mark_row = "INSERT INTO done (id) VALUES (:id)"
    else:
        head = {"journal_module": "durable-journal-postgres", "more": ", Postgres: postgres",
                "db": ("kind: Postgres.Connection\nmetadata: { name: db }\n"
                       f"connectionString: {json.dumps(location)}\n"
                       "pool: { min: 1, max: 3, idleTimeoutMs: 5000, connectionTimeoutMs: 10000 }\n"),
                "journal": f"connection: !ref db\ntable: {table}\n"}
        mark_row = "INSERT INTO done (id) VALUES (%(id)s)"
    return MANIFEST % {**head, "batch": batch, "mark_batch": json.dumps(db.mark_batch_sql(True)),
                       "mark_row": json.dumps(mark_row)}


def one_block(db: Database, rows: int, run: Callable[[], None]) -> dict[str, float]:
    db.fill(rows)
    cpu, t0 = time.process_time(), time.perf_counter()
    run()
    elapsed, cpu_s = time.perf_counter() - t0, time.process_time() - cpu
    assert db.done() == rows, f"{db.done()} of {rows} rows marked"
    return {"rate": rows / elapsed, "cpu_us": cpu_s / rows * 1e6}


def measure(db: Database, manifest_path: Path, args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    import telo

    sys.path.insert(0, str(manifest_path.parent))
    out: dict[str, list[dict[str, float]]] = {}
    with telo.load(manifest_path) as app:
        counter = iter(range(1_000_000))

        def telo_run(flow: str) -> Callable[[], None]:
            def go() -> None:
                result = app.run(flow, {"id": f"{flow}-{os.getpid()}-{next(counter)}"}, wait=600)
                assert result.ok, result  # one_block counts the marked rows (a second mark breaks done's key)
            return go

        variants: dict[str, Callable[[], None]] = {
            "plain loop, a statement per batch": lambda: db.plain(args.batch, per_row=False),
            "telo Durable.Consume, a step per batch": telo_run("drainBatch"),
            "plain loop, a statement per row": lambda: db.plain(args.batch, per_row=True),
            "telo Durable.Consume, a step per row": telo_run("drainRow"),
        }
        for run in variants.values():  # warm up: connections, CEL programs, the page cache
            one_block(db, min(args.rows, 10 * args.batch), run)
        names = list(variants)
        out = {n: [] for n in names}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            print(f"round {r + 1}/{args.rounds}", flush=True)
            for n in order:
                out[n].append(one_block(db, args.rows, variants[n]))
    return out


def report(title: str, res: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> None:
    print(f"\n{title}\n")
    print(f"| workload ({args.rows:,} rows, {args.batch} a batch) | rows/s | vs plain | CPU µs/row |")
    print("|---|--:|--:|--:|")
    names = list(res)
    for i, name in enumerate(names):
        base = res[names[i - 1]] if "telo" in name else res[name]
        blocks = res[name]
        ratio = statistics.median(b["rate"] / p["rate"] for b, p in zip(blocks, base, strict=True))
        print(f"| {name} | {statistics.median(b['rate'] for b in blocks):,.0f} | {ratio:.2f}x | "
              f"{statistics.median(b['cpu_us'] for b in blocks):.0f} |")
    print("\nper round rows/s: " + "; ".join(f"{n}: " + ", ".join(f"{b['rate']:,.0f}" for b in bs)
                                         for n, bs in res.items()))


def load_postgres() -> Any:
    spec = importlib.util.spec_from_file_location("telo_bench_postgres", HERE / "postgres.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sqlite_run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix=".bench-consume-", dir=args.dir) as tmp:
        d = Path(tmp)
        location = str(d / "runs.db")
        db = Database("sqlite", location)
        path = d / "consume.yaml"
        path.write_text(manifest(db, location, "", args.batch))
        try:
            res = measure(db, path, args)
        finally:
            db.close()
    report(f"SQLite {sqlite3.sqlite_version} (WAL, synchronous=FULL; journal and tables in one file)", res, args)


def postgres_run(args: argparse.Namespace) -> None:
    pg = load_postgres()
    with tempfile.TemporaryDirectory(prefix=".bench-consume-pg-", dir=args.dir) as tmp:
        d = Path(tmp)
        cluster = None if args.url else pg.Cluster(d)
        try:
            url = cluster.start() if cluster is not None else args.url
            info = pg.server_info(url)
            table = "tc" + os.urandom(4).hex()
            db = Database("postgres", url)
            path = d / "consume.yaml"
            path.write_text(manifest(db, url, table, args.batch))
            try:
                res = measure(db, path, args)
            finally:
                db.close()
                if cluster is None:
                    pg.drop_own(url, table, None)
        finally:
            if cluster is not None:
                cluster.stop()
    report(f"PostgreSQL {info['version']} (fsync={info['fsync']}, synchronous_commit={info['synchronous_commit']}; "
           f"{'--url' if args.url else 'own cluster'})",
           res, args)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", action="store_true", help="also PostgreSQL (own cluster unless --url)")
    parser.add_argument("--url", help="a PostgreSQL server to use instead of a throwaway cluster")
    parser.add_argument("--dir", default=str(REPO), help="where the temporary files go (never tmpfs)")
    args = parser.parse_args()
    load1, *_ = os.getloadavg()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} cores; {platform.python_version()}; "
          f"load average {load1:.2f} at start", flush=True)
    sqlite_run(args)
    if args.postgres or args.url:
        postgres_run(args)
    print(f"\nload average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
