"""What a ``Local.Queue`` costs the 100-in-flight workload (issue 16: "the overhead of a queue on 100-in-flight
throughput, target <= 15 %"), on SQLite and PostgreSQL.

The workload is ``benchmarks/durable.py``'s "100 in flight": a ``Local.Workflow`` of 10 idempotent
``Py.Function`` steps, ``--runs`` runs started through the dispatch chokepoint with at most ``--inflight``
executing at once (an ``asyncio.Semaphore``), each awaited to completion; only the 10 function steps count.
Measured in one process, the same workflow three ways, each on a journal of its own, in ``--rounds`` rounds whose
order rotates (so that the machine's load hits each alike):

- **unqueued**: the workflow as ``benchmarks/durable.py`` ships it — a start admits the run with its claim in the
  group commit and the body starts meanwhile;
- **queued, never the limit**: the workflow names a ``Local.Queue`` with ``concurrency: --concurrency``
  (1000: never reached with 100 in flight) — a start admits the run ``scheduled`` and asks the journal for a
  slot in the same operation (``Store.admit_granted``: on SQLite one transaction, the queue's slots counted in
  it; on PostgreSQL the starts of the moment admitted and granted in one transaction under the queue's lock) and
  executes it once granted: what a queue costs when it does not hold anything back;
- **queued at the limit**: ``concurrency`` = ``--inflight`` (100) — every slot in use while runs keep
  coming, so a start may find the queue full and wait for a slot (``telo.kinds.queued``: it asks again every
  500 ms).

A figure is the median of its rounds; "vs unqueued" the median of the per-round ratios. CPU µs per step: this
process's (``time.process_time()``, all threads) over the steps; on PostgreSQL also the server's (its
processes in /proc, when the script runs its own cluster — ``benchmarks/postgres.py``'s ``Cluster`` and
``Meter``) and the write transactions per step (``txid_current()`` deltas).

    .venv/bin/python benchmarks/queue_overhead.py [--rounds 5] [--runs 300] [--inflight 100] [--concurrency 1000]
                                         [--postgres] [--url URL] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKFLOW = "kind: Local.Workflow\nmetadata: { name: flow }\njournal: !ref runs\n"
QUEUE = "kind: Local.Queue\nmetadata: { name: q }\njournal: !ref runs\nconcurrency: %d\n---\n"


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"telo_bench_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


durable = load("durable")
STEPS: int = durable.STEPS


def queued_app(manifest: Path, concurrency: int | None) -> Path:
    """``manifest`` (benchmarks/durable.py's) with its workflow on a queue of ``concurrency`` (None: as is)."""
    if concurrency is not None:
        text = manifest.read_text()
        assert WORKFLOW in text, "benchmarks/durable.py's manifest changed shape"
        manifest.write_text(text.replace(WORKFLOW, QUEUE % concurrency + WORKFLOW + "queue: !ref q\n"))
    return manifest


class Bench(durable.TeloBench):  # type: ignore[misc,name-defined]
    """``TeloBench`` that also awaits a queued start: its hold is the wait for a slot, which then executes the
    run to rest (``telo.kinds.queued.await_slot``), so the execution is read from the workflow afterwards."""

    async def start_and_wait(self, start: int = 0) -> None:
        slot: list[Any] = []
        durable._SLOT.set(slot)
        out = await self.dispatch(self.flow, {"start": start}, events=self.app.events)
        assert out.get("started"), out
        execution = await slot[0]
        if execution is None:  # a queued start: the run executed inside the wait for its slot
            execution = self.app.resources["flow"].executions.pop(out["runId"])
        assert execution.status == "completed", (execution.status, execution.error)
        assert execution.executed_steps == STEPS


async def in_flight(bench: Bench, runs: int, limit: int) -> float:
    gate = asyncio.Semaphore(limit)

    async def one() -> None:
        async with gate:
            await bench.start_and_wait()

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(runs)))
    return runs * STEPS / (time.perf_counter() - t0)


async def rounds(benches: dict[str, Bench], args: argparse.Namespace, meter: Any = None) -> dict[str, list[Any]]:
    """Each variant's in-flight blocks, ``args.rounds`` rounds in a rotating order: (steps/s, CPU µs/step, and —
    with ``meter``, PostgreSQL — its per-step server figures)."""
    for b in benches.values():  # warm up: files, connections, CEL programs, imports
        await in_flight(b, min(100, args.runs), args.inflight)
    names = list(benches)
    out: dict[str, list[Any]] = {n: [] for n in names}
    steps = args.runs * STEPS
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        print(f"round {r + 1}/{args.rounds}: {', '.join(order)}", flush=True)
        for n in order:
            a = meter.snap() if meter is not None else None
            cpu = time.process_time()
            rate = await in_flight(benches[n], args.runs, args.inflight)
            cpu_us = (time.process_time() - cpu) / steps * 1e6
            extra = meter.per_step(a, meter.snap(), steps, "self") if meter is not None else {}
            out[n].append({"rate": rate, "cpu_us": cpu_us, **extra})
    return out


