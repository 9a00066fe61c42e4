"""A durable schedule's ledger (issue 17): the run ``<schedule>@ledger`` whose journal entries record every
decision about the schedule's ticks and every operator action on it — an append-only event log in the same
journal as the runs the ticks start, so it moves, backs up and is read like them (``telo runs show
<schedule>@ledger`` prints it).

The ledger is a run record parked on a path nothing is ever written to (so it is never due), with the schedule's
name as its ``workflow`` (so no workflow's worker claims it). Its entries are decisions (spec §5.2 "decision"
entries; the first write at a path wins, and every writer gets the stored one back):

- ``created`` — when the schedule first ran (``{at}``): an interval schedule's anchor, and the instant before
  which a new schedule has no ticks to catch up;
- ``ticks/<RFC 3339 tick>`` — what was done with a tick: ``fire`` (its run ``<schedule>@<tick>`` was admitted),
  ``buffer`` (admitted once the run before it settles: overlap ``bufferOne``/``bufferAll``) or ``skip`` with a
  reason. A skip may stand for a range of missed ticks (``{from, count}``) so a long outage is one entry;
- ``ops/<ms>/<id>`` — an operator's ``pause``, ``resume``, ``trigger`` or ``backfill`` (who, when, why);
  ``ops/failed/<run>`` — the pause ``pauseOnFailure`` made when that run failed (once per run);
- ``state/<n>`` — a snapshot of the folded state, appended before old entries are compacted away.

Decisions are made by one process at a time: the one holding the ledger's claim (:meth:`Store.claim`), whose
decisions are fenced writes — a paused or partitioned former holder cannot write a stale decision after
another took over. Operator actions are unfenced appends at unique paths; the holder reads them at its next
beat.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field, replace
from typing import Any, Final

from telo.clock import uuid4_hex
from telo.durable.operator import SCHEDULE_LEDGER_PATH
from telo.journal.claims import Fence
from telo.journal.model import Admission, Entry, Parked
from telo.journal.store import Store

from .cron import tick_text

LEDGER_PATH: Final = SCHEDULE_LEDGER_PATH  # the ledger's park path: nothing is ever written there
KEEP_ENTRIES: Final = 200  # a ledger longer than twice this is compacted down to about this (snapshot first)
_RECENT: Final = 50  # tick decisions and operations a fold keeps for display
SETTLED: Final = frozenset({"completed", "failed", "cancelled"})


def ledger_id(schedule: str) -> str:
    return f"{schedule}@ledger"


def tick_run_id(schedule: str, tick_ms: int) -> str:
    """The run a tick starts: ``<schedule>@<RFC 3339 tick>`` — one id per tick, so a tick fires once."""
    return f"{schedule}@{tick_text(tick_ms)}"


def parse_instant(text: str) -> int:
    """Epoch ms of an RFC 3339 text written by :func:`telo.kinds.cron.tick_text`."""
    return int(datetime.datetime.fromisoformat(text).timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class TickDecision:
    """What was done with a tick (or a range of skipped ticks ending at ``tick_ms``)."""

    tick_ms: int
    action: str  # fire | buffer | skip
    run: str | None = None
    reason: str | None = None
    count: int = 1  # ticks this decision stands for (a skipped range)
    from_ms: int | None = None
    decided_at: int | None = None
    late: bool = False  # decided after its on-time grace (a catch-up)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tick": tick_text(self.tick_ms), "action": self.action}
        for key, value in (("run", self.run), ("reason", self.reason)):
            if value is not None:
                out[key] = value
        if self.decided_at is not None:
            out["decidedAt"] = tick_text(self.decided_at)
        if self.count != 1 or self.from_ms is not None:
            out["count"] = self.count
            out["from"] = tick_text(self.from_ms) if self.from_ms is not None else None
        if self.late:
            out["late"] = True
        return out


@dataclass(frozen=True, slots=True)
class Operation:
    """An operator's action on a schedule, or a pause ``pauseOnFailure`` made."""

    op: str  # pause | resume | trigger | backfill
    at: int
    by: str
    reason: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "at": tick_text(self.at), "by": self.by}
        if self.reason is not None:
            out["reason"] = self.reason
        out.update(self.data)
        return out


