"""SQLite journal append throughput against raw one-row durable commits (ARCHITECTURE §3 "SQLite").

Three measurements in one process, on files in a temporary directory on the repository's filesystem (never
tmpfs: the point is a real fsync):

- **raw**: a plain ``sqlite3`` loop, WAL + ``synchronous=FULL``, one ``INSERT`` + ``COMMIT`` per row, into a
  table of the journal's entry shape (same key and seq index) with the same row contents — the durable
  one-commit-per-step ceiling;
- **one writer**: ``SqliteStore.append`` from one thread, each append durable before the next;
- **100 runs**: 100 threads, each appending to its own run — group commit shares each fsync between them.

Targets: one writer ≥ 0.70 x raw; 100 runs ≥ 3 x raw.

    .venv/bin/python benchmarks/journal.py [--rounds 15] [--rows 300] [--threads 100] [--per-thread 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path

from telo.journal.model import Admission, Entry
from telo.journal.sqlite import SqliteStore
from telo.journal.sqlite_schema import Sql

TARGET = {"kind": "Python.Function", "name": "charge", "module": "file:///app/orders.yaml"}
VALUE = '{"$telo":"map","value":[["charged","10.5"],["order","A-1"],["status","ok"]]}'  # frame-sized text
TARGET_JSON = '{"kind":"Python.Function","name":"charge","module":"file:///app/orders.yaml"}'
REPO = Path(__file__).resolve().parent.parent


class Raw:
    """A plain sqlite3 connection: one INSERT + COMMIT per row."""

    def __init__(self, path: str) -> None:
        sql = Sql.for_prefix("raw")
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        for stmt in sql.ddl[1:3]:  # the entries table and its seq index
            self.conn.execute(stmt)
        self.insert = sql.insert_entry
        self.n = 0

    def chunk(self, rows: int) -> float:
        """Rows per second over ``rows`` durable one-row commits."""
        data = [("run-1", f"steps/s{self.n + i}", self.n + i + 1, "step", None, TARGET_JSON, VALUE, 2)
                for i in range(rows)]
        self.n += rows
        conn, insert = self.conn, self.insert
        start = time.perf_counter()
        for row in data:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(insert, row)
            conn.execute("COMMIT")
        return rows / (time.perf_counter() - start)


class OneWriter:
    """``SqliteStore.append`` from one thread, each append durable before the next."""

    def __init__(self, path: str) -> None:
        self.store = SqliteStore(path)
        self.store.admit(Admission("run-1"))
        self.n = 0

    def chunk(self, rows: int) -> tuple[float, int]:
        entries = [Entry(f"steps/s{self.n + i}", "step", VALUE, 2, None, TARGET) for i in range(rows)]
        self.n += rows
        store, commits = self.store, self.store.stats.commits
        start = time.perf_counter()
        for e in entries:
            store.append("run-1", e)
        return rows / (time.perf_counter() - start), store.stats.commits - commits


class ManyRuns:
    """``threads`` threads, each appending to its own run; group commit shares the fsyncs."""

    def __init__(self, path: str, threads: int) -> None:
        self.store = SqliteStore(path)
        self.threads = threads
        for t in range(threads):
            self.store.admit(Admission(f"run-{t}"))
        self.n = 0

    def chunk(self, per_thread: int) -> tuple[float, int]:
        store = self.store
        entries = [Entry(f"steps/s{self.n + i}", "step", VALUE, 2, None, TARGET) for i in range(per_thread)]
        self.n += per_thread
        gate = threading.Barrier(self.threads + 1)

        def work(run: str) -> None:
            gate.wait()
            for e in entries:
                store.append(run, e)

        pool = [threading.Thread(target=work, args=(f"run-{t}",)) for t in range(self.threads)]
        for th in pool:
            th.start()
        commits = store.stats.commits
        gate.wait()
        start = time.perf_counter()
        for th in pool:
            th.join()
        total = self.threads * per_thread
        return total / (time.perf_counter() - start), store.stats.commits - commits


class ManyRunsAsync:
    """The same ``runs`` concurrent runs as asyncio tasks — how telo's runtime appends (``AsyncStore`` →
    ``submit_append_async``): each run awaits its append durable before the next, a batch's callers are woken
    in one loop iteration instead of one OS thread each."""

    def __init__(self, path: str, runs: int) -> None:
        self.store = SqliteStore(path)
        self.runs = runs
        for t in range(runs):
            self.store.admit(Admission(f"run-{t}"))
        self.n = 0
        self.loop = asyncio.new_event_loop()

    def chunk(self, per_run: int) -> tuple[float, int]:
        store = self.store
        entries = [Entry(f"steps/s{self.n + i}", "step", VALUE, 2, None, TARGET) for i in range(per_run)]
        self.n += per_run

        async def work(run: str) -> None:
            for e in entries:
                await store.submit_append_async(run, e)

        async def all_runs() -> float:
            start = time.perf_counter()
            await asyncio.gather(*(work(f"run-{t}") for t in range(self.runs)))
            return time.perf_counter() - start

        commits = store.stats.commits
        elapsed = self.loop.run_until_complete(all_runs())
        return self.runs * per_run / elapsed, store.stats.commits - commits

    def close(self) -> None:
        self.store.close()
        self.loop.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15, help="rounds of (raw, one writer, many runs) chunks")
    ap.add_argument("--rows", type=int, default=300, help="rows per round for raw and the one writer")
    ap.add_argument("--threads", type=int, default=100)
    ap.add_argument("--per-thread", type=int, default=10, help="appends per thread per round")
    ap.add_argument("--dir", default=str(REPO), help="where the temporary database files go (not tmpfs)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix=".bench-journal-", dir=args.dir) as d:
        raw = Raw(os.path.join(d, "raw.db"))
        one = OneWriter(os.path.join(d, "one.db"))
        many = ManyRuns(os.path.join(d, "many.db"), args.threads)
        tasks = ManyRunsAsync(os.path.join(d, "tasks.db"), args.threads)
        raw.chunk(50)  # warm up caches and the WAL files
        one.chunk(50)
        many.chunk(2)
        tasks.chunk(2)
        # Short chunks, interleaved, ratios per round: other load on the machine shifts fsync latency by
        # several times within seconds, and must hit the figures being compared alike.
        r_raw, r_one, r_many, b_one, b_many, r_tasks, b_tasks = [], [], [], [], [], [], []
        for _ in range(args.rounds):
            r_raw.append(raw.chunk(args.rows))
            rate, commits = one.chunk(args.rows)
            r_one.append(rate)
            b_one.append(args.rows / commits)
            rate, commits = many.chunk(args.per_thread)
            r_many.append(rate)
            b_many.append(args.threads * args.per_thread / commits)
            rate, commits = tasks.chunk(args.per_thread)
            r_tasks.append(rate)
            b_tasks.append(args.threads * args.per_thread / commits)
        tasks.close()
        one.store.close()
        many.store.close()
        raw.conn.close()

    med = statistics.median
    one_ratio = med(o / r for o, r in zip(r_one, r_raw, strict=True))
    many_ratio = med(m / r for m, r in zip(r_many, r_raw, strict=True))
    tasks_ratio = med(m / r for m, r in zip(r_tasks, r_raw, strict=True))
    print(f"sqlite {sqlite3.sqlite_version}, WAL, synchronous=FULL, {args.rounds} rounds, files under {args.dir}")
    print(f"raw one-row commits   : {med(r_raw):8.0f} rows/s     ({1e6 / med(r_raw):.0f} us/commit; "
          f"rounds {min(r_raw):.0f}..{max(r_raw):.0f})")
    print(f"SqliteStore 1 writer  : {med(r_one):8.0f} appends/s  ratio {one_ratio:.2f} (target >= 0.70)  "
          f"mean batch {med(b_one):.1f}")
    print(f"SqliteStore {args.threads} runs  : {med(r_many):8.0f} appends/s  ratio {many_ratio:.2f} (target >= 3.00)  "
          f"mean batch {med(b_many):.1f}")
    print(f"SqliteStore {args.threads} runs as asyncio tasks (the runtime's path): {med(r_tasks):8.0f} appends/s  "
          f"ratio {tasks_ratio:.2f} (target >= 3.00)  mean batch {med(b_tasks):.1f}")
    print("(ratios: median over rounds of the per-round ratio to the raw loop)")


if __name__ == "__main__":
    main()
