"""A value a declared schema refuses is quoted in the message as JSON, the way the user wrote it — ``null``, not
Python's ``None`` (a user's walk-through, 2026-12-04: ``telo deliver --payload ''`` said ``/: None is not of type
'object'``; docs/cli.md: no value is ever printed with Python's ``str()``)."""

from __future__ import annotations

import pytest

from telo.errors import Code, TeloError
from telo.runtime.contracts import SchemaValidator


@pytest.mark.parametrize(("value", "says"), [
    (None, "/: null is not of type 'object'"),
    ({"n": "3"}, "/n: \"3\" is not of type 'integer'"),
    ({"n": True}, "/n: true is not of type 'integer'"),
    ({"n": 1, "tags": ["a", None]}, "/tags/1: null is not of type 'string'"),
])
def test_a_refused_value_is_quoted_as_json(value: object, says: str) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "tags": {"type": "array",
                                                                                  "items": {"type": "string"}}}}
    with pytest.raises(TeloError) as exc:
        SchemaValidator(schema, Code.DURABLE_PAYLOAD_INVALID).validate(value, where="the payload delivered to 'x'")
    assert exc.value.message.startswith("the payload delivered to 'x': the declared schema refuses it: ")
    assert says in exc.value.message, exc.value.message
    assert "None" not in exc.value.message and "True" not in exc.value.message
