"""The deterministic work a crash-test appender performs: one op sequence, the same in parent and child.

Op ``i`` is a pure function of ``i`` (a fixed-seed generator), so a child restarted at ``--start i`` redoes
exactly what its killed predecessor may have left half done, and the parent knows, for every ack it read,
which entry (path, kind, target and value text) must be in the store.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from telo.journal.model import NO_VALUE, Entry, Parked
from telo.values import Duration, Timestamp, Uint

RUNS: Final = ("crash-a", "crash:b/ü")  # two runs (per-run seq), one whose id needs escaping as a file name
FAR_FUTURE_MS: Final = 4_102_444_800_000  # 2100-01-01: a park that never becomes due by time
PLAN_SEED: Final = 20260101

TARGETS: Final[tuple[dict[str, str] | None, ...]] = (
    {"kind": "Python.Function", "name": "charge", "module": "file:///app/orders.yaml"},
    {"kind": "Http.Request", "name": "fetch"},
    {"kind": "Sql.Query", "name": "insert_row", "module": "file:///app/db.yaml"},
    None,
)


@dataclass(frozen=True, slots=True)
class Op:
    kind: str  # "append" | "park" | "unpark" | "claim"
    run: str
    entry: Entry | None = None
    parked: Parked | None = None


def _value(rng: random.Random, depth: int = 0) -> Any:
    """A typed value from every corner of the domain the codec frames (not just JSON)."""
    pick = rng.randrange(14 if depth < 2 else 11)
    if pick == 0:
        return rng.randrange(-(2**63), 2**63)  # full int64: beyond a double's 53 bits, framed as a string
    if pick == 1:
        return Uint(rng.randrange(2**64))
    if pick == 2:
        return rng.randbytes(rng.randrange(0, 48))
    if pick == 3:
        return Timestamp(rng.randrange(0, 4_000_000_000), rng.randrange(1_000_000_000))
    if pick == 4:
        s = rng.randrange(-10_000, 10_000)
        n = rng.randrange(1_000_000_000) * (-1 if s < 0 else 1) if s else 0
        return Duration(s, n)
    if pick == 5:
        return rng.choice(["", "plain", 'quote " and \\ and \n newline', "ünïcode 😀", "\u2028\t\x01"])
    if pick == 6:
        return rng.choice([0.0, -0.0, 1.5, 1e300, -2.5e-308, rng.random()])
    if pick == 7:
        return rng.choice([True, False, None])
    if pick == 8:
        return rng.randrange(-1000, 1000)
    if pick == 9:
        # Now and then a large value: a line or row spanning many pages makes a torn write likelier.
        return "x" * rng.choice([1, 100, 4095, 4096, 20_000, 70_000])
    if pick == 10:
        return NO_VALUE if depth == 0 else []  # absence belongs to an entry, never inside a value
    if pick == 11:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if pick == 12:
        return {f"k{j}": _value(rng, depth + 1) for j in range(rng.randrange(4))}
    return {j: _value(rng, depth + 1) for j in range(rng.randrange(1, 4))}  # int-keyed map (typed keys)


def _path(rng: random.Random, k: int) -> str:
    return rng.choice(
        [
            f"steps/s{k}",
            f"steps/loop/while[{k}]",
            f"steps/items[{k}]/charge",
            f"steps/b{k}/@when",
            f"steps/sw{k}/cases/a%2Fb",
        ]
    )


@cache
def _generated(n: int) -> tuple[Op, ...]:
    rng = random.Random(PLAN_SEED)
    ops: list[Op] = []
    k = 0
    while len(ops) < n:
        k += 1
        run = rng.choice(RUNS)
        roll = rng.random()
        if roll < 0.06:
            # park, the delivery appended at the park path, unpark: what an awaited message does
            path = f"steps/wait{k}"
            ops.append(Op("park", run, parked=Parked(path, "Queue.Topic", f"tok-{k}", FAR_FUTURE_MS, None)))
            ops.append(Op("append", run, entry=Entry.step(path, None, _value(rng))))
            ops.append(Op("unpark", run))
        elif roll < 0.12:
            ops.append(Op("claim", run))
        elif roll < 0.45:
            decision = rng.choice(["value", "inputs", "when", "collection"])
            ops.append(Op("append", run, entry=Entry.decided(_path(rng, k), decision, _value(rng))))
        else:
            ops.append(Op("append", run, entry=Entry.step(_path(rng, k), rng.choice(TARGETS), _value(rng))))
    return tuple(ops)


def plan(n: int) -> tuple[Op, ...]:
    """The first ``n`` ops (generated in blocks so a growing ``n`` does not regenerate every time)."""
    block = 1024
    return _generated(-(-n // block) * block)[:n]


def status_after(ops: tuple[Op, ...], run: str) -> tuple[str, Parked | None]:
    """The run's status and park after ``ops`` ran (admitted ``running``; only park/unpark change it)."""
    status, parked = "running", None
    for op in ops:
        if op.run != run:
            continue
        if op.kind == "park":
            status, parked = "parked", op.parked
        elif op.kind == "unpark":
            status, parked = "running", None
    return status, parked
