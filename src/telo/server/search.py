"""Searching the runs list: by run id and inputs (substrings), by workflow, status and creation time.

Status, workflow and ``since`` go to the store as the listing filter (``telo runs list --status --workflow
--since`` uses the same one); the store protocol has no text search and no upper time bound, so a run-id or
inputs substring and ``until`` are matched here, over the store's pages, newest first. A search stops after
:data:`SCAN_CAP` runs and hands back the cursor where it stopped, so a search over a huge journal stays bounded
and can be continued ("next page").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from telo.errors import Code, TeloError
from telo.journal.model import NO_VALUE, STATUSES, RunFilter, RunRecord
from telo.journal.paging import encode_cursor
from telo.journal.store import Store
from telo.operations import runs
from telo.server import views
from telo.server.console import rfc3339

SCAN_CAP: Final = 5_000  # runs read by one search request at most
_SCAN_PAGE: Final = 200


def parse_time(text: str | None, name: str) -> int | None:
    """A query's time as epoch ms: RFC 3339 (``2026-12-02T07:52:55.123Z``), a form's ``datetime-local``
    (``2026-12-02T07:52``, read as UTC — the pages show every time in UTC), or epoch ms. Empty: no bound."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    if text.isascii() and text.isdigit():  # (str.isdigit takes "²", which int() refuses)
        return int(text)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise TeloError(Code.INVALID_VALUE, f"{name} {text!r} is not a time",
                        hint="use RFC 3339 (2026-12-02T07:52:55Z), YYYY-MM-DDTHH:MM (UTC) or epoch ms") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def _inputs_text(record: RunRecord) -> str:
    """The run's inputs as compact JSON in the plain encoding (what the run page shows), "" when unreadable."""
    from telo.values import to_plain

    try:
        value = record.decoded_inputs()
    except TeloError:
        return ""
    if value is NO_VALUE:
        return ""
    return json.dumps(to_plain(value), ensure_ascii=False, separators=(",", ":"))


def search_runs(store: Store, query: Mapping[str, str]) -> dict[str, Any]:
    """One page of the runs a query selects (``status``, ``workflow``, ``since``, ``until``, ``q`` — a run-id
    substring —, ``inputs`` — a substring of the inputs' JSON —, ``after``, ``limit``), newest first, with
    the next page's cursor. Substrings match case-insensitively."""
    status = query.get("status") or None
    workflow = query.get("workflow") or None
    if status is not None and status not in STATUSES:
        raise TeloError(Code.INVALID_VALUE, f"unknown status {status!r}", hint=f"use one of {', '.join(STATUSES)}")
    try:
        limit = max(1, min(int(query.get("limit") or views.PAGE_SIZE), views.MAX_PAGE_SIZE))
    except ValueError:
        raise TeloError(Code.INVALID_VALUE, f"limit {query.get('limit')!r} is not a number") from None
    since, until = parse_time(query.get("since"), "since"), parse_time(query.get("until"), "until")
    shown_text, shown_inputs = (query.get("q") or "").strip(), (query.get("inputs") or "").strip()
    text, inputs = shown_text.lower(), shown_inputs.lower()
    after = query.get("after") or None
    found: list[RunRecord] = []
    scanned, exhausted = 0, False
    cursor = after
    while len(found) < limit and scanned < SCAN_CAP:
        # Without a text or until filter every listed run matches: read exactly one page of them.
        plain = not text and not inputs and until is None
        size = limit - len(found) if plain else min(_SCAN_PAGE, SCAN_CAP - scanned)
        page = runs.list_runs(store, RunFilter(status=status, workflow=workflow, since=since, limit=size,
                                               after=cursor))
        for record in page.runs:
            scanned += 1
            cursor = encode_cursor(record)
            if until is not None and (record.created_at or 0) > until:
                continue
            if text and text not in record.run.lower():
                continue
            if inputs and inputs not in _inputs_text(record).lower():
                continue
            found.append(record)
            if len(found) == limit:
                break
        if page.next is None and (len(found) < limit or cursor == _last_cursor(page.runs)):
            exhausted = True
            break
    more = not exhausted
    return {"runs": [views.run_summary(r) for r in found], "next": cursor if more else None,
            "status": status, "workflow": workflow, "limit": limit,
            "q": shown_text or None, "inputs": shown_inputs or None, "since": rfc3339(since),
            "until": rfc3339(until), "scanned": scanned,
            # The scan cap stopped the search before a page filled: "next" continues it.
            "truncated": more and len(found) < limit}


def _last_cursor(records: list[RunRecord]) -> str | None:
    return encode_cursor(records[-1]) if records else None
