"""Messages into runs and events out of them (issue 18; telo.durable.messages): ``Durable.Receive`` and
``Durable.Publish`` (module ``durable``), ``DurableLocal.Send`` and ``DurableLocal.Event`` (module
``durable-local``)."""

from __future__ import annotations

from typing import Any

from .common import compile_time, config, duration, ref, runtime, steps, type_slot
from .model import KindSpec

_NO_SUSPEND_PARK = "parking suspends the run until a wake-up, which a no-suspend region cannot outlive"
_REQUIRES_REPLAYED: dict[str, Any] = {"zone": "Self.Run", "attributes": ["replayed"]}
_JOURNAL = ref("DurableLocal.Journal",
               description="The journal the runs live in: a `Journal` of a durable-journal-* module.")
_RUN_ID = runtime(type="string", minLength=1,
                  description="The run to address (evaluated per call); absent: the call's `inputs.run`.")
_NAME = {"type": "string", "minLength": 1}

RECEIVE = KindSpec(
    "Durable", "Receive",
    config(
        {
            "topic": runtime(**_NAME, description="The topic to receive from (evaluated per call; absent: the "
                                                  "call's `inputs.topic`)."),
            "timeout": compile_time(**duration(examples=["30s", "1h", "2d"]),
                                    description="How long to wait, from the first time the step runs (the "
                                                "deadline is journaled); past it the step returns "
                                                "`{topic, timedOut: true}`. An `inputs.timeout` of the call "
                                                "overrides it. Absent: no deadline."),
            "outputType": type_slot(description="The payload's schema: a send while the receive waits is "
                                                "refused if it fails it (ERR_DURABLE_PAYLOAD_INVALID, nothing "
                                                "written); a message sent earlier that fails it fails the step."),
        },
        **{"x-telo-requires-zone": _REQUIRES_REPLAYED, "x-telo-violates-zone": {"noSuspend": _NO_SUSPEND_PARK}},
    ),
    "invocable",
    output_schema={"type": "object", "properties": {
        "topic": {"type": "string"}, "key": {"type": "string"}, "seq": {"type": "integer"}, "payload": {},
        "timedOut": {"type": "boolean"}}, "required": ["topic", "timedOut"]},
    description="Receives the next message sent to this run on a topic (`telo send RUN TOPIC`, "
                "`DurableLocal.Send`, `app.send`), oldest first, each exactly once; the run parks until one "
                "comes. Returns `{topic, key, seq, payload, timedOut: false}` (or `{topic, timedOut: true}` past "
                "the timeout). The receive is journaled: a replay hands back the same message. Only inside a "
                "durable body.",
    example="""\
kind: Durable.Receive
metadata: { name: nextCommand }
topic: commands
timeout: 1h
""",
)

PUBLISH = KindSpec(
    "Durable", "Publish",
    config({"name": runtime(**_NAME, description="The event's name (evaluated per call)."),
            "value": runtime(description="Its value (evaluated per call, journaled once).")},
           ("name",), **{"x-telo-requires-zone": _REQUIRES_REPLAYED}),
    "invocable",
    output_schema={"type": "object", "properties": {"name": {"type": "string"}, "value": {}},
                   "required": ["name"]},
    description="Publishes a named value of this run — progress, a status, an answer — for readers outside it "
                "(`telo events get RUN NAME`, `DurableLocal.Event`, `app.event`). Journaled once (a replay does "
                "not publish again); the latest value per name wins and the history is kept. Only inside a "
                "durable body.",
    example="""\
kind: Durable.Publish
metadata: { name: progress }
name: progress
value: !cel "{'done': inputs.done, 'of': inputs.total}"
""",
)

SEND = KindSpec(
    "DurableLocal", "Send",
    config(
        {
            "journal": _JOURNAL,
            "run": _RUN_ID,
            "topic": runtime(**_NAME, description="The topic the receiving run receives from."),
            "payload": runtime(description="The message (default null)."),
            "key": runtime(**_NAME, description="Its idempotency key: a second send with one key delivers "
                                                "nothing. Default: the sending step's idempotency key "
                                                "(`<run>/<step path>`), so a step re-executed after a crash "
                                                "sends once."),
        },
        ("journal", "topic"),
    ),
    "invocable",
    description="Sends a message to a run by id, as `telo send` does; returns `{run, topic, key, seq, duplicate, "
                "woke}`. Refused for an unknown run (ERR_DURABLE_RUN_NOT_FOUND) or a settled one "
                "(ERR_DURABLE_RUN_SETTLED).",
    example="""\
kind: DurableLocal.Send
metadata: { name: approve }
journal: !ref runs
run: !cel "'order:' + inputs.order"
topic: approvals
payload: { approvedBy: !cel "inputs.user" }
""",
)

EVENT = KindSpec(
    "DurableLocal", "Event",
    config(
        {
            "journal": _JOURNAL,
            "run": _RUN_ID,
            "name": runtime(**_NAME, description="The event's name (absent: the call's `inputs.name`)."),
            "wait": compile_time(**duration(), description="How long to wait for the run to publish it (absent: "
                                                           "read once)."),
        },
        ("journal",),
    ),
    "invocable",
    output_schema={"type": "object", "properties": {"set": {"type": "boolean"}, "value": {}},
                   "required": ["set"]},
    description="Reads the latest value a run published under a name (`Durable.Publish`): `{run, name, set: "
                "true, value, seq, path}`, or `{set: false}` when it has published none (by the end of `wait`).",
    example="""\
kind: DurableLocal.Event
metadata: { name: orderProgress }
journal: !ref runs
run: !cel "'order:' + inputs.order"
name: progress
wait: 5s
""",
)

