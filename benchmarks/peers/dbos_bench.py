"""DBOS on the durable-workflow benchmark's workload (run by ``benchmarks/durable.py --peers`` in its own venv).

A workflow of 10 ``@DBOS.step()`` functions (each returns a small dict built from the previous step's
result), SQLite system database in ``--dir``; ``--runs`` runs sequentially (the sync API, each run awaited
before the next), then ``--runs`` async runs with at most ``--inflight`` in flight. ``--journal wal`` switches
the database file to WAL first (``synchronous`` stays SQLite's default FULL, as telo's journal); ``default``
keeps DBOS's own SQLite setup (rollback journal, synchronous FULL). Prints one JSON line of steps/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sqlite3
import sys
import time
import traceback

from dbos import DBOS, DBOSConfig, SetWorkflowID

STEPS = 10


@DBOS.step()
def step(n: int, tag: str) -> dict:
    return {"n": n, "tag": tag}


@DBOS.workflow()
def flow(start: int) -> dict:
    r = step(start, "s0")
    for _ in range(1, STEPS):
        r = step(r["n"] + 1, f"s{r['n']}")
    return r


@DBOS.step()
async def astep(n: int, tag: str) -> dict:
    return {"n": n, "tag": tag}


@DBOS.workflow()
async def aflow(start: int) -> dict:
    r = await astep(start, "s0")
    for _ in range(1, STEPS):
        r = await astep(r["n"] + 1, f"s{r['n']}")
    return r


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--inflight", type=int, default=100)
    ap.add_argument("--journal", choices=("wal", "default"), default="wal")
    args = ap.parse_args()
    assert args.steps == STEPS
    logging.disable(logging.WARNING)
    path = os.path.join(args.dir, f"dbos-{args.journal}.sqlite")
    if args.journal == "wal":
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=WAL")  # persistent in the file: DBOS's connections open it in WAL
        conn.close()
    config: DBOSConfig = {"name": "telo-bench", "system_database_url": f"sqlite:///{path}",
                          "run_admin_server": False}
    DBOS(config=config)
    DBOS.launch()
    out: dict = {"peer": "dbos", "journal": args.journal}
    try:
        for i in range(20):  # warm-up
            with SetWorkflowID(f"warm-{i}"):
                flow(0)
        t0 = time.perf_counter()
        for i in range(args.runs):
            with SetWorkflowID(f"seq-{i}"):
                assert flow(0)["n"] == STEPS - 1
        out["sequential"] = args.runs * STEPS / (time.perf_counter() - t0)

        async def concurrent() -> float:
            gate = asyncio.Semaphore(args.inflight)

            async def one(i: int) -> None:
                async with gate:
                    with SetWorkflowID(f"par-{i}"):
                        r = await aflow(0)
                    assert r["n"] == STEPS - 1

            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(args.runs)))
            return args.runs * STEPS / (time.perf_counter() - t0)

        try:
            out["in_flight"] = asyncio.run(concurrent())
        except Exception as exc:  # report the sequential figure anyway
            traceback.print_exc()
            out["in_flight_error"] = f"{type(exc).__name__}: {exc}"[:160]
        conn = sqlite3.connect(path)
        out["journal_mode"] = conn.execute("PRAGMA journal_mode").fetchone()[0]
        conn.close()
    finally:
        DBOS.destroy()
    out["note"] = f"SQLite {out.get('journal_mode', args.journal)}"
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
