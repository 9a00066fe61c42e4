"""The file journal: one upstream-compatible NDJSON file per run, safe across processes (reference §7).

- :mod:`telo.journal.file_format` — file names and line shapes (upstream's, plus telo's ``claim`` and
  ``base`` lines);
- :mod:`telo.journal.file_io` — flock-guarded access, durable writes, atomic create/replace, scans;
- this module — the store protocol on top, with the lifecycle rules of :mod:`telo.journal.rules`, so it
  answers exactly as the reference :class:`~telo.journal.memory.MemoryStore` does.

Every run line holds the WHOLE current record, so the quirks of reference §15.7-§15.8 are not copied: a
completion keeps the record's inputs and telo's bookkeeping, and a park without ``at`` has no ``dueAt``.
Claims are claim lines (reference §15.9 not copied: two processes cannot both hold a run). A renewal
appends one small line (one per 20 s per executing run with the default renewal); compaction drops them.
"""

from __future__ import annotations

import os
from dataclasses import fields, replace
from typing import Any, Final

from telo.clock import SYSTEM_CLOCK, Clock, uuid4_hex
from telo.errors import ERR_DURABLE_JOURNAL_CORRUPT, JournalError
from telo.journal import cancels, paging, rules
from telo.journal.claims import Fence
from telo.journal.file_format import FileState, claim_line, compacted, dump_line, entry_line, run_line
from telo.journal.file_io import Locked, RunFiles, pread_all
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
from telo.journal.rules import unknown_run
from telo.journal.store import Store

_RECORD_FIELDS: Final = {f.name for f in fields(RunRecord)} - {"run", "claim", "fence"}


def _require(locked: Locked | None, run: str) -> tuple[Locked, RunRecord]:
    record = None if locked is None else locked.state.current
    if locked is None or record is None:
        raise unknown_run(run)
    return locked, record


