"""Step-engine throughput with no journal: a 10-step sequence whose inputs reference earlier results by CEL.

    .venv/bin/python benchmarks/engine.py [--seconds 3]

Prints steps/s of the whole path (manifest-compiled steps → CEL inputs → dispatch chokepoint → Python
function → publish), the per-step cost, and — measured in the same run — the cost of the step's CEL
evaluation alone, so a regression can be placed. Target (issue 4): ≥ 5,000 steps/s on one core here.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

STEPS = 10

MANIFEST = """
kind: Telo.Application
metadata: { name: Bench }
imports: { Run: run, Py: python }
---
kind: Py.Function
metadata: { name: add }
function: benchfns:add
---
kind: Run.Sequence
metadata: { name: chain }
steps:
  - name: s0
    invoke: !ref add
    inputs: { n: !cel "inputs.start", tag: "s0" }
%s
outputs: { total: !cel "steps.s%d.result.n" }
"""


def manifest_text() -> str:
    steps = []
    for i in range(1, STEPS):
        steps.append(textwrap.indent(textwrap.dedent(f"""\
            - name: s{i}
              invoke: !ref add
              inputs: {{ n: !cel "steps.s{i - 1}.result.n + 1", tag: !cel "'s' + string(steps.s{i - 1}.result.n)" }}
            """), "  "))
    return MANIFEST % ("".join(steps), STEPS - 1)


async def measure(seconds: float) -> dict[str, float]:
    from telo.engine.dispatch import dispatch
    from telo.kinds.controllers import load_application
    from telo.runtime.resource import as_invocable

    tmp = Path(tempfile.mkdtemp(prefix="telo-bench-engine-"))
    (tmp / "benchfns.py").write_text("async def add(inputs):\n    return {'n': inputs['n'], 'tag': inputs['tag']}\n")
    (tmp / "bench.yaml").write_text(manifest_text())
    app = load_application(tmp / "bench.yaml")
    await app.start()
    chain = as_invocable(app.resources["chain"])
    for _ in range(50):  # warm caches (CEL programs, imports)
        await dispatch(chain, {"start": 0}, events=app.events)
    rounds: list[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        n = 100
        t0 = time.perf_counter()
        for _ in range(n):
            out = await dispatch(chain, {"start": 1}, events=app.events)
        rounds.append(n * STEPS / (time.perf_counter() - t0))
    assert out == {"total": STEPS}, out

    # CEL alone: the 2 expressions of a middle step against the same scope shape.
    compiler = app.compiler
    from telo.manifest import Cel, Pos

    pos = Pos("bench", 1, 1)
    ev_n = compiler.value(Cel("steps.s4.result.n + 1", pos), where="n")
    ev_tag = compiler.value(Cel("'s' + string(steps.s4.result.n)", pos), where="tag")
    scope = {**app.module_scope(), "inputs": {"start": 1},
             "steps": {f"s{i}": {"result": {"n": i, "tag": f"s{i}"}} for i in range(5)}}
    k = 5000
    t0 = time.perf_counter()
    for _ in range(k):
        ev_n.evaluate(scope)
        ev_tag.evaluate(scope)
    cel_us = (time.perf_counter() - t0) / k * 1e6
    await app.close()
    return {"steps_per_s": statistics.median(rounds), "best": max(rounds), "cel_us_per_step": cel_us}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    r = asyncio.run(measure(args.seconds))
    per_step_us = 1e6 / r["steps_per_s"]
    print(f"10-step sequence, no journal: {r['steps_per_s']:,.0f} steps/s median (best {r['best']:,.0f}); "
          f"{per_step_us:.0f} µs/step, of which CEL (2 expressions) {r['cel_us_per_step']:.0f} µs")
    print(f"target ≥ 5,000 steps/s: {'met' if r['steps_per_s'] >= 5000 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