STREAM_WRITE = KindSpec(
    "Durable", "StreamWrite",
    config({"stream": runtime(**_NAME, description="The stream of this run to write to (evaluated per call)."),
            "value": runtime(description="The value appended (evaluated per call, journaled once)."),
            "close": {"type": "boolean", "default": False,
                      "description": "Close the stream instead of writing a value: readers then end."}},
           ("stream",), **{"x-telo-requires-zone": _REQUIRES_REPLAYED}),
    "invocable",
    output_schema={"type": "object", "properties": {"stream": {"type": "string"}, "offset": {"type": "integer"},
                                                    "value": {}, "closed": {"type": "boolean"}},
                   "required": ["stream", "offset"]},
    description="Appends a value to a named stream of this run (or closes it, `close: true`); returns `{stream, "
                "offset, value}`. Readers (`telo stream read RUN NAME --follow`, `app.stream`, a `Durable.Consume` "
                "whose source is the stream) get every value once, in offset order, and end at the close or when "
                "the run settles. Journaled once: a replay writes nothing, and a step re-executed after a crash "
                "writes the same offset. Writing to a closed stream is ERR_DURABLE_STREAM_CLOSED. Only inside a "
                "durable body.",
    example="""\
kind: Durable.StreamWrite
metadata: { name: emitRow }
stream: rows
value: !cel "inputs.row"
""",
)


def _closed(properties: dict[str, Any], required: tuple[str, ...], description: str) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False,
            "description": description}


CONSUME = KindSpec(
    "Durable", "Consume",
    config(
        {
            "source": {
                "type": "object",
                "description": "What to consume: exactly one of `stream`, `query`, `file`.",
                "properties": {
                    "stream": _closed({"journal": _JOURNAL,
                                       "run": runtime(**_NAME, description="The writing run's id."),
                                       "name": runtime(**_NAME, description="Its stream's name.")},
                                      ("journal", "run", "name"),
                                      "Another run's stream (`Durable.StreamWrite`): ends at its close."),
                    "query": _closed({"connection": ref("*", description="The SQL connection to read through."),
                                      "sql": runtime(type="string", minLength=1,
                                                     description="A SELECT; paged by `key` (`WHERE key > cursor "
                                                                 "ORDER BY key LIMIT batchSize` around it)."),
                                      "key": runtime(type="string", minLength=1,
                                                     description="The column it is paged by: unique and not null "
                                                                 "(a repeated or null key fails the consume), and "
                                                                 "growing in commit order — a row committed with a "
                                                                 "key below the cursor is never read (on PostgreSQL "
                                                                 "a serial id drawn by concurrent producers can "
                                                                 "commit out of order: insert under a lock, or "
                                                                 "page by a key assigned at commit).")},
                                     ("connection", "sql", "key"),
                                     "A table as a queue: ends when a batch comes back empty."),
                    "file": _closed({"path": runtime(type="string", minLength=1,
                                                     description="A newline-delimited JSON file (relative to the "
                                                                 "manifest).")},
                                    ("path",), "One JSON value a line (lines end at `\\n`; the last may "
                                    "lack it); ends at the end of the file, so consume a file once it is complete."),
                },
                "additionalProperties": False,
                "minProperties": 1,
                "maxProperties": 1,
            },
            "batchSize": {"type": "integer", "minimum": 1, "default": 100,
                          "description": "Items a batch holds at most."},
            "poll": compile_time(**duration(), description="How often an open stream with nothing new is read "
                                                            "again (default 500ms)."),
            "transaction": ref("*", description="A SQL connection: each batch's steps and its cursor run in one "
                                                "transaction on it; when the run's journal shares that database "
                                                "they commit together (exactly-once consumption)."),
            "steps": steps(**{"x-telo-scope": ["batch"]},
                           description="The steps run once per batch, with `batch.items`, `batch.index`, "
                                       "`batch.from` and `batch.to` in scope."),
        },
        ("source", "steps"),  # (no zone required: outside a durable run it consumes, durably only inside one)
    ),
    "invocable",
    output_schema={"type": "object", "properties": {"batches": {"type": "integer"}, "items": {"type": "integer"},
                                                    "cursor": {}}, "required": ["batches", "items"]},
    description="Durable stream iteration: consumes a source in batches, running `steps` once per batch. Each "
                "batch's bounds (a query's: its rows too) are journaled before its steps (`<step>/@batch[k]`) and its "
                "cursor after them "
                "(`<step>/@cursor[k]`, the event log's `stream_cursor`), so a crash resumes after the last "
                "completed batch and never hands a batch different items. With `transaction:` on the journal's "
                "own database, a batch's SQL effects and its cursor commit together. Returns `{batches, items, "
                "cursor}`.",
    example="""\
kind: Durable.Consume
metadata: { name: drainOutbox }
source:
  query: { connection: !ref db, sql: "SELECT id, body FROM outbox", key: id }
batchSize: 100
transaction: !ref db
steps:
  - name: mark
    invoke: !ref markSent
    inputs: { ids: !cel "batch.items.map(r, r.id)" }
""",
)
