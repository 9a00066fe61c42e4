"""Module ``durable`` (library ``Durable``): the backend-neutral durable kinds (reference §5)."""

from __future__ import annotations

from typing import Any

from .common import compile_time, config, duration, exactly_one, output_type, runtime, steps, type_slot
from .messaging import CONSUME, PUBLISH, RECEIVE, STREAM_WRITE
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
               capabilities=frozenset({"invocable"}),
               description="The abstract durable run: a body whose steps are journaled and replayed. Backends "
                           "implement it (`DurableLocal.Workflow`); a reference slot typed `Durable.Run` takes "
                           "any of them.")

IDEMPOTENT = KindSpec(
    M, "Idempotent",
    config(
        {
            "reason": {"type": "string", "minLength": 1,
                       "description": "Why re-running the region is observably a no-op (prose, quoted in "
                                      "reports)."},
            "steps": steps(**{"x-telo-provides-zone": {"idempotent": IDEMPOTENT_REASON}},
                           description="The region's steps."),
            "inputs": runtime(type="object",  # the body's inputs, against the call inputs; default {}
                              description="The body's `inputs`, evaluated against the call's (default `{}`)."),
        },
        ("reason", "steps"),
    ),
    "invocable",
    description="A region the author declares idempotent: it is journaled as one entry, and after a crash it "
                "runs again as a whole instead of step by step.",
    example="""\
kind: Durable.Idempotent
metadata: { name: refreshIndex }
reason: rebuilding the search index from the catalogue gives the same index every time
steps:
  - name: rebuild
    invoke: !ref rebuildIndex
""",
)

SLEEP = KindSpec(
    M, "Sleep",
    config(
        {
            "for": runtime(**duration(examples=["2s", "15m", "1.5h", "7d"]),  # units ms|s|m|h|d, decimals allowed
                           description="How long to sleep: a duration string (units ms, s, m, h, d)."),
            "until": runtime(type=["integer", "number", "string"],  # epoch ms or a parseable timestamp
                             description="When to wake: epoch milliseconds, an RFC 3339 timestamp string or a "
                                         "CEL timestamp."),
        },
        oneOf=exactly_one("for", "until"),
        **{"x-telo-requires-zone": _REQUIRES_REPLAYED, "x-telo-violates-zone": {"noSuspend": NO_SUSPEND_PARK}},
    ),
    "invocable",
    output_schema={"type": "object", "properties": {"wokeAt": {"type": "integer"}}, "required": ["wokeAt"]},
    description="A durable sleep: exactly one of `for` or `until`. The wake-up time is decided once and "
                "journaled, so the sleep survives restarts; a long one parks the run (a worker continues it when "
                "due). Returns `{wokeAt}` (epoch ms). Only inside a durable body.",
    example="""\
kind: Durable.Sleep
metadata: { name: coolOff }
for: 2s
""",
)

AWAIT = KindSpec(
    M, "Await",
    config(
        {
            "outputType": type_slot(  # the delivered payload's schema (checked by Local.Deliver)
                description="The delivered payload's schema: a delivery that fails it is refused "
                            "(ERR_DURABLE_PAYLOAD_INVALID) and the run keeps waiting."),
            "token": runtime(type="string",  # default: a fresh UUID, decided at <path>/token
                             description="The name a delivery answers (`telo deliver TOKEN`); evaluated per call "
                                         "and journaled. Default: a fresh UUID."),
            "timeout": compile_time(**duration(examples=["1h", "2d"]),  # a per-call inputs.timeout overrides it
                                    description="How long to wait for the delivery, from the first time the step "
                                                "runs (the deadline is journaled); past it the step fails with "
                                                "ERR_DURABLE_AWAIT_TIMEOUT. An `inputs.timeout` of the call "
                                                "overrides it. Absent: no deadline."),
        },
        **{"x-telo-requires-zone": _REQUIRES_REPLAYED, "x-telo-violates-zone": {"noSuspend": NO_SUSPEND_PARK}},
    ),
    "invocable",
    description="Waits for an outside answer: the run parks until a delivery for its `token` arrives "
                "(`telo deliver`, `DurableLocal.Deliver`) and returns the delivered payload. Only inside a "
                "durable body.",
    example="""\
kind: Durable.Await
metadata: { name: approval }
token: !cel "'approve:' + inputs.order"
timeout: 2d
""",
)

VALUE = KindSpec(
    M, "Value",
    config({"value": runtime(description="The value, evaluated the first time only: a replay returns the "
                                         "journaled one (`nowMillis()`, `uuidv4()` …)."),
            "outputType": output_type()}, ("value",),
           **{"x-telo-requires-zone": _REQUIRES_REPLAYED}),
    "invocable",
    description="Pins a nondeterministic value in a durable run: computed once, journaled, and replayed "
                "unchanged. Only inside a durable body.",
    example="""\
kind: Durable.Value
metadata: { name: startedAt }
value: !cel "nowMillis()"
""",
)

PATCHED = KindSpec(
    M, "Patched",
    config({"patch": {"type": "string", "minLength": 1,
                      "description": "The change it gates, named once and never reused (`add-fraud-check`)."},
            "deprecated": {"type": "boolean", "default": False,
                           "description": "Every run takes the new branch: set it once no live run needs the old "
                                          "one (`telo check` says when), then delete the old branch."}},
           ("patch",)),
    "invocable",
    output_schema={"type": "object", "properties": {"patched": {"type": "boolean"}, "patch": {"type": "string"}},
                   "required": ["patched", "patch"]},
    description="A version gate for a changed workflow (issue 17; docs/changing-workflows.md): returns "
                "`{patched}`, decided once per run and journaled. A run that had gone past the gate's position "
                "before the change (its journal holds entries it has not replayed yet) gets `false` and keeps the "
                "old branch; a new run, or one that had not reached it, gets `true`. Branch on it with `when:` or "
                "`if:` reading `steps.<gate>.result.patched`.",
    example="""\
kind: Durable.Patched
metadata: { name: fraudCheckGate }
patch: add-fraud-check
""",
)

DURABLE: ModuleSpec = module("durable", M, RUN, IDEMPOTENT, SLEEP, AWAIT, VALUE, PATCHED, RECEIVE, PUBLISH,
                               STREAM_WRITE, CONSUME)
