"""Module ``durable-local`` (library ``DurableLocal``; tests alias it ``Local``): the local backend's kinds
(reference §6) and the journal contract its stores implement (reference §7)."""

from __future__ import annotations

from .common import compile_time, config, duration, exactly_one, ref, runtime, steps, type_slot
from .messaging import EVENT, SEND
from .model import KindSpec, ModuleSpec, module

M = "DurableLocal"

REPLAYED_REASON = (
    "a durable run's body is replayed from its journal after a crash or a park: completed steps return their "
    "recorded results instead of running again"
)
JOURNAL_REF = "DurableLocal.Journal"
_RUN_ID = runtime(type="string", minLength=1,
                  description="The run to address (evaluated per call); absent: the call's `inputs.run`.")
_JOURNAL = ref(JOURNAL_REF, description="The journal the runs live in: a `Journal` of a durable-journal-* module.")
_WORKFLOW = ref("DurableLocal.Workflow", description="The workflow (its journal is the one used).")
_RUN_STATUSES = ["scheduled", "running", "parked", "completed", "failed", "cancelled", "unknown"]

JOURNAL = KindSpec(M, "Journal", {"type": "object", "x-telo-abstract": True}, "abstract",
                   capabilities=frozenset({"provider"}),
                   description="The journal contract: what a `journal:` slot takes. Implemented by the `Journal` "
                               "of `durable-journal-sqlite`, `durable-journal-file` and `durable-journal-postgres`.")

WORKFLOW = KindSpec(
    M, "Workflow",
    config(
        {
            "journal": _JOURNAL,
            "steps": steps(**{"x-telo-provides-zone": {"replayed": REPLAYED_REASON}},
                           description="The durable body: each step's outcome is journaled, and a resumed run "
                                       "replays finished steps instead of running them again."),
            "runId": runtime(type="string", minLength=1,  # default `<workflowName>:<uuid>`
                             description="The run's id, evaluated against the call's `inputs`: starting an id "
                                         "that exists attaches to (or continues) that run. Default "
                                         "`<name>:<uuidv7>`; started by a step, `<name>:<parent run>/<step path>`."),
            "onConflict": {"enum": ["attach", "reject"], "default": "attach",
                           "description": "When `runId` exists already: `attach` to it, or `reject` the start "
                                          "(ERR_DURABLE_RUN_EXISTS)."},
            "inputType": type_slot(
                description="The call's input contract: a `Telo.Type` (`!ref` or an inline `{kind: "
                            "Telo.JsonSchema, schema: …}`). A start whose inputs fail it is refused with "
                            "ERR_INPUT_INVALID before anything is admitted (a step, a target, `Local.Schedule`, "
                            "`telo schedule`, the Python API); `--input k=v` on the command line is typed by it "
                            "(docs/cli.md)."),
            "inputs": runtime(type="object",  # the body's `inputs`, decided at the root key `inputs`
                              description="The body's `inputs`, evaluated from the call's and recorded once; "
                                          "absent, the body's `inputs` is `{}` (as upstream): write "
                                          "`inputs: !cel \"inputs\"` to hand the body the call's."),
            # deferred: a redriven step's entries commit behind the body (docs/guarantees.md); eager: each
            # append is durable before the body goes on
            "queue": ref("DurableLocal.Queue",
                         description="The `Queue` its runs wait in (issue 16): a start admits the run `scheduled` "
                                     "and it executes only when the queue's limits leave room, in whichever "
                                     "process is granted it. The queue's journal must be this workflow's."),
            "durability": {"enum": ["deferred", "eager"], "default": "deferred",
                           "description": "`deferred`: entries of re-runnable steps commit behind the body (a crash "
                                          "may re-run a few finished idempotent steps, with their keys); `eager`: "
                                          "every entry is durable before the next effect (docs/guarantees.md)."},
        },
        ("journal", "steps"),
    ),
    "invocable",
    extends="Durable.Run",
    # [N] declares the start result closed (reference §6).
    output_schema={
        "type": "object",
        "properties": {"runId": {"type": "string"}, "status": {"type": "string"}, "started": {"type": "boolean"},
                       "attached": {"type": "boolean"}, "result": {},
                       # telo: a start its queue's singleton (mode skip) refused; runId names the live run
                       "skipped": {"type": "boolean"}},
        "required": ["runId", "status"],
        "additionalProperties": False,
    },
    description="A durable workflow: its steps run on a journal, survive crashes and restarts, and never repeat a "
                "finished effect blindly. Invoking it starts (or attaches to) a run and returns "
                "`{runId, started, status}`.",
    example="""\
kind: DurableLocal.Workflow
metadata: { name: order }
journal: !ref runs
runId: !cel "'order:' + inputs.order"
steps:
  - name: charge
    invoke: !ref chargeCard
    inputs: { order: !cel "inputs.order" }
    retry: { attempts: 3, initialDelay: 200ms }
    timeout: 5s
""",
)

