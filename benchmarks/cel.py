"""CEL adapter throughput: a realistic step, a simple step, each expression alone, and load-time costs.

Run: ``.venv/bin/python benchmarks/cel.py`` (``--quick`` for fewer repeats).

A "realistic step" (the figure cel-notes measured for the raw library, ~2.5-2.8k steps/s) is: a scope with the
workflow inputs and 10 prior step results, one more step result published, then 6 expressions evaluated
against it and their results converted back to domain values. Three ways are timed:

* ``Scope``      — the engine's path: one :class:`telo.cel.Scope` per body, extended with
  ``with_step_result`` after each step; entries are converted once and only the fields an expression selects
  reach the library;
* ``mapping``    — the same programs given a fresh plain dict each step (everything read is converted anew);
* ``raw library``— cel-notes' baseline: ``cel-expr-python`` directly, one activation over the whole scope per
  step, results read with ``Value.value()`` (not exact: no uint/timestamp/key handling), for comparison.

Targets: >= 2,500 realistic steps/s; >= 5,000 simple steps/s (one or two expressions).
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from telo.cel import CelEnvironment, Scope, _lib
from telo.cel.convert import to_lib
from telo.clock import FakeClock
from telo.values import Timestamp, Uint

QUICK = "--quick" in sys.argv
SAMPLES = 3 if QUICK else 7
STEPS_PER_SAMPLE = 300 if QUICK else 1500


def _result(rng: random.Random, i: int) -> dict[str, Any]:
    """A step result of ~30 nodes: ids, amounts, a nested list of maps, a timestamp, a uint."""
    return {
        "id": f"res-{i:04d}",
        "ok": rng.random() < 0.9,
        "amount": rng.randint(100, 100_000),
        "currency": "EUR",
        "at": Timestamp(1_767_225_600 + i, rng.randint(0, 999_999_999)),
        "attempt": Uint(1),
        "items": [{"sku": f"SKU-{rng.randint(1000, 9999)}", "qty": rng.randint(1, 5), "price": 9.99} for _ in range(3)],
        "meta": {"region": "eu-west-1", "trace": f"{rng.getrandbits(64):016x}"},
    }


INPUTS = {
    "order": "ord-000042",
    "customer": {"id": "cus-00017", "email": "ada@example.com", "tier": "gold", "tags": ["vip", "eu"]},
    "amount": 12_345,
    "express": True,
}

# What a step typically evaluates: a `when`, a runId-like string, input leaves, a map, a list comprehension.
EXPRESSIONS = [
    "inputs.amount > 1000 && steps.s9.result.ok",
    "'order:' + inputs.order + ':' + steps.s9.result.id",
    "steps.s3.result.amount + steps.s9.result.amount",
    "{'customer': inputs.customer.email, 'meta': steps.s4.result.meta, 'at': steps.s9.result.at}",
    "steps.s1.result.items.map(i, i.qty * 2)",
    "steps.new.result.items.filter(i, i.qty > 2).size() + (inputs.express ? 1 : 0)",
]
SIMPLE_EXPRESSIONS = ["inputs.order", "steps.s9.result.ok"]


def _time(fn: Callable[[], None], repeats: int) -> tuple[float, float]:
    """(best, median) seconds per call over SAMPLES samples of ``repeats`` calls."""
    samples = []
    for _ in range(SAMPLES):
        t0 = time.perf_counter()
        for _ in range(repeats):
            fn()
        samples.append((time.perf_counter() - t0) / repeats)
    return min(samples), statistics.median(samples)


def main() -> None:
    rng = random.Random(7)
    clock = FakeClock()
    priors = {f"s{i}": _result(rng, i) for i in range(10)}
    fresh = [_result(rng, 100 + i) for i in range(64)]
    env = CelEnvironment()
    programs = [env.compile(t) for t in EXPRESSIONS]
    simple = [env.compile(t) for t in SIMPLE_EXPRESSIONS]

    base = Scope(inputs=INPUTS)
    for name, result in priors.items():
        base = base.with_step_result(name, result)
    for p in programs:  # warm: prior entries converted once, as in a running body
        p.evaluate(base.with_step_result("new", fresh[0]), clock=clock)

    counter = [0]

    def scope_step(progs: list[Any]) -> Callable[[], None]:
        def step() -> None:
            counter[0] += 1
            scope = base.with_step_result("new", fresh[counter[0] % len(fresh)])
            for p in progs:
                p.evaluate(scope, clock=clock)

        return step

    def mapping_step() -> None:
        counter[0] += 1
        steps = {name: {"result": r} for name, r in priors.items()}
        steps["new"] = {"result": fresh[counter[0] % len(fresh)]}
        scope = {"inputs": INPUTS, "steps": steps}
        for p in programs:
            p.evaluate(scope, clock=clock)

    declarations = {"inputs": _lib.MAP_STRING_DYN, "steps": _lib.MAP_STRING_DYN}
    raw_env = _lib.new_env(declarations, _lib.standard_extensions(), None)
    raw_programs = [raw_env.compile(t) for t in EXPRESSIONS]
    raw_inputs = to_lib(INPUTS)
    raw_priors = {name: {"result": to_lib(r)} for name, r in priors.items()}
    raw_fresh = [to_lib(r) for r in fresh]

    def unwrap(v: Any) -> Any:
        py = v.value()
        if type(py) is list:
            return [unwrap(e) for e in py]
        if type(py) is dict:
            return {k: unwrap(e) for k, e in py.items()}
        return py

    def raw_step() -> None:
        counter[0] += 1
        steps = dict(raw_priors)
        steps["new"] = {"result": raw_fresh[counter[0] % len(raw_fresh)]}
        activation = raw_env.Activation({"inputs": raw_inputs, "steps": steps})  # type: ignore[attr-defined]
        for p in raw_programs:
            unwrap(p.eval(activation))

    print(f"CEL adapter benchmark ({'quick' if QUICK else 'full'}; best / median of {SAMPLES} samples)\n")
    print("realistic step: inputs + 10 prior results (~30 nodes each) + 1 new, 6 expressions, results converted back")
    rows = [
        ("Scope (engine path)", scope_step(programs)),
        ("plain mapping per step", mapping_step),
        ("raw library (cel-notes baseline)", raw_step),
    ]
    for label, fn in rows:
        best, median = _time(fn, STEPS_PER_SAMPLE)
        print(f"  {label:34s} {1 / best:9,.0f} steps/s best  {1 / median:9,.0f} median  ({median * 1e6:6.1f} us/step)")

    best, median = _time(scope_step(simple), STEPS_PER_SAMPLE * 2)
    print(f"\nsimple step (2 expressions, Scope)   {1 / best:9,.0f} steps/s best  {1 / median:9,.0f} median")

    print("\nper expression (fixed Scope, converted back):")
    scope = base.with_step_result("new", fresh[1])
    for text, p in zip(EXPRESSIONS, programs, strict=True):
        best, median = _time(lambda p=p: p.evaluate(scope, clock=clock), STEPS_PER_SAMPLE * 4)
        print(f"  {median * 1e6:6.1f} us  {1 / median:9,.0f}/s  {text}")

    print("\nload time:")
    t0 = time.perf_counter()
    CelEnvironment({"bench_extra": "dyn"})
    print(f"  new environment, new declarations: {(time.perf_counter() - t0) * 1e3:6.2f} ms")
    t0 = time.perf_counter()
    CelEnvironment()
    print(f"  new environment, known declarations: {(time.perf_counter() - t0) * 1e6:6.1f} us")
    texts = [f"inputs.amount + {i} > steps.s{i % 10}.result.amount" for i in range(200)]
    t0 = time.perf_counter()
    for t in texts:
        env.compile(t)
    print(f"  compile (parse + check + analyse), cache miss: {(time.perf_counter() - t0) / len(texts) * 1e6:6.1f} us")
    t0 = time.perf_counter()
    for t in texts:
        env.compile(t)
    print(f"  compile, cache hit: {(time.perf_counter() - t0) / len(texts) * 1e6:6.2f} us")


if __name__ == "__main__":
    main()
