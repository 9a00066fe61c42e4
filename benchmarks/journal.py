"""SQLite journal append throughput against raw one-row durable commits (ARCHITECTURE §3 "SQLite").

Three measurements in one process, on files in a temporary directory on the repository's filesystem (never
tmpfs: the point is a real fsync):

- **raw**: a plain ``sqlite3`` loop, WAL + ``synchronous=FULL``, one ``INSERT`` + ``COMMIT`` per row, into a
  table of the journal's entry shape (same key and seq index) with the same row contents — the durable
  one-commit-per-step ceiling;
- **one writer**: ``SqliteStore.append`` from one thread, each append durable before the next;
- **100 runs**: 100 threads, each appending to its own run — group commit shares each fsync between them.

Targets: one writer ≥ 0.70 x raw; 100 runs ≥ 3 x raw.

    .venv/bin/python benchmarks/journal.py [--rows 3000] [--threads 100] [--per-thread 60] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from telo.journal.model import Admission, Entry
from telo.journal.sqlite import SqliteStore
from telo.journal.sqlite_schema import Sql

TARGET = {"kind": "Python.Function", "name": "charge", "module": "file:///app/orders.yaml"}
VALUE = '{"$telo":"map","value":[["charged","10.5"],["order","A-1"],["status","ok"]]}'  # frame-sized text
TARGET_JSON = '{"kind":"Python.Function","name":"charge","module":"file:///app/orders.yaml"}'
REPO = Path(__file__).resolve().parent.parent


def raw_commits(path: str, rows: int) -> float:
    """Rows per second with one durable COMMIT per row."""
    sql = Sql.for_prefix("raw")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    for stmt in sql.ddl[1:3]:  # the entries table and its seq index
        conn.execute(stmt)
    insert = sql.insert_entry
    data = [("run-1", f"steps/s{i}", i + 1, "step", None, TARGET_JSON, VALUE, 2) for i in range(rows)]
    start = time.perf_counter()
    for row in data:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(insert, row)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return rows / elapsed


def _entries(n: int) -> list[Entry]:
    return [Entry(f"steps/s{i}", "step", VALUE, 2, None, TARGET) for i in range(n)]


def one_writer(path: str, rows: int) -> tuple[float, float]:
    """Appends per second from one thread, and the mean batch size."""
    with SqliteStore(path) as store:
        store.admit(Admission("run-1"))
        entries = _entries(rows)
        before = store.stats.commits
        start = time.perf_counter()
        for e in entries:
            store.append("run-1", e)
        elapsed = time.perf_counter() - start
        return rows / elapsed, rows / (store.stats.commits - before)


def many_runs(path: str, threads: int, per_thread: int) -> tuple[float, float]:
    """Appends per second with ``threads`` threads, each appending to its own run; and the mean batch size."""
    with SqliteStore(path) as store:
        for t in range(threads):
            store.admit(Admission(f"run-{t}"))
        entries = _entries(per_thread)
        gate = threading.Barrier(threads + 1)

        def work(t: int) -> None:
            run = f"run-{t}"
            gate.wait()
            for e in entries:
                store.append(run, e)

        pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for th in pool:
            th.start()
        before = store.stats.commits
        gate.wait()
        start = time.perf_counter()
        for th in pool:
            th.join()
        elapsed = time.perf_counter() - start
        total = threads * per_thread
        return total / elapsed, total / (store.stats.commits - before)


def _fresh(directory: str, name: str) -> str:
    path = os.path.join(directory, name)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return path


def _median(fn: Callable[[], float], repeat: int) -> float:
    return statistics.median(fn() for _ in range(repeat))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=3000, help="rows for the raw loop and the one-writer run")
    ap.add_argument("--threads", type=int, default=100)
    ap.add_argument("--per-thread", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported")
    ap.add_argument("--dir", default=str(REPO), help="where the temporary database files go (not tmpfs)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix=".bench-journal-", dir=args.dir) as d:
        # Interleave the measurements so drift in the disk's speed affects all of them alike.
        raw: list[float] = []
        one: list[tuple[float, float]] = []
        many: list[tuple[float, float]] = []
        for _ in range(args.repeat):
            raw.append(raw_commits(_fresh(d, "raw.db"), args.rows))
            one.append(one_writer(_fresh(d, "one.db"), args.rows))
            many.append(many_runs(_fresh(d, "many.db"), args.threads, args.per_thread))
        raw_rate = statistics.median(raw)
        one_rate = statistics.median(r for r, _ in one)
        many_rate = statistics.median(r for r, _ in many)
        print(f"sqlite {sqlite3.sqlite_version}, WAL, synchronous=FULL, files in {d}")
        print(f"raw one-row commits      : {raw_rate:9.0f} rows/s  ({1e6 / raw_rate:.0f} us/commit)")
        print(f"SqliteStore, one writer  : {one_rate:9.0f} appends/s  ratio {one_rate / raw_rate:.2f}  "
              f"(target >= 0.70; mean batch {statistics.median(b for _, b in one):.1f})")
        print(f"SqliteStore, {args.threads} runs     : {many_rate:9.0f} appends/s  ratio {many_rate / raw_rate:.2f}  "
              f"(target >= 3.00; mean batch {statistics.median(b for _, b in many):.1f})")


if __name__ == "__main__":
    main()