QUEUE = KindSpec(
    M, "Queue",
    config(
        {
            "journal": ref(JOURNAL_REF, description="The journal whose runs it limits: the journal of every "
                                                     "workflow naming it (SQLite, PostgreSQL or memory; the file "
                                                     "journal is refused, ERR_JOURNAL_CONFIG_INVALID)."),
            "concurrency": compile_time(type="integer", minimum=1,
                                        description="Runs of the queue executing at once, across every process "
                                                    "sharing the journal (absent: no global limit)."),
            "workerConcurrency": compile_time(type="integer", minimum=1,
                                              description="Runs of the queue one process executes at once."),
            "concurrencyKey": {
                "type": "object",
                "properties": {
                    "key": runtime(type=["string", "integer", "boolean"],
                                   description="CEL over the run's `inputs`, evaluated once at admission and "
                                               "recorded with the run (replay never re-evaluates it)."),
                    "limit": {"type": "integer", "minimum": 1,
                              "description": "At most this many runs per key value execute at once."},
                },
                "required": ["key", "limit"],
                "additionalProperties": False,
                "description": "A per-key limit: at most `limit` runs with one value of `key` execute at once "
                               "(per tenant, per account).",
            },
            "rateLimit": {
                "type": "object",
                "properties": {
                    "limit": compile_time(type="integer", minimum=1,
                                          description="At most this many runs start within any `period`."),
                    "period": compile_time(**duration(), description="The sliding window (`30s`, `1m`, `1h`)."),
                },
                "required": ["limit", "period"],
                "additionalProperties": False,
                "description": "Starts per sliding window: a run's first grant (its start, journaled as the run's "
                               "`started_at`) waits while `limit` runs of the queue started within the `period` "
                               "before now — the journal's clock: the database's on PostgreSQL, so workers' clocks "
                               "do not matter. A run continuing after a crash or a park is not a new start.",
            },
            "priority": runtime(type="integer",
                                description="CEL over the run's `inputs`, evaluated once at admission and recorded: "
                                            "an integer, lower first (default 0); ties go in admission order. A "
                                            "run due again after a crash goes before the runs never started. Not "
                                            "an integer: the start fails with ERR_INPUT_INVALID."),
            "holdSlotWhileParked": {"type": "boolean", "default": False,
                                    "description": "A parked or sleeping run keeps its slot (`true`) or gives it "
                                                   "back until it continues (`false`, the default: a run waiting "
                                                   "a day for an approval holds none)."},
            # issue 16 step 4 (telo.kinds.queue_keys): at most one of dedupKey, debounce and singleton
            "dedupKey": runtime(type=["string", "integer", "boolean"],
                                description="CEL over a start's `inputs`, evaluated once at admission and recorded: "
                                            "while a run of the queue with that key is live (scheduled, running or "
                                            "parked), a start does not admit another — see `onDuplicate`. Racing "
                                            "starts make one run (a unique index of the journal). Once the run "
                                            "settles, a start admits a new one. At most one of `dedupKey`, "
                                            "`debounce` and `singleton`."),
            "onDuplicate": {"enum": ["attach", "reject"], "default": "attach",
                            "description": "A start of a live `dedupKey`: `attach` (the default) answers with the "
                                           "live run (`{runId, attached: true}`), as a second start of one `runId` "
                                           "does — a retried request gets its first attempt's run; `reject` "
                                           "refuses it with ERR_DURABLE_RUN_EXISTS, naming the live run."},
            "debounce": {
                "type": "object",
                "properties": {
                    "period": compile_time(**duration(), description="How long a run waits for a newer start "
                                                                     "before it starts (`500ms`, `5s`)."),
                    "key": runtime(type=["string", "integer", "boolean"],
                                   description="CEL over a start's `inputs`, evaluated once at admission."),
                },
                "required": ["period", "key"],
                "additionalProperties": False,
                "description": "`{period, key}`: a start finding an unstarted run of its workflow with the same "
                               "`key` (CEL over the inputs) gives it its inputs and moves its start to now + "
                               "`period`; the caller attaches to that run. The latest inputs win and one run starts, "
                               "once a `period` passes without a newer start (the first start waits a `period` "
                               "too). A start after the run started admits a new one.",
            },
            "singleton": {
                "type": "object",
                "properties": {
                    "key": runtime(type=["string", "integer", "boolean"],
                                   description="CEL over a start's `inputs`, evaluated once at admission."),
                    "mode": {"enum": ["skip", "cancel-running", "queue"], "default": "skip",
                             "description": "While a run of the key is live: `skip` admits nothing and answers "
                                            "`{runId: <the live run>, skipped: true}`; `cancel-running` cancels "
                                            "the live run (as `telo cancel`) and admits the start; `queue` admits "
                                            "it to wait its turn (a concurrency key of limit 1: not with "
                                            "`concurrencyKey`)."},
                },
                "required": ["key"],
                "additionalProperties": False,
                "description": "`{key, mode}`: one live run per key of the queue, `mode` saying what a start of "
                               "a live key does: `skip` (the default) admits nothing and answers `{runId: <the live "
                               "run>, skipped: true, status: skipped}` (`telo run` prints it and exits 0); "
                               "`cancel-running` cancels the live run, as `telo cancel` does, and admits the start; "
                               "`queue` admits it to wait its turn (runs of a key execute one at a time: a "
                               "concurrency key of limit 1, so not with `concurrencyKey`).",
            },
        },
        ("journal",),
    ),
    "provider",
    description="Admission control for the workflows that name it (`queue: !ref …`): their runs start only while "
                "the limits leave room, enforced by the journal inside the transaction that grants runs to "
                "workers, across every telo process sharing it (docs/guarantees.md).",
    example="""\
kind: DurableLocal.Queue
metadata: { name: payments }
journal: !ref runs
concurrency: 10
workerConcurrency: 4
concurrencyKey: { key: !cel "inputs.tenant", limit: 2 }
rateLimit: { limit: 100, period: 1m }
priority: !cel "inputs.tier == 'gold' ? 0 : 10"
dedupKey: !cel "inputs.order"
onDuplicate: attach
""",
)

