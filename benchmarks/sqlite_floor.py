"""How close a sequential durable run on SQLite can come to the raw commit rate: SQLite's own work, set apart.

The workload of ``benchmarks/durable.py`` (10 idempotent steps a run, sequential) runs with every statement of
the journal's writer connection recorded (its SQL and parameters, in order). The recording is then replayed
into a fresh journal of the same schema — the same statements, one after another, nothing between them — so
the replay's time is what SQLite itself costs for those runs (prepare, b-tree and WAL work, the fsyncs), and
the rest of a run's wall time is the runtime's Python: evaluating, encoding, checking, scheduling. Both
durability modes, in ``--rounds`` rounds interleaved with ``benchmarks/journal.py``'s raw one-row
``INSERT`` + ``COMMIT`` loop (the baseline of every SQLite ratio); medians.

From these it prints the **floors** that bound issue 14's SQLite targets:

- ``durability: eager`` sequential can reach at best raw rate x (raw commit time) / (eager's SQLite work a step
  + the deferred step's Python): an eager step that adds no Python at all to a deferred one;
- ``--dbos STEPS_PER_S`` (DBOS's sequential rate measured by ``benchmarks/durable.py --peers``): the time a
  step may take for telo to run at ``--times`` x that rate, and what that leaves for Python once SQLite's work
  is paid.

It also counts the WAL frames (pages written) a commit of each kind writes, and which b-tree they belong to
(SQLite's ``dbstat``), replaying once more with automatic checkpoints off. The instrumentation costs a little
(a Python wrapper around each statement); the replay has none.

    .venv/bin/python benchmarks/sqlite_floor.py [--runs 300] [--rounds 3] [--dbos 733 --times 12]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import importlib.util
import os
import re
import sqlite3
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

_WAL_HEADER, _FRAME_HEADER = 32, 24
_ADMISSION = re.compile(r"\s*INSERT OR IGNORE INTO \w+_runs\b")
_COMPLETION = re.compile(r"\s*UPDATE \w+_runs SET status\b")


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"telo_bench_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Recording(sqlite3.Connection):
    """A connection that records its statements (SQL, parameters) into ``log`` while ``on``."""

    log: ClassVar[list[tuple[int, str, Any]]] = []
    on: ClassVar[bool] = False

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        if Recording.on:
            Recording.log.append((id(self), sql, parameters))
        return super().execute(sql, parameters)


def recording_connect() -> None:
    """Every connection the journal opens from now on records (the store calls ``sqlite3.connect``)."""
    connect = sqlite3.connect

    def wrapped(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs.setdefault("factory", Recording)
        return connect(*args, **kwargs)

    sqlite3.connect = wrapped  # type: ignore[assignment]


async def measure(bd: Any, d: Path, durability: str, runs: int) -> tuple[float, list[tuple[str, Any]], list[str]]:
    """Wall seconds a step over ``runs`` sequential runs; the writer connection's statements; the schema."""
    bench = bd.TeloBench(bd.write_app(d / durability, str(d / f"{durability}.db"), durability))
    await bench.open()
    try:
        await bench.sequential(50)
        Recording.log.clear()
        Recording.on = True
        t0 = time.perf_counter()
        await bench.sequential(runs)
        wall = (time.perf_counter() - t0) / (runs * bd.STEPS)
        Recording.on = False
    finally:
        await bench.close()
    writers = {conn for conn, sql, _ in Recording.log if sql.startswith("BEGIN")}
    assert len(writers) == 1, f"expected one writer connection, saw {len(writers)}"
    statements = [(sql, params) for conn, sql, params in Recording.log if conn in writers]
    source = sqlite3.connect(str(d / f"{durability}.db"))
    schema = [sql for (sql,) in source.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")]
    source.close()
    return wall, statements, schema


def fresh(path: str, schema: list[str], *, autocheckpoint: bool = True) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, cached_statements=256)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    for sql in schema:
        conn.execute(sql)
    if not autocheckpoint:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    return conn


def replay(conn: sqlite3.Connection, statements: list[tuple[str, Any]]) -> float:
    """Seconds to run the recorded statements, one after another (a statement that failed in the runtime — a
    first writer's win — fails here too and is skipped the same way)."""
    t0 = time.perf_counter()
    for sql, params in statements:
        try:
            conn.execute(sql, params).fetchall()
        except sqlite3.Error:
            if sql == "COMMIT" or sql.startswith("BEGIN"):
                raise
    return time.perf_counter() - t0


