"""Step targets for the retry scenarios: a function that fails a set number of times (counted per
process and key), and one that always fails with a given code."""

from __future__ import annotations

from collections import Counter
from typing import Any

from telo.errors import TeloError

_calls: Counter[str] = Counter()


def fail_then_succeed(inputs: dict[str, Any]) -> dict[str, Any]:
    """Fails the first ``inputs.failures`` calls for ``inputs.key``, then returns the attempt number."""
    key = inputs["key"]
    _calls[key] += 1
    if _calls[key] <= inputs["failures"]:
        raise TeloError("ERR_FLAKY", f"{key}: failure {_calls[key]} of {inputs['failures']}")
    return {"attempt": _calls[key]}


def always_fail(inputs: dict[str, Any]) -> None:
    _calls[inputs["key"]] += 1
    raise TeloError(inputs["code"], f"{inputs['key']}: call {_calls[inputs['key']]} failed with {inputs['code']}")


def plain_error(inputs: dict[str, Any]) -> None:
    """A plain Python exception: the chokepoint wraps it as ERR_EXECUTION_FAILED."""
    raise ValueError(f"plain failure for {inputs['key']}")