async def measure(make: Any, args: argparse.Namespace, d: Path, meter: Any = None) -> dict[str, list[Any]]:
    """``make(dir, name)``: the app directory of one variant (benchmarks/durable.py's workload on its journal)."""
    variants = {"unqueued": None, "queued, never the limit": args.concurrency,
                f"queued at the limit ({args.inflight})": args.inflight}
    benches = {n: Bench(queued_app(make(d / f"app{i}", f"v{i}"), c)) for i, (n, c) in enumerate(variants.items())}
    opened = []
    try:
        for b in benches.values():
            await b.open()
            opened.append(b)
        return await rounds(benches, args, meter)
    finally:
        for b in opened:
            await b.close()


def report(title: str, res: dict[str, list[Any]], args: argparse.Namespace) -> None:
    base = res["unqueued"]
    print(f"\n{title}\n")
    pg = "server_us" in base[0]
    head = "| workload | steps/s | vs unqueued | client CPU µs/step |" + (
        " server CPU µs/step | write xacts/step |" if pg else "")
    print(head)
    print("|---|--:|--:|--:|" + ("--:|--:|" if pg else ""))
    for name, blocks in res.items():
        ratio = statistics.median(b["rate"] / u["rate"] for b, u in zip(blocks, base, strict=True))
        cells = [f"{statistics.median(b['rate'] for b in blocks):,.0f}", f"{ratio:.2f}x",
                 f"{statistics.median(b['cpu_us'] for b in blocks):.0f}"]
        if pg:
            server = [b["server_us"] for b in blocks if b.get("server_us") is not None]
            cells += [f"{statistics.median(server):.0f}" if server else "n/a",
                      f"{statistics.median(b['xacts'] for b in blocks):.2f}"]
        print(f"| {name} ({args.runs} x {STEPS} steps, {args.inflight} in flight) | " + " | ".join(cells) + " |")
    print("\nper round steps/s: " + "; ".join(f"{n}: " + ", ".join(f"{b['rate']:,.0f}" for b in bs)
                                          for n, bs in res.items()))


def sqlite_run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix=".bench-queue-", dir=args.dir) as tmp:
        d = Path(tmp)

        def make(app: Path, name: str) -> Path:
            return Path(durable.write_app(app, str(d / f"{name}.db")))

        res = asyncio.run(measure(make, args, d))
    report(f"SQLite {sqlite3.sqlite_version} (WAL, synchronous=FULL)", res, args)


def postgres_run(args: argparse.Namespace) -> None:
    pg = load("postgres")
    with tempfile.TemporaryDirectory(prefix=".bench-queue-pg-", dir=args.dir) as tmp:
        d = Path(tmp)
        cluster = None if args.url else pg.Cluster(d)
        try:
            url = cluster.start() if cluster is not None else args.url
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                postmaster = cluster.postmaster() if cluster is not None else pg.postmaster_of(conn)
            info = pg.server_info(url)
            prefix = "tq" + os.urandom(4).hex()
            meter = pg.Meter(url, postmaster)

            def make(app: Path, name: str) -> Path:
                return Path(pg.app_dir(app, url, f"{prefix}_{name}"))

            try:
                res = asyncio.run(measure(make, args, d, meter))
            finally:
                meter.close()
                if cluster is None:
                    pg.drop_own(url, prefix, None)
        finally:
            pg.stop_processes(pg.CHILDREN)
            if cluster is not None:
                cluster.stop()
    report(f"PostgreSQL {info['version']} (fsync={info['fsync']}, synchronous_commit={info['synchronous_commit']}; "
           f"{'own cluster' if cluster is not None else '--url'})", res, args)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=300, help="workflow runs per block")
    ap.add_argument("--inflight", type=int, default=100, help="runs executing at once")
    ap.add_argument("--concurrency", type=int, default=1000, help="the queue's concurrency when it is never the limit")
    ap.add_argument("--postgres", action="store_true", help="also on PostgreSQL (benchmarks/postgres.py's cluster)")
    ap.add_argument("--postgres-only", action="store_true")
    ap.add_argument("--url", help="an existing PostgreSQL server instead of a throwaway cluster")
    ap.add_argument("--dir", default=str(REPO), help="where the journals go (not tmpfs)")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at "
          f"start", flush=True)
    if not args.postgres_only:
        sqlite_run(args)
    if args.postgres or args.postgres_only:
        postgres_run(args)
    print(f"\nload average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