def frames(d: Path, name: str, statements: list[tuple[str, Any]], schema: list[str]) -> tuple[dict[str, float],
                                                                                                 dict[str, float]]:
    """WAL frames a commit writes, by kind of commit (a run's admission, its completion, neither) and by b-tree."""
    path = str(d / f"frames-{name}.db")
    conn = fresh(path, schema, autocheckpoint=False)
    by_kind: collections.Counter[str] = collections.Counter()
    commits: collections.Counter[str] = collections.Counter()
    kinds: list[str] = []
    last = 0
    for sql, params in statements:
        with contextlib.suppress(sqlite3.Error):  # (as in the runtime: a first writer's win)
            conn.execute(sql, params).fetchall()
        if _ADMISSION.match(sql):
            kinds.append("admission")
        elif _COMPLETION.match(sql):
            kinds.append("completion")
        if sql == "COMMIT":
            size = os.path.getsize(path + "-wal")
            kind = "+".join(kinds) or "entries only"
            by_kind[kind] += (size - max(last, _WAL_HEADER)) / (_FRAME_HEADER + 4096)
            commits[kind] += 1
            last, kinds = size, []
    pages: list[int] = []
    with open(path + "-wal", "rb") as wal:
        data = wal.read()
    at = _WAL_HEADER
    while at + _FRAME_HEADER + 4096 <= len(data):
        pages.append(struct.unpack(">I", data[at:at + 4])[0])
        at += _FRAME_HEADER + 4096
    owners: dict[int, str] = {}
    with contextlib.suppress(sqlite3.Error):  # (a SQLite built without the dbstat table)
        owners = {page: tree for tree, page in conn.execute("SELECT name, pageno FROM dbstat")}
    conn.close()
    total = sum(commits.values())
    trees = collections.Counter(owners.get(page, "?") for page in pages)
    return ({k: by_kind[k] / commits[k] for k in commits} | {"all commits": sum(by_kind.values()) / total},
            {tree: n / total for tree, n in trees.most_common()})


async def main(args: argparse.Namespace) -> None:
    bd = load("durable")
    raw_cls = bd.load_raw_baseline()  # (the one raw baseline of every benchmark)
    recording_connect()
    steps = args.runs * bd.STEPS
    wall: dict[str, list[float]] = {"deferred": [], "eager": []}
    alone: dict[str, list[float]] = {"deferred": [], "eager": []}
    raw_rates: list[float] = []
    recorded: dict[str, tuple[list[tuple[str, Any]], list[str]]] = {}
    with tempfile.TemporaryDirectory(prefix=".bench-floor-", dir=str(HERE.parent)) as tmp:
        d = Path(tmp)
        raw = raw_cls(str(d / "raw.db"))
        raw.chunk(300)
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds} ...", file=sys.stderr)
            raw_rates.append(raw.chunk(3000))
            for mode in ("deferred", "eager"):
                rd = d / f"r{r}"
                rd.mkdir(exist_ok=True)
                w, statements, schema = await measure(bd, rd, mode, args.runs)
                conn = fresh(str(rd / f"replay-{mode}.db"), schema)
                alone[mode].append(replay(conn, statements) / steps)
                conn.close()
                wall[mode].append(w)
                recorded[mode] = (statements, schema)
            raw_rates.append(raw.chunk(3000))
        counted = {mode: frames(d, mode, *recorded[mode]) for mode in ("deferred", "eager")}
        raw_frames = raw_frames_per_commit(raw_cls, d)
    raw_rate = statistics.median(raw_rates)
    us = 1e6
    med = {mode: (statistics.median(wall[mode]), statistics.median(alone[mode])) for mode in wall}
    print(f"\nsequential, {args.runs} runs x {bd.STEPS} steps, {args.rounds} rounds (medians); raw one-row commits "
          f"{raw_rate:,.0f}/s = {us / raw_rate:,.0f} us a commit ({min(raw_rates):,.0f}..{max(raw_rates):,.0f}), "
          f"{raw_frames:.2f} WAL frames a commit\n")
    print("| durability | steps/s | vs raw | wall us/step | SQLite alone us/step | the rest (Python) us/step |")
    print("|---|--:|--:|--:|--:|--:|")
    for mode, (w, a) in med.items():
        print(f"| {mode} | {1 / w:,.0f} | {(1 / w) / raw_rate:.2f}x | {w * us:,.0f} | {a * us:,.0f} | "
              f"{(w - a) * us:,.0f} |")
    for mode, (by_kind, trees) in counted.items():
        print(f"\nWAL frames a commit, {mode}: " + ", ".join(f"{k} {v:.2f}" for k, v in by_kind.items()))
        print("  by b-tree: " + ", ".join(f"{tree} {n:.2f}" for tree, n in trees.items()))
    python_deferred = med["deferred"][0] - med["deferred"][1]
    floor = 1 / (med["eager"][1] + python_deferred)
    print(f"\neager floor (its SQLite work, {med['eager'][1] * us:,.0f} us a step, + the deferred step's Python, "
          f"{python_deferred * us:,.0f} us): {floor:,.0f} steps/s = {floor / raw_rate:.2f}x raw "
          f"(measured {1 / med['eager'][0]:,.0f} = {(1 / med['eager'][0]) / raw_rate:.2f}x)")
    if args.dbos:
        budget = 1 / (args.times * args.dbos)
        left = budget - med["deferred"][1]
        print(f"default sequential at {args.times:g}x DBOS ({args.dbos:,.0f} steps/s): {budget * us:,.0f} us a step; "
              f"SQLite's work {med['deferred'][1] * us:,.0f} us leaves {left * us:,.0f} us for Python "
              f"(measured {python_deferred * us:,.0f} us: {python_deferred / left - 1:+.0%})")


def raw_frames_per_commit(raw_cls: Any, d: Path) -> float:
    raw = raw_cls(str(d / "raw-frames.db"))
    raw.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.conn.execute("PRAGMA wal_autocheckpoint = 0")
    raw.chunk(1000)
    return (os.path.getsize(str(d / "raw-frames.db-wal")) - _WAL_HEADER) / (_FRAME_HEADER + 4096) / 1000


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dbos", type=float, help="DBOS's sequential steps/s (benchmarks/durable.py --peers)")
    ap.add_argument("--times", type=float, default=12.0, help="the multiple of --dbos to budget for (default 12)")
    asyncio.run(main(ap.parse_args()))
