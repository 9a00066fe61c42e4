"""The run-listing order and cursor every store shares: newest first by (created_at, run)."""

from __future__ import annotations

import base64
import json

from telo.errors import Code, JournalError
from telo.journal.model import RunFilter, RunRecord


def sort_key(record: RunRecord) -> tuple[int, str]:
    return (record.created_at or 0, record.run)


def encode_cursor(record: RunRecord) -> str:
    raw = json.dumps([record.created_at or 0, record.run], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, run = json.loads(raw)
        if type(created) is not int or not isinstance(run, str):
            raise ValueError(cursor)
        return created, run
    except (ValueError, TypeError) as exc:
        raise JournalError(
            Code.INVALID_CURSOR,
            f"the paging cursor {cursor!r} is not one this journal handed out",
            hint="start again without --after, then pass the `next` value of the previous page",
        ) from exc


def matches(record: RunRecord, flt: RunFilter) -> bool:
    """The filter applied in Python (the memory and file stores; SQL stores push it into WHERE)."""
    if flt.status is not None and record.status != flt.status:
        return False
    if flt.workflow is not None and record.workflow != flt.workflow:
        return False
    if flt.since is not None and (record.created_at or 0) < flt.since:
        return False
    if flt.after is not None:
        return sort_key(record) < decode_cursor(flt.after)
    return True
