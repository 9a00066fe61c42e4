"""The order example's effects: each writes one fsynced line to a ledger, so you can SEE what ran and how often.

These are ordinary Python functions; telo calls them with the step's inputs (and, when a function accepts a
second parameter, a step context carrying the idempotency key ``<run>/<step path>``). A real payment API
would take that key so a retried charge is deduplicated on its side too.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

LEDGER = Path(os.environ.get("ORDERS_LEDGER", Path(__file__).with_name(".telo") / "ledger.txt"))


def _record(line: str) -> None:
    LEDGER.parent.mkdir(parents=True, exist_ok=True)
    with open(LEDGER, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
    print(f"  ledger: {line}", flush=True)


def reserve(inputs: dict[str, Any]) -> dict[str, Any]:
    _record(f"reserved stock for {inputs['order']}")
    return {"reserved": True, "items": inputs["items"]}


def charge(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    time.sleep(float(os.environ.get("ORDERS_CHARGE_SECONDS", "0.5")))  # a slow payment provider
    _record(f"charged {inputs['amount']:.2f} EUR for {inputs['order']} (idempotency key {ctx.idempotency_key})")
    return {"charged": inputs["amount"], "currency": "EUR", "receipt": f"rcpt-{inputs['order']}"}


def find_charge(key: str) -> Any:
    """The payment provider's view of an idempotency key: the charge it made, or NOT_FOUND.

    telo calls this when a charge was interrupted and its outcome is unknown (event-log spec §2)."""
    from telo.durable.effects import NOT_FOUND

    if LEDGER.exists():
        for line in LEDGER.read_text(encoding="utf-8").splitlines():
            if line.startswith("charged ") and f"(idempotency key {key})" in line:
                amount = float(line.split()[1])
                order = key.split("/")[0].removeprefix("order:")
                return {"charged": amount, "currency": "EUR", "receipt": f"rcpt-{order}"}
    return NOT_FOUND


def pack(inputs: dict[str, Any]) -> dict[str, Any]:
    _record(f"packing {inputs['order']} ...")
    time.sleep(float(os.environ.get("ORDERS_PACK_SECONDS", "2")))  # long enough to kill -9 the process here
    _record(f"packed {inputs['order']}")
    return {"parcel": f"parcel-{inputs['order']}"}


def ship(inputs: dict[str, Any]) -> dict[str, Any]:
    _record(f"shipped {inputs['parcel']} (approved by {inputs['approvedBy']})")
    return {"tracking": f"TRK-{inputs['order']}"}


def email(inputs: dict[str, Any]) -> str:
    _record(f"emailed {inputs['to']}: your order {inputs['order']} is on its way ({inputs['tracking']})")
    return "sent"
