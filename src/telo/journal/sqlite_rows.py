"""The SQLite journal's rows and the journal model (:mod:`telo.journal.model`), both ways.

What a row of ``<prefix>_runs`` / ``<prefix>_entries`` (:mod:`telo.journal.sqlite_schema`) means as a
``RunRecord`` or an ``Entry`` — read in the column order of :data:`RECORD_SELECT` / :data:`ENTRY_SELECT` — and
the column values a record's fields are written as. JSON columns hold compact JSON as the PostgreSQL journal
does (:mod:`telo.journal.postgres_rows` is this module's twin), so one reader understands both journals. A
damaged JSON column of a run reads as None with the damage named in ``RunRecord.corrupt``; an entry's checksum
is verified as it is read (:mod:`telo.journal.integrity`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from telo.errors import JournalCorrupt
from telo.journal.columns import json_column, json_text
from telo.journal.integrity import verify
from telo.journal.model import Claim, Entry, Parked, RunRecord

# The columns a RunRecord is read from, in record_from_row's order.
RECORD_SELECT: Final = (
    "run, status, due_at, parked_path, parked_resource, parked_token, parked_at, parked_reason, "
    "inputs, inputs_codec_version, result, result_codec_version, error, collapsed_regions, "
    "collapse_reasons, replayed_steps, manifest_digest, digest_scope, workflow, created_at, updated_at, "
    "claim_holder, claim_until, epoch, claim_fence, queue, queue_key, priority, started_at, dedup_key, debounce_key"
)
ENTRY_SELECT: Final = "path, entry_kind, value, codec_version, decision, target, seq, checksum, written_at"


def record_from_row(row: Sequence[Any]) -> RunRecord:
    """The RunRecord the memory store would hold for this row (RECORD_SELECT order); a damaged JSON column
    reads as None with the damage named in ``corrupt`` (one bad row must not make the journal unreadable)."""
    (
        run, status, due_at, p_path, p_resource, p_token, p_at, p_reason,
        inputs, inputs_v, result, result_v, error, collapsed, reasons, replayed,
        digest, scope, workflow, created, updated, holder, until, epoch, fence, queue, queue_key, priority,
        started_at, dedup_key, debounce_key,
    ) = row  # fmt: skip
    damage: list[str] = []
    error = json_column(error, "error", dict, damage)
    reasons = json_column(reasons, "collapse_reasons", list, damage)
    return RunRecord(
        run=run,
        status=status,
        due_at=due_at,
        parked=None if p_path is None else Parked(p_path, p_resource, p_token, p_at, p_reason),
        inputs=inputs,
        inputs_v=inputs_v,
        result=result,
        result_v=result_v,
        error=error,
        collapsed_regions=collapsed,
        collapse_reasons=None if reasons is None else tuple(str(r) for r in reasons),
        replayed_steps=replayed,
        manifest_digest=digest,
        digest_scope=scope,
        workflow=workflow,
        created_at=created,
        updated_at=updated,
        claim=None if holder is None else Claim(holder, until if until is not None else 0),
        epoch=epoch or 0,
        fence=fence or 0,
        queue=queue,
        queue_key=queue_key,
        priority=priority,
        started_at=started_at,
        dedup_key=dedup_key,
        debounce_key=debounce_key,
        corrupt="; ".join(damage) or None,
    )


def entry_from_row(row: Sequence[Any], run: str = "?") -> Entry:
    """The entry of an ENTRY_SELECT row, its checksum verified (telo.journal.integrity)."""
    path, kind, value, v, decision, target, seq, crc, at = row
    if target is not None:
        try:
            target = json.loads(target)
        except (TypeError, ValueError):
            target = None
        if not isinstance(target, dict) or not all(isinstance(x, str) for x in target.values()):
            raise JournalCorrupt(
                f"journal entry {path!r} of run {run!r} has a target that is not a JSON object of strings",
                hint="the journal was damaged; `telo runs journal` shows the run's entries, `telo cancel` stops it",
                data={"run": run, "path": path},
            )
    if kind not in ("step", "decision"):
        raise JournalCorrupt(f"journal entry {path!r} of run {run!r} has an unknown "
                             f"kind {kind!r}", data={"run": run, "path": path})
    # ``at`` is not checksummed (telo.journal.integrity): a damaged time reads as no time, never as a value
    return verify(run, Entry(path, kind, value, v, decision, target, seq, at if type(at) is int else None), crc)


def error_json(error: Mapping[str, Any] | None) -> str | None:
    # rules.settled keeps an error only when it is non-empty; so do we.
    return json_text(dict(error)) if error else None


def reasons_json(reasons: Sequence[str] | None) -> str | None:
    return None if reasons is None else json_text(list(reasons))


def columns_for(name: str, value: Any) -> list[tuple[str, Any]]:
    """The columns (and SQL values) that hold RunRecord field ``name`` (update_run)."""
    if name == "parked":
        p: Parked | None = value
        if p is None:
            return [(c, None) for c in ("parked_path", "parked_resource", "parked_token", "parked_at",
                                        "parked_reason")]
        return [("parked_path", p.path), ("parked_resource", p.resource), ("parked_token", p.token),
                ("parked_at", p.at), ("parked_reason", p.reason)]
    if name == "claim":
        c: Claim | None = value
        return [("claim_holder", None if c is None else c.holder), ("claim_until", None if c is None else c.until)]
    if name == "error":
        return [("error", None if value is None else json_text(dict(value)))]
    if name == "collapse_reasons":
        return [("collapse_reasons", reasons_json(value))]
    if name == "inputs_v":
        return [("inputs_codec_version", value)]
    if name == "result_v":
        return [("result_codec_version", value)]
    return [(name, value)]
