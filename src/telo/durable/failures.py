"""Failure receipts (event-log spec §1: an effect's receipt carries its *outcome*, success or failure).

A step whose effect raised records the error at ``<step>/@failed`` (a ``failure`` decision holding
``{code, message, hint?, data?}``), durable under the same rules as a success entry. A resumed run that
reaches the step replays the failure instead of executing the effect again, and raises the same error — so
a ``catch`` compensating for it sees the same ``error`` with and without a crash, and the run fails the same
way. Only the final outcome is recorded: a failed attempt that is retried has its verdict
(``<step>/@retry[k]``), not a receipt. Halts, suspensions and cancellation of the task are not failures of
the effect and are never recorded (telo.engine.suspend).

What is recorded must be journalable: ``data`` holding values outside the CEL domain is dropped, and then the
error raised on the first pass is the one rebuilt from the record, so both passes agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from telo.durable.halting import body_failure
from telo.errors import Code, TeloError, TypedFrameUnencodable, error_from_dict
from telo.journal.model import encode_value

FAILURE_DECISION = "failure"


def failure_of(exc: BaseException) -> tuple[dict[str, Any], TeloError]:
    """The record of ``exc`` and the error a replay of that record raises (``exc`` itself when equal)."""
    if isinstance(exc, TeloError):
        record = exc.to_dict()
    else:  # (dispatch wraps plain exceptions; this is for effects called some other way)
        record = {"code": Code.INTERNAL.value, "message": f"{type(exc).__name__}: {exc}"}
    if "data" in record:
        try:
            encode_value(record)
        except TypedFrameUnencodable:
            del record["data"]
    if isinstance(exc, TeloError) and exc.to_dict() == record:
        return record, body_failure(exc)
    return record, body_failure(error_from_dict(record))


def replayed(value: Any) -> TeloError:
    """The error a recorded failure receipt raises on replay (the body's failure, never a halt)."""
    return body_failure(error_from_dict(value if isinstance(value, Mapping) else {"code": Code.INTERNAL.value,
                                                                                   "message": str(value)}))
