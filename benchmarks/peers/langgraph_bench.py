"""LangGraph on the durable-workflow benchmark's workload (run by ``benchmarks/durable.py --peers`` in its own
venv).

A ``StateGraph`` of 10 nodes in a chain (each returns a small dict built from the previous node's output)
with the ``SqliteSaver`` checkpointer (WAL; ``synchronous`` SQLite's default FULL) in ``--dir``, one thread per
run, ``durability="sync"`` so each checkpoint is committed before the next node runs (as telo's journal is).
``--runs`` runs sequentially; then, with ``AsyncSqliteSaver``, ``--runs`` runs with at most ``--inflight`` in
flight. Prints one JSON line of steps/s.
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
from collections.abc import Callable
from typing import TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

STEPS = 10


class State(TypedDict):
    n: int
    tag: str


def node(i: int) -> Callable[[State], dict]:
    def run(state: State) -> dict:
        n = state["n"] + 1 if i else state["n"]
        return {"n": n, "tag": f"s{state['n']}" if i else "s0"}

    return run


def build() -> StateGraph:
    g = StateGraph(State)
    for i in range(STEPS):
        g.add_node(f"s{i}", node(i))
    g.add_edge(START, "s0")
    for i in range(1, STEPS):
        g.add_edge(f"s{i - 1}", f"s{i}")
    g.add_edge(f"s{STEPS - 1}", END)
    return g


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--inflight", type=int, default=100)
    args = ap.parse_args()
    assert args.steps == STEPS
    logging.disable(logging.WARNING)
    out: dict = {"peer": "langgraph"}
    path = os.path.join(args.dir, "langgraph.sqlite")
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    graph = build().compile(checkpointer=saver)

    def run(i: int) -> None:
        r = graph.invoke({"n": 0, "tag": ""}, {"configurable": {"thread_id": f"run-{i}"}}, durability="sync")
        assert r["n"] == STEPS - 1, r

    for i in range(20):  # warm-up
        run(-1 - i)
    t0 = time.perf_counter()
    for i in range(args.runs):
        run(i)
    out["sequential"] = args.runs * STEPS / (time.perf_counter() - t0)
    out["journal_mode"] = conn.execute("PRAGMA journal_mode").fetchone()[0]
    out["synchronous"] = conn.execute("PRAGMA synchronous").fetchone()[0]
    conn.close()

    async def concurrent() -> float:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(os.path.join(args.dir, "langgraph-async.sqlite")) as asaver:
            agraph = build().compile(checkpointer=asaver)
            gate = asyncio.Semaphore(args.inflight)

            async def one(i: int) -> None:
                async with gate:
                    r = await agraph.ainvoke({"n": 0, "tag": ""}, {"configurable": {"thread_id": f"par-{i}"}},
                                             durability="sync")
                assert r["n"] == STEPS - 1, r

            await asyncio.gather(*(one(-1 - i) for i in range(20)))  # warm-up
            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(args.runs)))
            return args.runs * STEPS / (time.perf_counter() - t0)

    try:
        out["in_flight"] = asyncio.run(concurrent())
    except Exception as exc:
        traceback.print_exc()
        out["in_flight_error"] = f"{type(exc).__name__}: {exc}"[:160]
    out["note"] = f"SQLite {out['journal_mode']}, synchronous={out['synchronous']}, durability=sync"
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
