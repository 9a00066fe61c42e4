"""Step targets for the durable scenarios. Each call is counted in process memory, so a manifest can ask,
mid-test, how often an effect really ran (a replayed step is not called)."""

from __future__ import annotations

from collections import Counter
from typing import Any

_calls: Counter[str] = Counter()
_remembered: dict[str, list[Any]] = {}


def work(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """An effect: returns what it was given, with the idempotency key of its step."""
    key = str(inputs.get("item", inputs.get("label", "")))
    _calls[key] += 1
    return {"did": inputs, "key": ctx.idempotency_key}


def calls(inputs: dict[str, Any]) -> dict[str, int]:
    """How often `work` ran, per item/label, in this process."""
    return dict(_calls)


def always_fail(inputs: dict[str, Any]) -> None:
    _calls["fail:" + str(inputs.get("label", ""))] += 1
    raise RuntimeError("the provider is down")


def remember(inputs: dict[str, Any]) -> Any:
    """Keeps every value it is given, per label (see `remembered`)."""
    _remembered.setdefault(str(inputs["label"]), []).append(inputs["value"])
    return inputs["value"]


def remembered(inputs: dict[str, Any]) -> dict[str, list[Any]]:
    return dict(_remembered)


class Receipt:
    def __init__(self, number: str) -> None:
        self.number = number


def returns_object(inputs: dict[str, Any]) -> Any:
    """A result outside the CEL value domain (a class instance, nested)."""
    return {"ok": True, "receipt": Receipt("R-1")}
