"""Module ``python`` (library ``Python``): a Python callable as an invocable kind (ours, not upstream)."""

from __future__ import annotations

from .common import config, input_type, output_type
from .model import KindSpec, ModuleSpec, module

M = "Python"
# `package.module:attribute[.attribute…]` — the entry-point notation of Python packaging.
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
FUNCTION_PATTERN = f"^{_DOTTED}:{_DOTTED}$"

FUNCTION = KindSpec(
    M, "Function",
    config(
        {
            "function": {"type": "string", "pattern": FUNCTION_PATTERN,
                         "description": "`package.module:attr` of the callable, sync or async. It takes the inputs; "
                                        "a second parameter, if declared, receives the step context (run id, step "
                                        "path, attempt, idempotency key)."},
            "inputType": input_type(),
            "outputType": output_type(),
            # The author asserts calling it twice with the same inputs is harmless (event-log §2: an
            # unconfirmed effect may then be re-driven).
            "idempotent": {"type": "boolean", "default": False,
                           "description": "The author asserts that calling it twice with the same inputs is "
                                          "harmless: an interrupted call may then be re-run (with the same "
                                          "idempotency key), and its entries may commit behind the body."},
            # It hands the idempotency key to a system that deduplicates by it (a payment API's
            # Idempotency-Key): re-driving with the same key is safe.
            "keyConsuming": {"type": "boolean", "default": False,
                             "description": "It hands the idempotency key to a system that deduplicates by it (a "
                                            "payment API's Idempotency-Key), so re-running it with the same key is "
                                            "safe."},
            # What recovery does with an effect whose intent is journaled but whose receipt is not: `redrive`
            # (the default when idempotent or keyConsuming), `park` (the default otherwise: an operator
            # answers with `telo resolve`), or `fail`.
            "onUnconfirmed": {"enum": ["redrive", "park", "fail"],
                              "description": "What recovery does with a call that started but whose outcome was "
                                             "not recorded (a crash mid-call): `redrive` (the default when "
                                             "`idempotent` or `keyConsuming`), `park` for an operator's `telo "
                                             "resolve` (the default otherwise), or `fail`. Asked first: `lookup`."},
            # `package.module:attr` of a `lookup(key)` that asks the outside system for the effect's outcome:
            # it returns the result, or telo.durable.effects.NOT_FOUND when the effect never happened.
            "lookup": {"type": "string", "pattern": FUNCTION_PATTERN,
                       "description": "`package.module:attr` of a `lookup(key)` that asks the outside system "
                                      "whether the unconfirmed call happened: it returns the call's result, or "
                                      "`telo.durable.effects.NOT_FOUND` when it never did (then it is re-run)."},
        },
        ("function",),
    ),
    "invocable",
    description="A Python callable as an invocable resource: invoked with the step's inputs, it returns the "
                "step's result. In a durable run its call is recorded before it starts and confirmed after it.",
    example="""\
kind: Python.Function
metadata: { name: chargeCard }
function: shop.payments:charge
keyConsuming: true
lookup: shop.payments:find_charge
""",
)

PYTHON: ModuleSpec = module("python", M, FUNCTION)