RESUMER = KindSpec(
    M, "Resumer",
    # concurrency: runs this resumer executes at once; it claims no more due runs than that (issue 14)
    config({"workflow": ref("DurableLocal.Workflow", description="The workflow whose due runs it continues."),
            "interval": compile_time(**duration(default="5s"),
                                     description="How often it looks for due runs (a duration string)."),
            "concurrency": compile_time(type="integer", minimum=1, default=50,
                                        description="Runs it executes at once; it claims no more than that.")},
           ("workflow",)),
    "service",
    description="A service that continues the workflow's due runs (parked sleeps, retries, deliveries, runs left "
                "by a dead worker) inside an application, as `telo worker` does from the command line.",
    example="""\
kind: DurableLocal.Resumer
metadata: { name: resumer }
workflow: !ref order
interval: 5s
""",
)

DELIVER = KindSpec(
    M, "Deliver",
    config(
        {
            "journal": _JOURNAL,
            "token": runtime(type="string", description="The token the `Durable.Await` waits on."),
            "await": ref("Durable.Await",  # its outputType validates the payload before any lookup
                         description="The await answered: its `outputType` checks the payload before the "
                                     "delivery (ERR_DURABLE_PAYLOAD_INVALID)."),
            "payload": runtime(description="The value the await returns (default null)."),
        },
        ("journal", "token"),
    ),
    "invocable",
    description="Answers a `Durable.Await` by its token, as `telo deliver` does; returns `{delivered, run?}` "
                "(`delivered: false` when nothing waits on the token).",
    example="""\
kind: DurableLocal.Deliver
metadata: { name: approve }
journal: !ref runs
token: !cel "'approve:' + inputs.order"
payload: { approvedBy: !cel "inputs.user" }
""",
)

