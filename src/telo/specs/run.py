"""Module ``run`` (library ``Run``): the step composers (reference §3)."""

from __future__ import annotations

from .common import CATCHES, config, input_type, output_type, ref, runtime, steps
from .model import KindSpec, ModuleSpec, module

M = "Run"
_ITEM_SCOPE = ["item", "index", "items"]
_BINDINGS = {"x-telo-bindings": True}  # the expression also sees the resource's `bindings:` names

SEQUENCE = KindSpec(
    M, "Sequence",
    config(
        {
            "steps": steps(description="The steps, run in order (the step grammar: docs/kinds/steps.md)."),
            "inputType": input_type(),
            "outputType": output_type(),
            "outputs": runtime(type="object", **{"x-telo-scope": ["steps"]},  # against {steps, inputs}
                               description="The call's result, evaluated after the last step against "
                                           "`{steps, inputs}`; absent: the `steps` map itself."),
            # Inline resource declarations scoped to one run of the sequence (created on entry, torn down
            # on exit); each is a full `{kind, metadata: {name}, …}` document.
            "with": {"type": "array", "items": {"type": "object", "required": ["kind", "metadata"]},
                     "x-telo-with": True,
                     "description": "Resources scoped to one call of the sequence, each a full `{kind, metadata: "
                                    "{name}, …}` document: created on entry, torn down on exit."},
            "targets": {"type": "array", "items": ref("*"),  # with-resources run() before the steps
                        "description": "Runnable resources (typically `with` ones) run, concurrently, before "
                                       "the steps."},
        },
        ("steps",),
    ),
    "invocable",
    capabilities=frozenset({"runnable"}),
    description="Runs a list of steps in order and returns `outputs` (or the `steps` map). As a target of "
                "`Telo.Application` it is run once at boot; invoked, it is a reusable sub-routine.",
    example="""\
kind: Run.Sequence
metadata: { name: greet }
inputType: { kind: Telo.JsonSchema, schema: { type: object, required: [who] } }
steps:
  - name: hello
    value: !cel "'hello, ' + inputs.who"
outputs: { text: !cel "steps.hello.result" }
""",
)

VALUE = KindSpec(
    M, "Value",
    config(
        {
            "value": runtime(**_BINDINGS,  # sees {inputs, …bindings}
                             description="The result: an expression or a structure with CEL leaves, seeing "
                                         "`inputs` and the `bindings` names."),
            "bindings": {"type": "object", "additionalProperties": runtime(**_BINDINGS),
                         "description": "Named intermediate values `{name: expression}`, visible to `value` and "
                                        "to each other (evaluated on first use)."},
            "inputType": input_type(),
            "outputType": output_type(),
        },
        ("value",),
    ),
    "invocable",
    description="Computes a value from its inputs: a pure function written in CEL.",
    example="""\
kind: Run.Value
metadata: { name: total }
bindings: { net: !cel "inputs.price * inputs.qty" }
value: !cel "net * 1.2"
""",
)

_COLLECTION = {
    "collection": runtime(type="array",  # an array (or, for Iteration, an async stream)
                          description="The list to go through; evaluated once (and journaled in a durable run)."),
    "concurrency": runtime(type="integer", minimum=1, default=1,
                           description="How many items are processed at once; a failure stops new items "
                                       "starting, and the ones in flight finish."),
    "steps": steps(**{"x-telo-scope": _ITEM_SCOPE},
                   description="The steps run for each item: they see `item`, its `index` (0-based) and the "
                               "whole `items` list, besides `inputs`."),
    "catches": CATCHES,
    "inputType": input_type(),
    "outputType": output_type(),
}

ITERATION = KindSpec(
    M, "Iteration", config(dict(_COLLECTION), ("collection", "steps")), "invocable",
    description="Runs its steps once per item of `collection`, for their effects; returns nothing (use "
                "`Run.Projection` to collect results).",
    example="""\
kind: Run.Iteration
metadata: { name: notifyAll }
collection: !cel "inputs.users"
concurrency: 4
steps:
  - name: send
    invoke: !ref notify
    inputs: { user: !cel "item", position: !cel "index" }
""",
)

