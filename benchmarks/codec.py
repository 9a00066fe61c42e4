"""Typed-frame codec throughput against the stdlib json module, on the same documents.

Run: ``.venv/bin/python benchmarks/codec.py`` (``--quick`` for fewer repeats).

The documents are JSON-compatible data only: str-keyed dicts, lists, strings, bools, None and FLOATS. Every
number is a float on purpose: a Python int is a CEL int, which the typed frame tags
(``{"$telo":"int","value":"2"}``) while ``json`` writes it bare, so with ints the two would not be writing
the same structure. With floats only, both write and read one and the same tree (the frame writes ``2``
where json writes ``2.0``; both read a float back), so the ratio measures the codec, not a different
document. Strings include non-ASCII text, as real customer data does.

Each operation is timed over many calls per sample, several samples per measurement, taken round-robin
across the four operations; the table shows the best and the median sample per call. The garbage collector
stays on, as it is in production; the writer is the one `telo.values.encode_frame` uses (the C-encoder fast
path with its reference-writer fallback). The target is codec encode+decode <= 3x stdlib dumps+loads.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from telo.values import decode_frame, encode_frame, equal

_FIRST = ["Ada", "Zoë", "Jürgen", "Mei", "Olúwadámilọ́lá", "Sven", "Ana", "Håkon", "Priya", "Chen"]
_LAST = ["Lovelace", "Müller", "Nakamura", "Okafor", "Dubois", "García", "Kowalski", "Ng"]
_CITIES = ["Berlin", "São Paulo", "Zürich", "Kraków", "Osaka", "Lagos", "Montréal", "Oslo"]
_PRODUCTS = ["Espresso beans 1kg", "Pour-over kettle", "Burr grinder", "Ceramic dripper", "Paper filters ×100",
             "Milk frother", "Cold brew jar", "Scale (0.1 g)", "Travel mug — 350 ml", "Descaler"]
_STATUSES = ["placed", "paid", "shipped", "delivered", "refunded"]


def _order(rng: random.Random, n: int) -> dict[str, Any]:
    items = []
    for i in range(rng.randint(1, 4)):
        qty = float(rng.randint(1, 5))
        price = round(rng.uniform(2, 250), 2)
        items.append({
            "line": float(i + 1),
            "sku": f"SKU-{rng.randint(1000, 9999)}",
            "title": rng.choice(_PRODUCTS),
            "qty": qty,
            "unitPrice": price,
            "discount": rng.choice([None, 0.1, 0.15, 0.05]),
            "giftWrap": rng.random() < 0.2,
        })
    total = round(sum(it["qty"] * it["unitPrice"] for it in items), 2)
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    return {
        "id": f"ord-{n:06d}",
        "placedAt": f"2026-01-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z",
        "status": rng.choice(_STATUSES),
        "customer": {
            "id": f"cus-{rng.randint(1, 99999):05d}",
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}@example.com",
            "vip": rng.random() < 0.1,
            "address": {
                "street": f"{rng.randint(1, 200)} Market Street",
                "city": rng.choice(_CITIES),
                "postcode": f"{rng.randint(10000, 99999)}",
                "country": rng.choice(["DE", "BR", "CH", "PL", "JP", "NG", "CA", "NO"]),
            },
        },
        "items": items,
        "total": total,
        "tax": round(total * 0.19, 2),
        "currency": "EUR",
        "notes": rng.choice([None, None, "Leave at the door", "Call before delivery \U0001f4de"]),
        "tags": rng.sample(["priority", "gift", "b2b", "repeat", "promo"], rng.randint(0, 3)),
    }


def document(target_bytes: int, seed: int = 7) -> dict[str, Any]:
    """Orders until the stdlib JSON text reaches ``target_bytes`` (UTF-8)."""
    rng = random.Random(seed)
    doc: dict[str, Any] = {"shop": "Kaffeehaus Süd", "generatedAt": "2026-01-15T07:30:00Z", "orders": []}
    while len(json.dumps(doc, ensure_ascii=False).encode()) < target_bytes:
        doc["orders"].append(_order(rng, len(doc["orders"]) + 1))
    return doc


def _time(ops: dict[str, Callable[[], object]], calls: int, samples: int) -> dict[str, tuple[float, float]]:
    """(best, median) seconds per call of each operation. Samples are taken round-robin across the
    operations, so a burst of load on a shared machine lands on all of them rather than on one."""
    per_call: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(samples):
        for name, fn in ops.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            per_call[name].append((time.perf_counter() - t0) / calls)
    return {name: (min(times), statistics.median(times)) for name, times in per_call.items()}


def main() -> None:
    quick = "--quick" in sys.argv
    samples = 5 if quick else 15
    rows = []
    for label, size, calls in (("~3 KB", 3_000, 400), ("~100 KB", 100_000, 12)):
        doc = document(size)
        frame = encode_frame(doc)
        text = json.dumps(doc)
        assert equal(decode_frame(frame), doc) and json.loads(text) == doc
        ops = {
            "frame encode": lambda d=doc: encode_frame(d),
            "frame decode": lambda f=frame: decode_frame(f),
            "json.dumps": lambda d=doc: json.dumps(d),
            "json.loads": lambda t=text: json.loads(t),
        }
        timings = _time(ops, calls, samples)
        rows.append((label, len(frame.encode()), len(text.encode()), timings))

    print(f"Python {sys.version.split()[0]}; best / median of {samples} samples, microseconds per call\n")
    print(f"{'document':<10}{'operation':<16}{'best µs':>12}{'median µs':>12}")
    for label, frame_bytes, json_bytes, timings in rows:
        print(f"{label:<10}(frame {frame_bytes} B, json {json_bytes} B)")
        for name, (best, median) in timings.items():
            print(f"{'':<10}{name:<16}{best * 1e6:>12.1f}{median * 1e6:>12.1f}")
        for stat, idx in (("best", 0), ("median", 1)):
            codec = timings["frame encode"][idx] + timings["frame decode"][idx]
            stdlib = timings["json.dumps"][idx] + timings["json.loads"][idx]
            enc = timings["frame encode"][idx] / timings["json.dumps"][idx]
            dec = timings["frame decode"][idx] / timings["json.loads"][idx]
            print(f"{'':<10}ratio ({stat}): encode+decode {codec / stdlib:.2f}x stdlib "
                  f"(encode {enc:.2f}x, decode {dec:.2f}x)")
    print("\ntarget: encode+decode <= 3x stdlib json.dumps+json.loads")


if __name__ == "__main__":
    main()
