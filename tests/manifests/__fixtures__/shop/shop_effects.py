"""The shop fixture's one effect: a charge, journaled by the workflow that calls it."""

from typing import Any


def charge(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"charged": inputs["amount"]}
