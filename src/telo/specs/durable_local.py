"""Module ``durable-local`` (library ``DurableLocal``; tests alias it ``Local``): the local backend's kinds
(reference §6) and the journal contract its stores implement (reference §7)."""

from __future__ import annotations

from .common import compile_time, config, duration, exactly_one, ref, runtime, steps
from .model import KindSpec, ModuleSpec, module

M = "DurableLocal"

REPLAYED_REASON = (
    "a durable run's body is replayed from its journal after a crash or a park: completed steps return their "
    "recorded results instead of running again"
)
JOURNAL_REF = "DurableLocal.Journal"
_RUN_ID = runtime(type="string", minLength=1)
_RUN_STATUSES = ["scheduled", "running", "parked", "completed", "failed", "cancelled", "unknown"]

JOURNAL = KindSpec(M, "Journal", {"type": "object", "x-telo-abstract": True}, "abstract",
                   capabilities=frozenset({"provider"}))

WORKFLOW = KindSpec(
    M, "Workflow",
    config(
        {
            "journal": ref(JOURNAL_REF),
            "steps": steps(**{"x-telo-provides-zone": {"replayed": REPLAYED_REASON}}),
            "runId": _RUN_ID,  # default `<workflowName>:<uuid>`
            "onConflict": {"enum": ["attach", "reject"], "default": "attach"},
            "inputs": runtime(type="object"),  # the body's `inputs`, decided at the root key `inputs`
            # deferred: a redriven step's entries commit behind the body (docs/guarantees.md); eager: each
            # append is durable before the body goes on
            "durability": {"enum": ["deferred", "eager"], "default": "deferred"},
        },
        ("journal", "steps"),
    ),
    "invocable",
    extends="Durable.Run",
    # [N] declares the start result closed (reference §6).
    output_schema={
        "type": "object",
        "properties": {"runId": {"type": "string"}, "status": {"type": "string"}, "started": {"type": "boolean"},
                       "attached": {"type": "boolean"}, "result": {}},
        "required": ["runId", "status"],
        "additionalProperties": False,
    },
)

RESUMER = KindSpec(
    M, "Resumer",
    # concurrency: runs this resumer executes at once; it claims no more due runs than that (issue 14)
    config({"workflow": ref("DurableLocal.Workflow"), "interval": compile_time(**duration(default="5s")),
            "concurrency": compile_time(type="integer", minimum=1, default=50)},
           ("workflow",)),
    "service",
)

DELIVER = KindSpec(
    M, "Deliver",
    config(
        {
            "journal": ref(JOURNAL_REF),
            "token": runtime(type="string"),
            "await": ref("Durable.Await"),  # its outputType validates the payload before any lookup
            "payload": runtime(),  # default null
        },
        ("journal", "token"),
    ),
    "invocable",
)

STATUS = KindSpec(
    M, "Status",
    config({"journal": ref(JOURNAL_REF), "run": _RUN_ID}, ("journal",)),  # run: else inputs.run
    "invocable",
    output_schema={"type": "object", "properties": {"status": {"enum": _RUN_STATUSES}}, "required": ["status"]},
)

RESULT = KindSpec(
    M, "Result",
    config(
        {
            "journal": ref(JOURNAL_REF),
            "run": _RUN_ID,
            "wait": compile_time(**duration()),  # absent: read once
            "poll": compile_time(**duration(default="100ms")),
        },
        ("journal",),
    ),
    "invocable",
)

CANCEL = KindSpec(
    M, "Cancel",
    config({"journal": ref(JOURNAL_REF), "run": _RUN_ID,
            "reason": runtime(type="string", default="cancelled")}, ("journal",)),
    "invocable",
)

SCHEDULE = KindSpec(
    M, "Schedule",
    config(
        {
            "workflow": ref("DurableLocal.Workflow"),
            "runId": _RUN_ID,  # default `<scheduleName>:<uuid>`
            "after": runtime(**duration()),
            "at": runtime(type=["integer", "number", "string"]),  # epoch ms or a parseable timestamp
            "inputs": runtime(type="object"),
        },
        ("workflow",),
        oneOf=exactly_one("after", "at"),
    ),
    "invocable",
)

RESUME = KindSpec(
    M, "Resume",
    config({"workflow": ref("DurableLocal.Workflow"), "run": _RUN_ID,
            "reason": runtime(type="string", default="resumed by operator")}, ("workflow",)),
    "invocable",
)

DURABLE_LOCAL: ModuleSpec = module(
    "durable-local", M, WORKFLOW, RESUMER, DELIVER, STATUS, RESULT, CANCEL, SCHEDULE, RESUME, JOURNAL
)
