"""Module ``durable`` (library ``Durable``): the backend-neutral durable kinds (reference §5)."""

from __future__ import annotations

from typing import Any

from .common import compile_time, config, duration, exactly_one, runtime, steps, type_slot
from .model import KindSpec, ModuleSpec, module

M = "Durable"

# Zone attribute texts. The idempotent one is asserted verbatim by the upstream collapse test and quoted in
# collapse reasons (reference §9, §15.4); the others are ours (the upstream texts are not recorded).
IDEMPOTENT_REASON = (
    "the author asserts re-running this region is observably a no-op; this resource's `reason:` states why"
)
NO_SUSPEND_PARK = "parking suspends the run until a wake-up, which a no-suspend region cannot outlive"
_REQUIRES_REPLAYED: dict[str, Any] = {"zone": "Self.Run", "attributes": ["replayed"]}

RUN = KindSpec(M, "Run", {"type": "object", "x-telo-abstract": True}, "abstract",
               capabilities=frozenset({"invocable"}))

IDEMPOTENT = KindSpec(
    M, "Idempotent",
    config(
        {
            "reason": {"type": "string", "minLength": 1},
            "steps": steps(**{"x-telo-provides-zone": {"idempotent": IDEMPOTENT_REASON}}),
            "inputs": runtime(type="object"),  # the body's inputs, against the call inputs; default {}
        },
        ("reason", "steps"),
    ),
    "invocable",
)

SLEEP = KindSpec(
    M, "Sleep",
    config(
        {
            "for": runtime(**duration()),  # units ms|s|m|h|d, decimals allowed
            "until": runtime(type=["integer", "number", "string"]),  # epoch ms or a parseable timestamp
        },
        oneOf=exactly_one("for", "until"),
        **{"x-telo-requires-zone": _REQUIRES_REPLAYED, "x-telo-violates-zone": {"noSuspend": NO_SUSPEND_PARK}},
    ),
    "invocable",
    output_schema={"type": "object", "properties": {"wokeAt": {"type": "integer"}}, "required": ["wokeAt"]},
)

AWAIT = KindSpec(
    M, "Await",
    config(
        {
            "outputType": type_slot(),  # the delivered payload's schema (checked by Local.Deliver)
            "token": runtime(type="string"),  # default: a fresh UUID, decided at <path>/token
            "timeout": compile_time(**duration()),  # a per-call inputs.timeout overrides it
        },
        **{"x-telo-requires-zone": _REQUIRES_REPLAYED, "x-telo-violates-zone": {"noSuspend": NO_SUSPEND_PARK}},
    ),
    "invocable",
)

VALUE = KindSpec(
    M, "Value",
    config({"value": runtime(), "outputType": type_slot()}, ("value",),
           **{"x-telo-requires-zone": _REQUIRES_REPLAYED}),
    "invocable",
)

DURABLE: ModuleSpec = module("durable", M, RUN, IDEMPOTENT, SLEEP, AWAIT, VALUE)
