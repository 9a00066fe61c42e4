"""The ``Telo`` module: kinds every manifest can name without importing (reference §1, §3)."""

from __future__ import annotations

from .common import config
from .model import KindSpec, ModuleSpec, module

M = "Telo"
_SCHEMA = config({"schema": {"type": "object"}}, ("schema",))

TYPE = KindSpec(M, "Type", _SCHEMA, "type")
JSON_SCHEMA = KindSpec(M, "JsonSchema", _SCHEMA, "type", extends="Telo.Type")

TELO: ModuleSpec = module("telo", M, TYPE, JSON_SCHEMA)
