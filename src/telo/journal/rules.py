"""The run-lifecycle rules every store applies, written once (reference §7 "due", §6 "Claims").

SQL stores express the same rules in their WHERE clauses; the memory and file stores call these directly,
and the conformance suite holds all of them to the same answers. Every store raises :func:`unknown_run` for a
write to a run it does not hold.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from telo.errors import Code, JournalError
from telo.journal.claims import Fence, fence_refused, holder_is_dead
from telo.journal.model import Claim, Outcome, Parked, RunRecord


def unknown_run(run: str) -> JournalError:
    """The error of a write (or a read that needs the run) naming a run the journal does not hold."""
    return JournalError(
        Code.DURABLE_RUN_NOT_FOUND,
        f"no run {run!r} in this journal",
        hint="list the journal's runs with `telo runs list`",
        data={"run": run},
    )


def claim_is_live(claim: Claim | None, now_ms: int) -> bool:
    """A claim blocks others while it has not lapsed and its holder is not a dead process on this host."""
    return claim is not None and claim.until > now_ms and not holder_is_dead(claim.holder)


def may_claim(record: RunRecord, holder: str, now_ms: int) -> bool:
    """No live claim stands in the way. A live claim of ``holder`` itself does (unlike upstream's claimRun): one
    holder is one process, whose executions must not overlap either — re-granting would fence out its live
    execution mid-effect; an execution extends its own claim with ``renew``."""
    return not claim_is_live(record.claim, now_ms)


def granted(record: RunRecord, holder: str, until: int) -> RunRecord:
    """The record claimed by ``holder`` until ``until``, under the next fencing token."""
    return replace(record, claim=Claim(holder, until), fence=record.fence + 1)


def holds(record: RunRecord, fence: Fence) -> bool:
    """Is the run's claim still ``fence``'s (same holder, same token; lapsed or not)?"""
    return record.claim is not None and record.claim.holder == fence.holder and record.fence == fence.token


def check_fence(record: RunRecord, fence: Fence | None, what: str) -> None:
    """Refuse a fenced write whose fence no longer holds the run (``ClaimLost``); nothing for an unfenced one."""
    if fence is not None and not holds(record, fence):
        claim = record.claim
        raise fence_refused(record.run, fence, what, claim.holder if claim else None, record.fence)


def is_due(record: RunRecord, now_ms: int, entry_at_park_path: bool) -> bool:
    if record.corrupt is not None or claim_is_live(record.claim, now_ms):
        return False  # (a damaged run is listed, never executed: RunRecord.corrupt)
    if record.status == "running":
        return True
    if record.status == "scheduled":
        return record.due_at is not None and record.due_at <= now_ms
    if record.status == "parked":
        return (record.due_at is not None and record.due_at <= now_ms) or entry_at_park_path
    return False


def parked_on(records: Iterable[RunRecord], token: str) -> RunRecord | None:
    """The first run (in the given order) parked with wake token ``token``."""
    for record in records:
        if record.status == "parked" and record.parked is not None and record.parked.token == token:
            return record
    return None


def due_order(record: RunRecord) -> tuple[int, int, str]:
    """``ORDER BY due_at NULLS FIRST``, then admission order for a stable sweep."""
    return (0 if record.due_at is None else 1, record.due_at or 0, record.run)


def settled(record: RunRecord, outcome: Outcome, now_ms: int) -> RunRecord:
    return replace(
        record,
        status=outcome.status,
        result=outcome.result,
        result_v=outcome.result_v,
        error=dict(outcome.error) if outcome.error else None,
        collapsed_regions=outcome.collapsed_regions,
        collapse_reasons=tuple(outcome.collapse_reasons),
        replayed_steps=outcome.replayed_steps,
        due_at=None,
        parked=None,
        claim=None,
        updated_at=now_ms,
    )


def parked_record(record: RunRecord, parked: Parked, now_ms: int, *, keep_claim: bool = False) -> RunRecord:
    return replace(record, status="parked", parked=parked, due_at=parked.at,
                   claim=record.claim if keep_claim else None, updated_at=now_ms)


def unparked_record(record: RunRecord, now_ms: int) -> RunRecord:
    return replace(record, status="running", parked=None, due_at=None, updated_at=now_ms)
