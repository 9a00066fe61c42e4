"""The in-memory store: the reference semantics of the store protocol, used by unit tests.

Nothing survives the process; everything else — first writer wins, claims, due runs, paging — behaves as
the durable stores must (the conformance suite runs the same tests against all of them).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from telo.clock import SYSTEM_CLOCK, Clock
from telo.journal import cancels, keyed, paging, rules
from telo.journal.claims import Fence
from telo.journal.model import (
    Admission,
    AdmitResult,
    Claim,
    Entry,
    Outcome,
    Parked,
    RunFilter,
    RunPage,
    RunRecord,
)
from telo.journal.queue_overrides import QueueOverride
from telo.journal.queues import QueueLimits
from telo.journal.store import Store

_RECORD_FIELDS = {f.name for f in fields(RunRecord)} - {"run", "claim", "fence"}


class MemoryStore(Store):
    kind = "memory"
    inline_calls = True  # no I/O, and its lock is held only for dict work

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._runs: dict[str, RunRecord] = {}
        self._entries: dict[str, dict[str, Entry]] = {}
        self._seq: dict[str, int] = {}
        self._overrides: dict[str, QueueOverride] = {}  # telo queues set (issue 16)

    def admit(self, admission: Admission) -> AdmitResult:
        with self._lock:
            if admission.keyed:  # its key decides under the lock (issue 16 step 4, telo.journal.keyed)
                result = keyed.admit_among(self._runs, admission, self._clock.now_ms())
                if result.admitted:
                    self._entries[admission.run] = {}
                    self._seq.setdefault(admission.run, 0)
                return keyed.noticed(result)
            existing = self._runs.get(admission.run)
            if existing is not None:
                return AdmitResult(False, existing)
            record = admission.record(self._clock.now_ms())
            self._runs[admission.run] = record
            self._entries[admission.run] = {}
            self._seq.setdefault(admission.run, 0)
            return AdmitResult(True, record)

    def read_run(self, run: str) -> RunRecord | None:
        with self._lock:
            return self._runs.get(run)

    def _require(self, run: str) -> RunRecord:
        record = self._runs.get(run)
        if record is None:
            raise rules.unknown_run(run)
        return record

    def complete(self, run: str, outcome: Outcome, *, fence: Fence | None = None) -> RunRecord:
        with self._lock:
            current = self._require(run)
            rules.check_fence(current, fence, "the completion")
            record = rules.settled(current, outcome, self._clock.now_ms())
            self._runs[run] = record
        if outcome.status == "cancelled":
            cancels.notice()
        return record

    def park(self, run: str, parked: Parked, *, fence: Fence | None = None) -> RunRecord:
        with self._lock:
            current = self._require(run)
            rules.check_fence(current, fence, "the park")
            record = rules.parked_record(current, parked, self._clock.now_ms(), keep_claim=fence is not None)
            self._runs[run] = record
            return record

    def unpark(self, run: str) -> bool:
        with self._lock:
            record = self._runs.get(run)
            if record is None or record.status != "parked":
                return False
            self._runs[run] = rules.unparked_record(record, self._clock.now_ms())
            return True

    def update_run(self, run: str, *, fence: Fence | None = None, **changes: Any) -> RunRecord:
        bad = set(changes) - _RECORD_FIELDS
        if bad:
            raise TypeError(f"not run record fields: {sorted(bad)}")
        with self._lock:
            current = self._require(run)
            rules.check_fence(current, fence, "a record update")
            record = replace(current, **changes, updated_at=self._clock.now_ms())
            self._runs[run] = record
            return record

    def run_parked_on(self, token: str) -> RunRecord | None:
        with self._lock:
            return rules.parked_on(self._runs.values(), token)

    def due_runs(self, now_ms: int, limit: int) -> list[str]:
        with self._lock:
            due = [
                r
                for r in self._runs.values()
                if rules.is_due(r, now_ms, bool(r.parked and r.parked.path in self._entries[r.run]))
            ]
        due.sort(key=rules.due_order)
        return [r.run for r in due[:limit]]

    def claim_due(self, holder: str, ttl_ms: int, now_ms: int, limit: int, *, only: Sequence[str] | None = None,
                  workflows: Sequence[str] | None = None, skip: Collection[str] = (),
                  queues: Mapping[str, QueueLimits] | None = None) -> list[RunRecord]:
        # The generic form under the store's lock: a queue's slots are counted and granted atomically (issue 16).
        with self._lock:
            return super().claim_due(holder, ttl_ms, now_ms, limit, only=only, workflows=workflows, skip=skip,
                                     queues=queues)

    def runs_of_queue(self, queue: str) -> list[RunRecord]:
        with self._lock:
            return [r for r in self._runs.values() if r.queue == queue and r.status in ("running", "parked")]

    def _starts_since(self, queue: str, since_ms: int) -> int:
        with self._lock:
            return sum(1 for r in self._runs.values()
                       if r.queue == queue and r.started_at is not None and r.started_at > since_ms)

    def queue_overrides(self) -> dict[str, QueueOverride]:
        with self._lock:
            return dict(self._overrides)

    def set_queue_override(self, override: QueueOverride) -> QueueOverride:
        with self._lock:
            stored = self._overrides.get(override.queue)
            row = self._overrides[override.queue] = override if stored is None else stored.merged(override)
            return row

    def clear_queue_override(self, queue: str) -> QueueOverride | None:
        with self._lock:
            return self._overrides.pop(queue, None)

    def list_runs(self, flt: RunFilter) -> RunPage:
        with self._lock:
            selected = [r for r in self._runs.values() if paging.matches(r, flt)]
        selected.sort(key=paging.sort_key, reverse=True)
        page = selected[: flt.limit]
        more = len(selected) > flt.limit
        return RunPage(page, paging.encode_cursor(page[-1]) if more and page else None)

    def claim(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> int | None:
        with self._lock:
            record = self._runs.get(run)
            if record is None or not rules.may_claim(record, holder, now_ms):
                return None
            record = self._runs[run] = rules.granted(record, holder, now_ms + ttl_ms)
            return record.fence

    def renew(self, run: str, fence: Fence, ttl_ms: int, now_ms: int) -> bool:
        with self._lock:
            record = self._runs.get(run)
            if record is None or not rules.holds(record, fence):
                return False
            self._runs[run] = replace(record, claim=Claim(fence.holder, now_ms + ttl_ms))
            return True

    def release(self, run: str, holder: str, token: int | None = None) -> None:
        with self._lock:
            record = self._runs.get(run)
            if record is not None and record.claim is not None and record.claim.holder == holder \
                    and (token is None or record.fence == token):
                self._runs[run] = replace(record, claim=None)

    def append(self, run: str, entry: Entry, *, fence: Fence | None = None) -> Entry:
        with self._lock:
            rules.check_fence(self._require(run), fence, f"the entry at {entry.path!r}")
            entries = self._entries[run]
            stored = entries.get(entry.path)
            if stored is not None:
                return stored
            self._seq[run] += 1
            e = entry  # stamped with this store's clock unless it carries its time (a fork's copy)
            stored = Entry(e.path, e.kind, e.value, e.v, e.decision, e.target, self._seq[run],
                           e.at if e.at is not None else self._clock.now_ms())
            entries[entry.path] = stored
            return stored

    def deliver(self, token: str, value: str | None, v: int | None) -> str | None:
        with self._lock:
            record = rules.parked_on(self._runs.values(), token)
            if record is None or record.parked is None or record.parked.path in self._entries[record.run]:
                return None
            self._seq[record.run] += 1
            path = record.parked.path
            now = self._clock.now_ms()
            self._entries[record.run][path] = Entry(path, "step", value, v, None, None, self._seq[record.run], now)
            self._runs[record.run] = rules.unparked_record(record, now)
            return record.run

    def read_entries(self, run: str) -> list[Entry]:
        with self._lock:
            return sorted(self._entries.get(run, {}).values(), key=lambda e: e.seq or 0)

    def truncate_before(self, run: str, seq: int) -> int:
        with self._lock:
            entries = self._entries.get(run, {})
            doomed = [p for p, e in entries.items() if (e.seq or 0) < seq]
            for p in doomed:
                del entries[p]
            return len(doomed)
