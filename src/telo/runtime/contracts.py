"""``inputType`` / ``outputType`` contracts, validated with ``jsonschema`` at the dispatch chokepoint."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from telo.engine.dispatch import Contract
from telo.errors import Code, TeloError
from telo.manifest import Ref
from telo.manifest.json_schema import Unresolvable, offline_validator, unresolved_ref

if TYPE_CHECKING:
    from telo.runtime.resource import Host


def schema_of(app: Host, node: Any) -> Mapping[str, Any] | None:
    """The JSON schema a ``Telo.JsonSchema``/``Telo.Type`` reference (or an inline mapping) names."""
    if node is None:
        return None
    if isinstance(node, Ref):
        decl = app.manifest.resolve(node)
        schema = decl.config.get("schema")
        return schema if isinstance(schema, Mapping) else None
    if isinstance(node, Mapping):
        inner = node.get("schema")
        return inner if isinstance(inner, Mapping) else node
    return None


def to_json_like(value: Any) -> Any:
    """What jsonschema sees: the plain encoding, so ints stay integers and timestamps are RFC 3339 text."""
    from telo.values import to_plain

    return to_plain(value)


def _explained(error: Any) -> str:
    """jsonschema's message with the value it quotes in JSON rather than as Python writes it (``null is not of
    type 'object'``, not ``None is not …``): what the user wrote was JSON or YAML."""
    message: str = error.message
    quoted = repr(error.instance)
    if message.startswith(quoted):
        shown = json.dumps(error.instance, ensure_ascii=False, default=str)
        message = (shown if len(shown) <= 60 else shown[:57] + "...") + message[len(quoted):]
    return message


class SchemaValidator:
    def __init__(self, schema: Mapping[str, Any], code: str) -> None:
        self.schema = schema
        self.code = code
        self._validator = offline_validator(schema)

    def validate(self, value: Any, *, where: str) -> Any:
        value = self._fill_defaults(value)
        try:
            errors = sorted(self._validator.iter_errors(to_json_like(value)), key=lambda e: list(e.path))
        except Unresolvable as exc:
            raise TeloError(self.code, f"{where}: the declared schema refers to {unresolved_ref(exc)!r}, which "
                            "is not inside it (telo fetches no schema from elsewhere)",
                            hint="write the referenced schema into the declared type ($defs)") from None
        if errors:
            details = "; ".join(f"{'/' + '/'.join(map(str, e.path)) if e.path else '/'}: {_explained(e)}"
                                for e in errors)
            raise TeloError(self.code, f"{where}: the declared schema refuses it: {details}",
                            hint="fix the values, or the declared inputType/outputType",
                            data={"errors": [e.message for e in errors]})
        return value

    def _fill_defaults(self, value: Any) -> Any:
        props = self.schema.get("properties")
        if isinstance(value, dict) and isinstance(props, Mapping):
            missing = {k: s["default"] for k, s in props.items()
                       if k not in value and isinstance(s, Mapping) and "default" in s}
            if missing:
                return {**value, **missing}
        return value


def contract_for(app: Host, config: Mapping[str, Any]) -> Contract | None:
    inputs, outputs = schema_of(app, config.get("inputType")), schema_of(app, config.get("outputType"))
    if inputs is None and outputs is None:
        return None
    return Contract(SchemaValidator(inputs, Code.INPUT_INVALID) if inputs is not None else None,
                    SchemaValidator(outputs, Code.OUTPUT_INVALID) if outputs is not None else None)
