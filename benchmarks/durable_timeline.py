"""Where a sequential durable run's time goes: the workload of ``benchmarks/durable.py``, instrumented.

Runs ``--runs`` workflow runs one after another (after a warm-up) and prints, per run, the median time between
the points a run passes: its start, its body starting, its first step, the end of its last step, the
completion queued, the completion durable. It also prints the writer thread's group commits (count, median
duration, median operations) and how long bodies waited for their deferred entries. The instrumentation wraps
a few functions and costs a little itself; use ``benchmarks/durable.py`` for the figures, this for the split.

    .venv/bin/python benchmarks/durable_timeline.py [--runs 300] [--durability deferred|eager]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))


def load_durable_bench() -> Any:
    spec = importlib.util.spec_from_file_location("telo_bench_durable", HERE / "durable.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Marks:
    def __init__(self) -> None:
        self.at: dict[str, list[float]] = {}
        self.batches: list[tuple[float, int]] = []
        self.waited = 0.0

    def mark(self, name: str) -> None:
        self.at.setdefault(name, []).append(time.perf_counter())

    def clear(self) -> None:
        self.at.clear()
        self.batches.clear()
        self.waited = 0.0


def instrument(marks: Marks) -> None:
    """Wrap the functions a run passes through (module attributes, looked up at call time)."""
    import telo.durable.appends as appends
    import telo.durable.execute as execute
    import telo.durable.handle as handle
    import telo.journal.sqlite_writer as writer
    import telo.kinds.workflow as workflow

    invoke = workflow.Workflow.invoke

    async def timed_invoke(self: Any, inputs: Any) -> Any:
        marks.mark("start")
        return await invoke(self, inputs)

    run_body = execute._run_body

    async def timed_body(*args: Any, **kwargs: Any) -> Any:
        marks.mark("body")
        return await run_body(*args, **kwargs)

    complete = appends.DeferredAppends.complete

    async def timed_complete(*args: Any, **kwargs: Any) -> Any:
        marks.mark("complete")
        out = await complete(*args, **kwargs)
        marks.mark("completed")
        return out

    step = handle.LocalRunHandle.step

    async def timed_step(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        first = path.endswith("/s0") or path == "steps/s0"
        if first:
            marks.mark("first_step")
        out = await step(self, path, *args, **kwargs)
        if path == "steps/s9":
            marks.mark("last_step_end")
        return out

    settle = appends.DeferredAppends._settle

    async def timed_settle(self: Any, upto: int) -> None:
        t0 = time.perf_counter()
        try:
            await settle(self, upto)
        finally:
            marks.waited += time.perf_counter() - t0

    run_batch = writer.SqliteBatches.execute

    def timed_batch(self: Any, live: list[Any], stats: Any) -> None:
        t0 = time.perf_counter()
        run_batch(self, live, stats)
        marks.batches.append((time.perf_counter() - t0, len(live)))

    workflow.Workflow.invoke = timed_invoke  # type: ignore[method-assign]
    execute._run_body = timed_body
    appends.DeferredAppends.complete = timed_complete  # type: ignore[method-assign]
    handle.LocalRunHandle.step = timed_step  # type: ignore[method-assign]
    appends.DeferredAppends._settle = timed_settle  # type: ignore[method-assign]
    writer.SqliteBatches.execute = timed_batch  # type: ignore[method-assign]


async def main(args: argparse.Namespace) -> None:
    bd = load_durable_bench()
    marks = Marks()
    instrument(marks)
    with tempfile.TemporaryDirectory(prefix=".bench-timeline-", dir=str(HERE.parent)) as tmp:
        d = Path(tmp)
        bench = bd.TeloBench(bd.write_app(d / "app", str(d / "telo.db"), args.durability))
        await bench.open()
        try:
            await bench.sequential(50)
            marks.clear()
            t0 = time.perf_counter()
            rate, commits = await bench.sequential(args.runs)
            elapsed = time.perf_counter() - t0
        finally:
            await bench.close()
    n = len(marks.at["start"])

    def span(a: str, b: str) -> str:
        return f"{statistics.median(marks.at[b][i] - marks.at[a][i] for i in range(n)) * 1e6:,.0f} us"

    print(f"{args.runs} sequential runs ({args.durability}): {rate:,.0f} steps/s, {commits:.2f} commits per step, "
          f"{elapsed / args.runs * 1e6:,.0f} us per run")
    print(f"  start -> body starts          {span('start', 'body')}")
    print(f"  body starts -> first step     {span('body', 'first_step')}")
    print(f"  first step -> last step ends  {span('first_step', 'last_step_end')}")
    print(f"  last step -> completion queued {span('last_step_end', 'complete')}")
    print(f"  completion queued -> durable  {span('complete', 'completed')}")
    print(f"  waits for deferred entries    {marks.waited / args.runs * 1e6:,.0f} us per run")
    durations = [b for b, _ in marks.batches]
    print(f"  group commits: {len(durations)}, median {statistics.median(durations) * 1e6:,.0f} us, median "
          f"{statistics.median(k for _, k in marks.batches):.0f} operations")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--durability", choices=("deferred", "eager"), default="deferred")
    asyncio.run(main(ap.parse_args()))