@dataclass(frozen=True, slots=True)
class LedgerState:
    """The ledger folded: what the holder decides from and what ``telo schedules show`` prints."""

    exists: bool = False
    created_ms: int | None = None
    paused: bool = False
    pause: Operation | None = None  # the pause in effect
    cursor_ms: int | None = None  # every tick at or before this has a decision
    chain: tuple[TickDecision, ...] = ()  # the last fired tick and the buffered ones after it, in order
    failed_seen: frozenset[str] = frozenset()  # runs pauseOnFailure acted on
    recent: tuple[TickDecision, ...] = ()
    ops: tuple[Operation, ...] = ()
    entries: int = 0
    last_seq: int = 0

    @property
    def last_run(self) -> str | None:
        return self.chain[-1].run if self.chain else None

    def snapshot(self) -> dict[str, Any]:
        return {"created": self.created_ms, "pause": self.pause.to_json() if self.pause else None,
                "cursor": self.cursor_ms, "chain": [d.to_json() for d in self.chain],
                "failedSeen": sorted(self.failed_seen)}


def _instant(value: Any) -> int | None:
    """An instant as the ledger writes it (RFC 3339), or as older entries did (epoch ms)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return parse_instant(value) if isinstance(value, str) and value else None


def _decision(value: Any, tick_ms: int, at: int | None) -> TickDecision:
    src = value if isinstance(value, dict) else {}
    return TickDecision(tick_ms, str(src.get("action", "skip")), src.get("run"), src.get("reason"),
                        int(src.get("count", 1)), parse_instant(src["from"]) if src.get("from") else None,
                        at, bool(src.get("late", False)))


def _operation(value: Any, at: int | None) -> Operation:
    src = dict(value) if isinstance(value, dict) else {}
    when = _instant(src.pop("at", None))
    return Operation(str(src.pop("op", "?")), when if when is not None else (at or 0), str(src.pop("by", "?")),
                     src.pop("reason", None), src)


def fold(entries: list[Entry], run: str) -> LedgerState:
    """The state the ledger's entries (in write order) describe.

    A snapshot ``state/<n>`` stands for every entry of seq ``n`` or below — the ones its writer had read — so the
    fold starts from the latest snapshot and applies only the entries after ``n``. An operator's pause appended
    while the snapshot was being written has a seq above ``n`` (though it may precede the snapshot in write
    order), so it is applied on top rather than lost. Every decision and operation kept is listed for display."""
    snapshot = next((e for e in reversed(entries) if e.path.startswith("state/")), None)
    state = LedgerState(exists=True, entries=len(entries))
    covered = -1
    if snapshot is not None:
        value = snapshot.decode(run)
        if isinstance(value, dict):
            state, covered = _from_snapshot(state, value), int(snapshot.path[len("state/"):])
    recent: list[TickDecision] = []
    ops: list[Operation] = []
    for entry in entries:
        value = entry.decode(run)
        path = entry.path
        state = replace(state, last_seq=max(state.last_seq, entry.seq or 0))
        applies = (entry.seq or 0) > covered
        if path == "created" and isinstance(value, dict) and applies:
            state = replace(state, created_ms=int(value["at"]))
        elif path.startswith("ticks/"):
            decision = _decision(value, parse_instant(path[len("ticks/"):]), entry.at)
            recent.append(decision)
            if applies:
                state = _apply_tick(state, decision)
        elif path.startswith("ops/"):
            op = _operation(value, entry.at)
            ops.append(op)
            if applies:
                state = _apply_op(state, op, path)
    return replace(state, recent=tuple(recent[-_RECENT:]), ops=tuple(ops[-_RECENT:]))


def _from_snapshot(state: LedgerState, value: dict[str, Any]) -> LedgerState:
    pause = value.get("pause")
    return replace(state, created_ms=value.get("created"), paused=pause is not None,
                   pause=_operation(pause, None) if pause else None, cursor_ms=value.get("cursor"),
                   chain=tuple(_decision(d, parse_instant(d["tick"]), _instant(d.get("decidedAt")))
                               for d in value.get("chain", [])),
                   failed_seen=frozenset(value.get("failedSeen", [])))


def _apply_tick(state: LedgerState, decision: TickDecision) -> LedgerState:
    cursor = decision.tick_ms if state.cursor_ms is None else max(state.cursor_ms, decision.tick_ms)
    chain = state.chain
    if decision.action == "fire":
        chain = (decision,)
    elif decision.action == "buffer":
        chain = (*chain, decision)
    return replace(state, cursor_ms=cursor, chain=chain)


def _apply_op(state: LedgerState, op: Operation, path: str) -> LedgerState:
    if op.op == "pause":
        state = replace(state, paused=True, pause=op)
        if path.startswith("ops/failed/"):
            state = replace(state, failed_seen=state.failed_seen | {path[len("ops/failed/"):]})
    elif op.op == "resume":
        state = replace(state, paused=False, pause=None)
    return state


def read(store: Store, schedule: str) -> LedgerState:
    run = ledger_id(schedule)
    if store.read_run(run) is None:
        return LedgerState()
    return fold(store.read_entries(run), run)


def ensure(store: Store, schedule: str, now_ms: int, *, created: bool = True) -> None:
    """Create the ledger unless it exists: admitted, parked where nothing is written (never due), and — unless
    ``created`` is false (an operator's action on a schedule no worker ran yet: the schedule starts when a worker
    first beats it) — its ``created`` entry. Idempotent, and safe to race: each write is first-writer-wins."""
    run = ledger_id(schedule)
    record = store.read_run(run)
    if record is None:
        record = store.admit(Admission.of(run, status="scheduled", workflow=schedule)).record
    if record.status != "parked":
        store.park(run, Parked(LEDGER_PATH, schedule, reason=f"the ledger of schedule {schedule!r}: its ticks, "
                                                             f"pauses and backfills (telo schedules show {schedule})"))
    if created:
        store.append(run, Entry.decided("created", "created", {"at": now_ms}))


def decide(store: Store, schedule: str, decision: TickDecision, fence: Fence | None) -> TickDecision:
    """Record ``decision`` at its tick; the decision stored there (an earlier writer's, if any) is returned."""
    run = ledger_id(schedule)
    value = decision.to_json()
    value.pop("decidedAt", None)
    stored = store.append(run, Entry.decided(f"ticks/{tick_text(decision.tick_ms)}", decision.action, value),
                          fence=fence)
    return _decision(stored.decode(run), decision.tick_ms, stored.at)


def record_op(store: Store, schedule: str, op: Operation, *, path: str | None = None,
              fence: Fence | None = None) -> Operation:
    """Append an operator's action (at a unique path unless ``path`` is given); the stored one is returned."""
    run = ledger_id(schedule)
    where = path or f"ops/{op.at}/{uuid4_hex()[:12]}"
    stored = store.append(run, Entry.decided(where, op.op, op.to_json()), fence=fence)
    return _operation(stored.decode(run), stored.at)


def compact(store: Store, schedule: str, state: LedgerState, fence: Fence) -> bool:
    """When the ledger holds more than twice :data:`KEEP_ENTRIES`, snapshot its state and drop all but the last
    :data:`KEEP_ENTRIES` entries before the snapshot (event-log "snapshots and compaction"). True if it did."""
    if state.entries <= 2 * KEEP_ENTRIES:
        return False
    run = ledger_id(schedule)
    entries = store.read_entries(run)
    keep_from = entries[-KEEP_ENTRIES].seq or 0
    store.append(run, Entry.decided(f"state/{state.last_seq}", "snapshot", state.snapshot()), fence=fence)
    store.truncate_before(run, keep_from)
    return True
