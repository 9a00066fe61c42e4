"""DBOS on PostgreSQL: the peer of ``benchmarks/postgres.py --peers`` (run there, in the peers venv).

The workflows are ``benchmarks/peers/dbos_bench.py``'s (10 ``@DBOS.step()`` functions, each returning a small
dict built from the previous step's result); the system database is ``--url``, a database of the same
PostgreSQL server telo's figures are measured on. Two roles:

- ``--role app`` (the default) launches DBOS listening to no queue, warms up, prints ``ready`` and then runs
  one phase per line read on its standard input, printing one JSON line for each:
  ``sequential`` — ``--runs`` runs of the sync workflow one after another;
  ``in_flight`` — ``--runs`` async runs with at most ``--inflight`` at once;
  ``enqueue QUEUE N`` — registers QUEUE (``worker_concurrency`` ``--concurrency``, ``polling_interval_sec``
  ``--poll``) and enqueues N runs of the sync workflow on it, untimed; ``quit``.
- ``--role worker --queue QUEUE --executor ID`` launches DBOS with executor id ID, listening to QUEUE only, and
  runs what it dequeues until its standard input closes. The parent times the drain (from starting the
  processes until every run on QUEUE is ``SUCCESS``) and reads each process's share from the workflows'
  ``executor_id``.

The parent drives one phase at a time so that it can measure the raw commit rate, the server's CPU, its
transaction ids and its WAL right around each; each phase line carries the CPU time this process spent in it
(``time.process_time()``, all threads).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dbos import DBOS, DBOSConfig
from dbos_bench import STEPS, aflow, flow  # the same workflows as on SQLite


def emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def timed(phase: str, runs: int, body: Callable[[], None]) -> dict:
    cpu, t0 = time.process_time(), time.perf_counter()
    body()
    elapsed = time.perf_counter() - t0
    return {"phase": phase, "steps_per_s": runs * STEPS / elapsed, "elapsed_s": elapsed,
            "cpu_s": time.process_time() - cpu}


def app(args: argparse.Namespace) -> None:
    launch(args, "bench-app", [])  # this process enqueues; only the worker processes dequeue
    loop = asyncio.new_event_loop()  # one loop for every async phase: DBOS keeps state bound to it

    def sequential(runs: int) -> None:
        for _ in range(runs):
            assert flow(0)["n"] == STEPS - 1

    def in_flight(runs: int) -> None:
        async def all_runs() -> None:
            gate = asyncio.Semaphore(args.inflight)

            async def one() -> None:
                async with gate:
                    assert (await aflow(0))["n"] == STEPS - 1

            await asyncio.gather(*(one() for _ in range(runs)))

        loop.run_until_complete(all_runs())

    sequential(20)  # warm-up
    in_flight(args.inflight)
    emit({"ready": True})
    try:
        for line in sys.stdin:
            cmd = line.split()
            if not cmd:
                continue
            if cmd[0] == "sequential":
                emit(timed("sequential", args.runs, lambda: sequential(args.runs)))
            elif cmd[0] == "in_flight":
                emit(timed("in_flight", args.runs, lambda: in_flight(args.runs)))
            elif cmd[0] == "enqueue":
                queue = DBOS.register_queue(cmd[1], worker_concurrency=args.concurrency,
                                            polling_interval_sec=args.poll)
                for _ in range(int(cmd[2])):
                    queue.enqueue(flow, 0)
                emit({"phase": "enqueue", "queue": cmd[1], "enqueued": int(cmd[2])})
            elif cmd[0] == "quit":
                break
            else:
                emit({"error": f"unknown command {line.strip()!r}"})
    finally:
        DBOS.destroy()
        loop.close()


def worker(args: argparse.Namespace) -> None:
    launch(args, args.executor, [args.queue])
    try:
        sys.stdin.read()  # the parent closes it once the queue is drained
    finally:
        DBOS.destroy()
    emit({"executor": args.executor, "cpu_s": time.process_time()})


def launch(args: argparse.Namespace, executor: str, queues: list[str]) -> None:
    config: DBOSConfig = {"name": "telo-bench", "system_database_url": args.url, "run_admin_server": False,
                          "executor_id": executor}
    DBOS(config=config)
    DBOS.listen_queues(queues)
    DBOS.launch()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="postgresql:// URL of DBOS's system database")
    ap.add_argument("--role", choices=("app", "worker"), default="app")
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--inflight", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=100, help="the queue's worker_concurrency")
    ap.add_argument("--poll", type=float, default=1.0, help="the queue's polling_interval_sec")
    ap.add_argument("--queue", help="worker: the queue to drain")
    ap.add_argument("--executor", default="bench-worker", help="worker: its DBOS executor id")
    args = ap.parse_args()
    assert args.steps == STEPS
    logging.disable(logging.WARNING)
    if args.role == "app":
        app(args)
    else:
        worker(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
