"""Module ``python`` (library ``Python``): a Python callable as an invocable kind (ours, not upstream)."""

from __future__ import annotations

from .common import config, type_slot
from .model import KindSpec, ModuleSpec, module

M = "Python"
# `package.module:attribute[.attribute…]` — the entry-point notation of Python packaging.
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
FUNCTION_PATTERN = f"^{_DOTTED}:{_DOTTED}$"

FUNCTION = KindSpec(
    M, "Function",
    config(
        {
            "function": {"type": "string", "pattern": FUNCTION_PATTERN},
            "inputType": type_slot(),
            "outputType": type_slot(),
            # The author asserts calling it twice with the same inputs is harmless (event-log §2: an
            # unconfirmed effect may then be re-driven).
            "idempotent": {"type": "boolean", "default": False},
            # It hands the idempotency key to a system that deduplicates by it (a payment API's
            # Idempotency-Key): re-driving with the same key is safe.
            "keyConsuming": {"type": "boolean", "default": False},
            # What recovery does with an effect whose intent is journaled but whose receipt is not: `redrive`
            # (the default when idempotent or keyConsuming), `park` (the default otherwise: an operator
            # answers with `telo resolve`), or `fail`.
            "onUnconfirmed": {"enum": ["redrive", "park", "fail"]},
            # `package.module:attr` of a `lookup(key)` that asks the outside system for the effect's outcome:
            # it returns the result, or telo.durable.effects.NOT_FOUND when the effect never happened.
            "lookup": {"type": "string", "pattern": FUNCTION_PATTERN},
        },
        ("function",),
    ),
    "invocable",
)

PYTHON: ModuleSpec = module("python", M, FUNCTION)