class FileStore(Store):
    """A directory of run files, each ``<encodeURIComponent(run)>.ndjson`` (reference §7 "File journal")."""

    kind = "file"

    def __init__(self, directory: str | os.PathLike[str], *, clock: Clock = SYSTEM_CLOCK, fsync: bool = True):
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)  # created recursively at init (reference §7)
        self._clock = clock
        self._files = RunFiles(self.directory, fsync=fsync)

    def __repr__(self) -> str:
        return f"FileStore({self.directory!r})"

    # --- runs ------------------------------------------------------------------------------------------

    def _admitted(self, admission: Admission) -> RunRecord:
        return admission.record(self._clock.now_ms())

    def admit(self, admission: Admission) -> AdmitResult:
        """Reference §7 "Admission": an exclusive create with the header, else the existing record."""
        run = admission.run
        if not self._files.exists(run):
            header = dump_line(run_line(self._admitted(admission)))
            FileState(run, (0, 0)).feed(header)  # refuse what we could not read back before creating
            if self._files.create(run, header):
                with self._files.open(run, writer=False) as locked:
                    return AdmitResult(True, _require(locked, run)[1])
        # The file exists. It holds the run, unless its creator died before writing a header (an upstream
        # writer creates, then writes) or hard links were unavailable: then the first header written wins.
        with self._files.open(run, writer=True) as locked:
            if locked is None:
                raise JournalError(
                    ERR_DURABLE_JOURNAL_CORRUPT,
                    f"the journal file of run {run!r} vanished during admission",
                    hint="something removed files from the journal directory while telo was running",
                    data={"run": run},
                )
            current = locked.state.current
            if current is not None:
                return AdmitResult(False, current)
            self._files.write(locked, run_line(self._admitted(admission)))
            return AdmitResult(True, _require(locked, run)[1])

    def read_run(self, run: str) -> RunRecord | None:
        with self._files.open(run, writer=False) as locked:
            return None if locked is None else locked.state.current

    def _change(self, run: str, new: RunRecord, locked: Locked) -> RunRecord:
        """Write ``new`` as a run line, plus a claim line when its claim differs from the file's."""
        lines = [run_line(new)]
        if new.claim != locked.state.claim:
            lines.append(claim_line(new.claim, locked.state.fence))
        self._files.write(locked, *lines)
        return _require(locked, run)[1]

    def complete(self, run: str, outcome: Outcome, *, fence: Fence | None = None) -> RunRecord:
        """The whole settled record (rules.settled) as a run line, and the claim released."""
        with self._files.open(run, writer=True) as maybe:
            locked, record = _require(maybe, run)
            rules.check_fence(record, fence, "the completion")
            settled = self._change(run, rules.settled(record, outcome, self._clock.now_ms()), locked)
        if outcome.status == "cancelled":
            cancels.notice()
        return settled

    def park(self, run: str, parked: Parked, *, fence: Fence | None = None) -> RunRecord:
        """``dueAt`` is ``parked.at`` or absent: a stale due time is never carried over (reference §15.8)."""
        with self._files.open(run, writer=True) as maybe:
            locked, record = _require(maybe, run)
            rules.check_fence(record, fence, "the park")
            new = rules.parked_record(record, parked, self._clock.now_ms(), keep_claim=fence is not None)
            return self._change(run, new, locked)

    def unpark(self, run: str) -> bool:
        with self._files.open(run, writer=True) as locked:
            record = None if locked is None else locked.state.current
            if locked is None or record is None or record.status != "parked":
                return False
            self._change(run, rules.unparked_record(record, self._clock.now_ms()), locked)
            return True

    def update_run(self, run: str, *, fence: Fence | None = None, **changes: Any) -> RunRecord:
        bad = set(changes) - _RECORD_FIELDS
        if bad:
            raise TypeError(f"not run record fields: {sorted(bad)}")
        with self._files.open(run, writer=True) as maybe:
            locked, record = _require(maybe, run)
            rules.check_fence(record, fence, "a record update")
            return self._change(run, replace(record, **changes, updated_at=self._clock.now_ms()), locked)

    def run_parked_on(self, token: str) -> RunRecord | None:
        return rules.parked_on((record for record, _ in self._files.scan()), token)

    def deliver(self, token: str, value: str | None, v: int | None) -> str | None:
        """Found by a scan, then decided again under the run file's exclusive lock: the park, its token and
        an empty park path are re-checked there, so of racing deliveries (any processes) exactly one writes."""
        found = self.run_parked_on(token)
        if found is None:
            return None
        with self._files.open(found.run, writer=True) as locked:
            record = None if locked is None else locked.state.current
            if locked is None or record is None or record.status != "parked" or record.parked is None \
                    or record.parked.token != token or record.parked.path in locked.state.entries:
                return None
            path = record.parked.path
            now = self._clock.now_ms()
            self._files.write(locked, entry_line(Entry(path, "step", value, v, None, None, None, now)),
                              run_line(rules.unparked_record(record, now)))
            return record.run

    def due_runs(self, now_ms: int, limit: int) -> list[str]:
        due = [record for record, at_park in self._files.scan() if rules.is_due(record, now_ms, at_park)]
        due.sort(key=rules.due_order)
        return [r.run for r in due[:limit]]

    def list_runs(self, flt: RunFilter) -> RunPage:
        selected = [record for record, _ in self._files.scan() if paging.matches(record, flt)]
        selected.sort(key=paging.sort_key, reverse=True)
        page = selected[: flt.limit]
        more = len(selected) > flt.limit
        return RunPage(page, paging.encode_cursor(page[-1]) if more and page else None)

    # --- claims ----------------------------------------------------------------------------------------

    def claim(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> int | None:
        """Decided and recorded under the file's exclusive lock, so it excludes other processes too."""
        with self._files.open(run, writer=True) as locked:
            record = None if locked is None else locked.state.current
            if locked is None or record is None or not rules.may_claim(record, holder, now_ms):
                return None
            token = locked.state.fence + 1
            self._files.write(locked, claim_line(Claim(holder, now_ms + ttl_ms), token))
            return token

    def renew(self, run: str, fence: Fence, ttl_ms: int, now_ms: int) -> bool:
        with self._files.open(run, writer=True) as locked:
            record = None if locked is None else locked.state.current
            if locked is None or record is None or not rules.holds(record, fence):
                return False
            self._files.write(locked, claim_line(Claim(fence.holder, now_ms + ttl_ms), fence.token))
            return True

    def release(self, run: str, holder: str, token: int | None = None) -> None:
        with self._files.open(run, writer=True) as locked:
            if locked is not None and locked.state.claim is not None and locked.state.claim.holder == holder \
                    and (token is None or locked.state.fence == token):
                self._files.write(locked, claim_line(None, locked.state.fence))

    # --- entries ---------------------------------------------------------------------------------------

    def append(self, run: str, entry: Entry, *, fence: Fence | None = None) -> Entry:
        """First writer wins across processes: the check and the append happen under one exclusive lock —
        with the fence's check, re-reading the claim line under that lock."""
        with self._files.open(run, writer=True) as maybe:
            locked, record = _require(maybe, run)
            rules.check_fence(record, fence, f"the entry at {entry.path!r}")
            stored = locked.state.entries.get(entry.path)
            if stored is None:
                if entry.at is None:  # stamped with this store's clock, unless it carries its time (a fork's copy)
                    entry = replace(entry, at=self._clock.now_ms())
                self._files.write(locked, entry_line(entry))
                stored = locked.state.entries[entry.path]
            return stored

    def read_entries(self, run: str) -> list[Entry]:
        with self._files.open(run, writer=False) as locked:
            return [] if locked is None else list(locked.state.entries.values())

    def truncate_before(self, run: str, seq: int) -> int:
        """Compaction: rewrite the file without the entries below ``seq``, keeping every later ``seq``.

        The new file (a ``base`` line, the current run line, a live claim line, the kept entry lines) is
        written beside the old one, fsynced and renamed over it, all under the old file's exclusive lock.
        """
        with self._files.open(run, writer=True) as locked:
            if locked is None or locked.state.record is None:
                return 0
            plan = compacted(run, pread_all(locked.fd, locked.state.offset, 0), seq, uuid4_hex())
            if plan is None:
                return 0
            self._files.replace(locked, plan[0])
            return plan[1]

    def close(self) -> None:
        self._files.clear()
