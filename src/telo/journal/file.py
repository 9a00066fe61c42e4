"""The file journal: one NDJSON file per run, upstream-compatible, safe across processes (reference §7).

The line shapes and file names are in :mod:`telo.journal.file_format`. What this module adds to the
upstream file journal is real concurrency control, because reference §7 "Append" and §15.9 describe a
journal that is safe within one process only:

- every read-modify-write of a run file (append, claim, park, complete, …) holds an exclusive
  ``fcntl.flock`` on it and re-reads it under the lock; readers take a shared lock. So first-writer-wins
  holds between processes, and a claim excludes every other process on the machine. (flock is advisory:
  an upstream Node process writing the same directory at the same time is not excluded.)
- admission publishes a complete header atomically: the header is written to a temporary file, fsynced
  and hard-linked to the run's name (``link`` fails if the name exists: an exclusive create that never
  shows a half-written header). Filesystems without hard links fall back to ``O_CREAT|O_EXCL``.
- the torn-tail truncation of reference §7 happens under the exclusive lock before every write, where no
  other writer can be mid-line, so a partial line is always a crashed writer's.
- compaction (:meth:`FileStore.truncate_before`) rewrites the file into a temporary file and renames it
  over the old one; a process that locked the old file notices the swap (inode changed) and retries.

Each write is one ``write()`` then ``fsync`` (and the directory is fsynced after a file is created or
replaced), so a call's effect survives a crash once it returns. Parsed files are cached per run and read
incrementally (only the bytes appended since), so appending stays O(line) on long runs; the directory
scans behind :meth:`~FileStore.due_runs` and :meth:`~FileStore.list_runs` reuse a per-file summary while the
file's (inode, size, mtime) is unchanged. Claim renewals append one small line each (one per 20 s per
running run with the default renewal), which compaction drops.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Final

from telo.clock import SYSTEM_CLOCK, Clock
from telo.errors import JournalCorrupt, JournalError
from telo.journal import paging, rules
from telo.journal.file_format import (
    SUFFIX,
    FileState,
    claim_line,
    dump_line,
    entry_line,
    file_stem,
    run_line,
    run_of_stem,
)
from telo.journal.file_format import compacted as _compacted
from telo.journal.memory import unknown_run
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
from telo.journal.store import Store

_LOG = logging.getLogger("telo.journal.file")
_RECORD_FIELDS: Final = {f.name for f in fields(RunRecord)} - {"run"}
_CACHED_FILES: Final = 256  # parsed run files kept in memory (LRU)
_PREFIX_BYTES: Final = 128  # how much of a file's head identifies it (a compacted file's base id is in it)
_STRIPES: Final = 64
_STALE_TMP_SECONDS: Final = 3600

_StatKey = tuple[int, int, int, int]
_Summary = tuple[_StatKey, RunRecord | None, bool]  # (stat key, record, an entry exists at its park path)


@dataclass
class _Locked:
    """A run file open and locked, with what its complete lines say."""

    fd: int
    state: FileState
    stat: os.stat_result


def _stat_key(st: os.stat_result) -> _StatKey:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _pread(fd: int, size: int, offset: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, size, offset)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    # One write() for a line in practice; a short write (full disk, signal) is continued, and the caller
    # truncates back to the old size if it fails, so no half record is left for a reader to trip on.
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class FileStore(Store):
    """A directory of run files, each ``<encodeURIComponent(run)>.ndjson`` (reference §7 "File journal")."""

    kind = "file"

    def __init__(self, directory: str | os.PathLike[str], *, clock: Clock = SYSTEM_CLOCK, fsync: bool = True):
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)  # created recursively at init (reference §7)
        self._clock = clock
        self._fsync = fsync
        # In-process serialisation per run: threads of one process share the parse cache, and flock alone
        # does not stop two threads from feeding one cached state at once.
        self._stripes = [threading.RLock() for _ in range(_STRIPES)]
        self._cache_lock = threading.Lock()
        self._states: OrderedDict[str, FileState] = OrderedDict()
        self._summaries: dict[str, _Summary] = {}
        self._remove_stale_temporaries()

    def __repr__(self) -> str:
        return f"FileStore({self.directory!r})"

    # --- files, locks and the parse cache ------------------------------------------------------------

    def _path(self, run: str) -> str:
        return os.path.join(self.directory, file_stem(run) + SUFFIX)

    def _stripe(self, run: str) -> threading.RLock:
        return self._stripes[hash(run) % _STRIPES]

    @contextlib.contextmanager
    def _open(self, run: str, *, writer: bool) -> Iterator[_Locked | None]:
        """The run's file, locked (exclusive for a writer, shared for a reader) and parsed; None if absent."""
        path = self._path(run)
        flags = (os.O_RDWR | os.O_APPEND) if writer else os.O_RDONLY
        with self._stripe(run):
            while True:
                try:
                    fd = os.open(path, flags | os.O_CLOEXEC)
                except FileNotFoundError:
                    fd = -1
                if fd < 0:
                    yield None
                    return
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX if writer else fcntl.LOCK_SH)
                    st = os.fstat(fd)
                    try:
                        now_at_path = os.stat(path)
                    except FileNotFoundError:
                        continue  # removed while we waited (by hand): look again
                    if (now_at_path.st_dev, now_at_path.st_ino) != (st.st_dev, st.st_ino):
                        continue  # compacted while we waited: we hold the lock of a replaced file
                    state = self._load(run, fd, st, writer=writer)
                    yield _Locked(fd, state, os.fstat(fd) if writer else st)
                    return
                finally:
                    os.close(fd)  # also releases the flock

    def _load(self, run: str, fd: int, st: os.stat_result, *, writer: bool) -> FileState:
        with self._cache_lock:
            state = self._states.pop(run, None)
        if state is not None and (
            state.ident != (st.st_dev, st.st_ino)
            or state.offset > st.st_size
            or _pread(fd, len(state.prefix), 0) != state.prefix
        ):
            state = None  # a different file now sits at the path: parse it from the start
        if state is None:
            state = FileState(run, (st.st_dev, st.st_ino))
        if st.st_size > state.offset:
            state.feed(_pread(fd, st.st_size - state.offset, state.offset))  # JournalCorrupt: not cached
            if writer and state.offset < st.st_size:
                # A torn final line: a writer crashed mid-write (no live writer can be, we hold the lock).
                os.ftruncate(fd, state.offset)
        if len(state.prefix) < _PREFIX_BYTES and state.offset > len(state.prefix):
            state.prefix = _pread(fd, min(_PREFIX_BYTES, state.offset), 0)
        with self._cache_lock:
            self._states[run] = state
            while len(self._states) > _CACHED_FILES:
                self._states.popitem(last=False)
        return state

    def _forget(self, run: str) -> None:
        with self._cache_lock:
            self._states.pop(run, None)

    def _write(self, locked: _Locked, *lines: Mapping[str, Any]) -> None:
        """Append records in one write(), then fsync; on return they are durable and in ``locked.state``."""
        state = locked.state
        data = b"".join(dump_line(line) for line in lines)
        # Parse what we are about to write first: a record we could not read back must never reach the file.
        FileState(state.run, state.ident).feed(data)
        try:
            _write_all(locked.fd, data)
            if self._fsync:
                os.fsync(locked.fd)
        except BaseException:
            self._forget(state.run)
            with contextlib.suppress(OSError):
                os.ftruncate(locked.fd, state.offset)
            raise
        state.feed(data)

    def _fsync_directory(self) -> None:
        if not self._fsync:
            return
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _temporary(self, purpose: str) -> str:
        # Not *.ndjson, so scans never see it; short, so a long run id cannot push it past NAME_MAX.
        return os.path.join(self.directory, f".{purpose}-{uuid.uuid4().hex}.tmp")

    def _write_temporary(self, path: str, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            _write_all(fd, data)
            if self._fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _remove_stale_temporaries(self) -> None:
        """Best effort: temporaries left by a process killed mid-admission or mid-compaction."""
        cutoff = time.time() - _STALE_TMP_SECONDS
        with contextlib.suppress(OSError), os.scandir(self.directory) as it:
            for item in it:
                if item.name.startswith((".admit-", ".compact-")) and item.name.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        if item.stat().st_mtime < cutoff:
                            os.unlink(item.path)

    @staticmethod
    def _require(locked: _Locked | None, run: str) -> RunRecord:
        record = None if locked is None else locked.state.current
        if record is None:
            raise unknown_run(run)
        return record

    # --- runs ------------------------------------------------------------------------------------------

    def admit(self, admission: Admission) -> AdmitResult:
        """Reference §7 "Admission": an exclusive create with the header, else the existing record."""
        run = admission.run
        path = self._path(run)
        if not os.path.exists(path):
            now = self._clock.now_ms()
            record = RunRecord(
                run=run,
                status=admission.status,
                due_at=admission.due_at,
                inputs=admission.inputs,
                inputs_v=admission.inputs_v,
                workflow=admission.workflow,
                manifest_digest=admission.manifest_digest,
                digest_scope=admission.digest_scope,
                created_at=now,
                updated_at=now,
            )
            header = dump_line(run_line(record))
            FileState(run, (0, 0)).feed(header)  # refuse what we could not read back before creating
            if self._create(path, header):
                with self._open(run, writer=False) as locked:
                    return AdmitResult(True, self._require(locked, run))
        # The file exists. It holds the run, unless its creator died before writing a header (an upstream
        # writer creates, then writes) or we fell back to O_EXCL: then whoever writes the header first wins.
        with self._open(run, writer=True) as locked:
            if locked is None:
                raise JournalError(
                    "ERR_DURABLE_JOURNAL_CORRUPT",
                    f"the journal file of run {run!r} vanished during admission",
                    hint="something removed files from the journal directory while telo was running",
                    data={"run": run},
                )
            current = locked.state.current
            if current is not None:
                return AdmitResult(False, current)
            now = self._clock.now_ms()
            self._write(locked, run_line(RunRecord(
                run=run, status=admission.status, due_at=admission.due_at, inputs=admission.inputs,
                inputs_v=admission.inputs_v, workflow=admission.workflow,
                manifest_digest=admission.manifest_digest, digest_scope=admission.digest_scope,
                created_at=now, updated_at=now,
            )))
            return AdmitResult(True, self._require(locked, run))

    def _create(self, path: str, header: bytes) -> bool:
        """Publish a new run file holding ``header``; False if the file already exists."""
        tmp = self._temporary("admit")
        try:
            self._write_temporary(tmp, header)
            try:
                os.link(tmp, path)  # atomic and exclusive: EEXIST if the run exists
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                    raise
                # No hard links here: create the name empty; admit() then writes the header under the lock.
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))
                except FileExistsError:
                    return False
                self._fsync_directory()
                return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self._fsync_directory()
        return True

    def read_run(self, run: str) -> RunRecord | None:
        with self._open(run, writer=False) as locked:
            return None if locked is None else locked.state.current

    def complete(self, run: str, outcome: Outcome) -> RunRecord:
        """Settle: the whole settled record (rules.settled) as a run line, and the claim released."""
        with self._open(run, writer=True) as locked:
            record = self._require(locked, run)
            assert locked is not None
            settled = rules.settled(record, outcome, self._clock.now_ms())
            self._write(locked, *self._lifecycle_lines(locked, settled))
            return self._require(locked, run)

    def park(self, run: str, parked: Parked) -> RunRecord:
        """``dueAt`` is ``parked.at`` or absent: a stale due time is never carried over (reference §15.8)."""
        with self._open(run, writer=True) as locked:
            record = self._require(locked, run)
            assert locked is not None
            new = rules.parked_record(record, parked, self._clock.now_ms())
            self._write(locked, *self._lifecycle_lines(locked, new))
            return self._require(locked, run)

    def unpark(self, run: str) -> bool:
        with self._open(run, writer=True) as locked:
            record = None if locked is None else locked.state.current
            if locked is None or record is None or record.status != "parked":
                return False
            self._write(locked, run_line(rules.unparked_record(record, self._clock.now_ms())))
            return True

    def update_run(self, run: str, **changes: Any) -> RunRecord:
        bad = set(changes) - _RECORD_FIELDS
        if bad:
            raise TypeError(f"not run record fields: {sorted(bad)}")
        with self._open(run, writer=True) as locked:
            record = self._require(locked, run)
            assert locked is not None
            new = replace(record, **changes, updated_at=self._clock.now_ms())
            self._write(locked, *self._lifecycle_lines(locked, new))
            return self._require(locked, run)

    @staticmethod
    def _lifecycle_lines(locked: _Locked, new: RunRecord) -> list[dict[str, Any]]:
        """A run line for ``new``, plus a claim line when its claim differs from the file's."""
        lines = [run_line(new)]
        if new.claim != locked.state.claim:
            lines.append(claim_line(new.claim))
        return lines

    # --- scans -----------------------------------------------------------------------------------------

    def _scan(self) -> list[tuple[RunRecord, bool]]:
        """Every run's record (with claim) and whether an entry exists at its park path; oldest first."""
        found: list[tuple[RunRecord, bool]] = []
        seen: set[str] = set()
        for name in os.listdir(self.directory):
            if not name.endswith(SUFFIX):
                continue
            run = run_of_stem(name[: -len(SUFFIX)])
            if run is None:
                continue  # not a name any writer gives a run file
            seen.add(run)
            summary = self._summary(run, os.path.join(self.directory, name))
            if summary is not None and summary[1] is not None:
                found.append((summary[1], summary[2]))
        with self._cache_lock:
            for gone in set(self._summaries) - seen:
                del self._summaries[gone]
        found.sort(key=lambda item: paging.sort_key(item[0]))
        return found

    def _summary(self, run: str, path: str) -> _Summary | None:
        try:
            key = _stat_key(os.stat(path))
        except FileNotFoundError:
            return None
        with self._cache_lock:
            cached = self._summaries.get(run)
        if cached is not None and cached[0] == key:
            return cached
        try:
            with self._open(run, writer=False) as locked:
                if locked is None:
                    return None
                record = locked.state.current
                at_park = bool(record and record.parked and record.parked.path in locked.state.entries)
                summary: _Summary = (_stat_key(locked.stat), record, at_park)
        except JournalCorrupt as exc:
            # One damaged file must not stop the sweep for every other run; it is reported once per change.
            _LOG.warning("file journal: skipping run %r: %s", run, exc)
            summary = (key, None, False)
        with self._cache_lock:
            self._summaries[run] = summary
        return summary

    def run_parked_on(self, token: str) -> RunRecord | None:
        for record, _ in self._scan():
            if record.status == "parked" and record.parked is not None and record.parked.token == token:
                return record
        return None

    def due_runs(self, now_ms: int, limit: int) -> list[str]:
        due = [record for record, at_park in self._scan() if rules.is_due(record, now_ms, at_park)]
        due.sort(key=rules.due_order)
        return [r.run for r in due[:limit]]

    def list_runs(self, flt: RunFilter) -> RunPage:
        selected = [record for record, _ in self._scan() if paging.matches(record, flt)]
        selected.sort(key=paging.sort_key, reverse=True)
        page = selected[: flt.limit]
        more = len(selected) > flt.limit
        return RunPage(page, paging.encode_cursor(page[-1]) if more and page else None)

    # --- claims ----------------------------------------------------------------------------------------

    def claim(self, run: str, holder: str, ttl_ms: int, now_ms: int) -> bool:
        """Decided and recorded under the file's exclusive lock, so it excludes other processes too."""
        with self._open(run, writer=True) as locked:
            record = None if locked is None else locked.state.current
            if locked is None or record is None or not rules.may_claim(record, holder, now_ms):
                return False
            self._write(locked, claim_line(Claim(holder, now_ms + ttl_ms)))
            return True

    def release(self, run: str, holder: str) -> None:
        with self._open(run, writer=True) as locked:
            if locked is not None and locked.state.claim is not None and locked.state.claim.holder == holder:
                self._write(locked, claim_line(None))

    # --- entries ---------------------------------------------------------------------------------------

    def append(self, run: str, entry: Entry) -> Entry:
        """First writer wins across processes: the check and the append happen under one exclusive lock."""
        with self._open(run, writer=True) as locked:
            self._require(locked, run)
            assert locked is not None
            stored = locked.state.entries.get(entry.path)
            if stored is None:
                self._write(locked, entry_line(entry))
                stored = locked.state.entries[entry.path]
            return stored

    def read_entries(self, run: str) -> list[Entry]:
        with self._open(run, writer=False) as locked:
            return [] if locked is None else list(locked.state.entries.values())

    def truncate_before(self, run: str, seq: int) -> int:
        """Compaction: rewrite the file without the entries below ``seq``, keeping every later ``seq``.

        The new file (a ``base`` line, the current run line, a live claim line, the kept entry lines) is
        written beside the old one, fsynced and renamed over it, all under the old file's exclusive lock.
        """
        with self._open(run, writer=True) as locked:
            if locked is None or locked.state.record is None:
                return 0
            plan = _compacted(run, _pread(locked.fd, locked.state.offset, 0), seq, uuid.uuid4().hex)
            if plan is None:
                return 0
            data, removed = plan
            tmp = self._temporary("compact")
            try:
                self._write_temporary(tmp, data)
                os.replace(tmp, self._path(run))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            self._forget(run)
            self._fsync_directory()
            return removed

    def close(self) -> None:
        with self._cache_lock:
            self._states.clear()
            self._summaries.clear()