PROJECTION = KindSpec(
    M, "Projection",
    config({**_COLLECTION,
            "outputs": runtime(type="object", **{"x-telo-scope": [*_ITEM_SCOPE, "steps"]},
                               description="Each item's result, evaluated after its steps against `{item, index, "
                                           "items, steps, inputs}`; absent: the item's `steps` map.")},
           ("collection", "steps")),
    "invocable",
    description="Like `Run.Iteration`, but returns a list: one `outputs` value per item, in the collection's "
                "order whatever the concurrency.",
    example="""\
kind: Run.Projection
metadata: { name: prices }
collection: !cel "inputs.skus"
steps:
  - name: price
    invoke: !ref priceOf
    inputs: { sku: !cel "item" }
outputs: { sku: !cel "item", price: !cel "steps.price.result" }
""",
)

LOOP = KindSpec(
    M, "Loop",
    config(
        {
            "condition": runtime(type="boolean", **{"x-telo-scope": ["iteration", "previous"]},
                                 description="Tested before each turn (the first included): the loop stops when it "
                                             "is false. Sees `iteration` (0-based turn) and `previous` (the last "
                                             "turn's `steps` map, null at first)."),
            "maxIterations": runtime(type="integer", minimum=1,
                                     description="The most turns the loop makes."),
            "steps": steps(**{"x-telo-scope": ["iteration", "previous"]},
                           description="The body of each turn; sees `iteration` and `previous`."),
            "outputs": runtime(type="object", **{"x-telo-scope": ["steps", "iteration", "previous"]},
                               description="The result, evaluated after the last turn against `{steps, iteration, "
                                           "previous, inputs}`; absent: the last turn's `steps` map."),
            "catches": CATCHES,
            "inputType": input_type(),
            "outputType": output_type(),
        },
        ("steps",),
        # At least one bound (else INVALID_LOOP at run time; reported at load here).
        anyOf=[{"required": ["condition"]}, {"required": ["maxIterations"]}],
    ),
    "invocable",
    description="A bounded loop: repeats its steps while `condition` holds, at most `maxIterations` times (at "
                "least one of the two is required).",
    example="""\
kind: Run.Loop
metadata: { name: poll }
maxIterations: 10
condition: !cel "previous == null || previous.check.result.status != 'done'"
steps:
  - name: check
    invoke: !ref fetchStatus
""",
)

CHOICE = KindSpec(
    M, "Choice",
    config(
        {
            "choices": {
                "type": "array",
                "description": "`[{when, value}]`, tried in order: the first whose `when` holds gives the result.",
                "items": {
                    "type": "object",
                    "properties": {"when": runtime(type="boolean", **_BINDINGS), "value": runtime(**_BINDINGS)},
                    "required": ["when", "value"],
                    "additionalProperties": False,
                },
            },
            "default": {"type": "object", "properties": {"value": runtime(**_BINDINGS)}, "required": ["value"],
                        "additionalProperties": False,
                        "description": "`{value}`: the result when no choice matches (absent: ERR_NO_MATCH)."},
            "bindings": {"type": "object", "additionalProperties": runtime(**_BINDINGS),
                         "description": "Named intermediate values, visible to every `when` and `value`."},
            "inputType": input_type(),
            "outputType": output_type(),
        },
        ("choices",),
    ),
    "invocable",
    description="Picks a value by the first matching condition: a CEL `switch` as a resource.",
    example="""\
kind: Run.Choice
metadata: { name: tier }
choices:
  - { when: !cel "inputs.total >= 1000", value: gold }
  - { when: !cel "inputs.total >= 100", value: silver }
default: { value: bronze }
""",
)

DETACH = KindSpec(
    M, "Detach",
    config({"invoke": ref("*", **{"x-telo-use": "detached"},
                          description="The resource to start in the background."),
            "inputs": runtime(description="Its inputs, evaluated before it starts.")},
           ("invoke",)),
    "invocable",
    output_schema={"type": "object", "properties": {"detached": {"const": True}}},
    description="Starts a call in the background and returns `{detached: true}` at once, without waiting for "
                "it (not allowed inside a durable body: its outcome would not be journaled).",
    example="""\
kind: Run.Detach
metadata: { name: warmCache }
invoke: !ref refreshCache
inputs: { region: eu }
""",
)

RUN: ModuleSpec = module("run", M, SEQUENCE, VALUE, ITERATION, PROJECTION, LOOP, CHOICE, DETACH)