STATUS = KindSpec(
    M, "Status",
    config({"journal": _JOURNAL, "run": _RUN_ID}, ("journal",)),  # run: else inputs.run
    "invocable",
    output_schema={"type": "object", "properties": {"status": {"enum": _RUN_STATUSES}}, "required": ["status"]},
    description="Reads a run's status: `{run, status, dueAt?, parked?}`; `status` is one of "
                + ", ".join(f"`{s}`" for s in _RUN_STATUSES) + ".",
    example="""\
kind: DurableLocal.Status
metadata: { name: orderStatus }
journal: !ref runs
run: !cel "'order:' + inputs.order"
""",
)

RESULT = KindSpec(
    M, "Result",
    config(
        {
            "journal": _JOURNAL,
            "run": _RUN_ID,
            "wait": compile_time(**duration(),  # absent: read once
                                 description="How long to wait for the run to settle (a duration string); "
                                             "absent: read once, without waiting."),
            "poll": compile_time(**duration(default="100ms"),
                                 description="How often to look again while waiting (a duration string)."),
        },
        ("journal",),
    ),
    "invocable",
    description="Reads a run's outcome: `{run, status, result?, error?, …}` once settled, else `{run, status}` "
                "(after `wait`, if given).",
    example="""\
kind: DurableLocal.Result
metadata: { name: orderResult }
journal: !ref runs
wait: 30s
""",
)

CANCEL = KindSpec(
    M, "Cancel",
    config({"journal": _JOURNAL, "run": _RUN_ID,
            "reason": runtime(type="string", default="cancelled", description="Recorded with the cancellation.")},
           ("journal",)),
    "invocable",
    description="Cancels a run that has not settled; returns `{cancelled, status}` (it does not fail when the "
                "run is unknown or already settled).",
    example="""\
kind: DurableLocal.Cancel
metadata: { name: cancelOrder }
journal: !ref runs
reason: customer withdrew the order
""",
)

SCHEDULE = KindSpec(
    M, "Schedule",
    config(
        {
            "workflow": _WORKFLOW,
            "runId": runtime(type="string", minLength=1,  # default `<scheduleName>:<uuid>`
                             description="The scheduled run's id (default `<name>:<uuidv7>`); an id that exists "
                                         "is not admitted twice."),
            "after": runtime(**duration(), description="Due this long from now (a duration string)."),
            "at": runtime(type=["integer", "number", "string"],  # epoch ms or a parseable timestamp
                          description="Due at this time: epoch milliseconds or an RFC 3339 timestamp."),
            "inputs": runtime(type="object", description="The run's inputs (default `{}`)."),
        },
        ("workflow",),
        oneOf=exactly_one("after", "at"),
    ),
    "invocable",
    description="Admits a run of the workflow that a worker (or a `DurableLocal.Resumer`) starts when due: exactly "
                "one of `after` or `at`. Returns `{runId, scheduled, dueAt?, status?}`.",
    example="""\
kind: DurableLocal.Schedule
metadata: { name: remind }
workflow: !ref reminder
after: 1d
inputs: { user: !cel "inputs.user" }
""",
)

RESUME = KindSpec(
    M, "Resume",
    config({"workflow": _WORKFLOW, "run": _RUN_ID,
            "reason": runtime(type="string", default="resumed by operator",
                              description="Recorded with the override.")}, ("workflow",)),
    "invocable",
    description="Operator override: continues a parked (or held) run now, as `telo resume` does; the override "
                "is recorded in the journal.",
    example="""\
kind: DurableLocal.Resume
metadata: { name: resumeOrder }
workflow: !ref order
run: !cel "'order:' + inputs.order"
""",
)

DURABLE_LOCAL: ModuleSpec = module(
    "durable-local", M, WORKFLOW, QUEUE, RESUMER, DELIVER, STATUS, RESULT, CANCEL, SCHEDULE, RESUME, SEND, EVENT,
    JOURNAL,
)
