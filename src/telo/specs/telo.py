"""The ``Telo`` module: kinds every manifest can name without importing (reference §1, §3)."""

from __future__ import annotations

from .common import config
from .model import KindSpec, ModuleSpec, module

M = "Telo"
_SCHEMA = config({"schema": {"type": "object", "description": "A JSON Schema (draft 2020-12)."}}, ("schema",))

TYPE = KindSpec(M, "Type", _SCHEMA, "type",
                description="A named value type, for `inputType`/`outputType` slots.",
                example="""\
kind: Telo.Type
metadata: { name: Order }
schema: { type: object, required: [id], properties: { id: { type: string } } }
""")
JSON_SCHEMA = KindSpec(M, "JsonSchema", _SCHEMA, "type", extends="Telo.Type",
                       description="A JSON Schema as a `Telo.Type`; usually written inline in an `inputType`.",
                       example="""\
kind: Telo.JsonSchema
metadata: { name: OrderInput }
schema: { type: object, required: [order], properties: { order: { type: string } } }
""")

TELO: ModuleSpec = module("telo", M, TYPE, JSON_SCHEMA)
