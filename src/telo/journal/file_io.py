"""The file journal's run files on disk: locking, durable writes, the parse cache, scans (reference §7).

Reference §7 "Append" and §15.9 describe a file journal that is safe within one process only. Here:

- every read-modify-write of a run file holds an exclusive ``fcntl.flock`` on it and re-reads it under
  the lock; readers take a shared lock. So first-writer-wins and claims hold between processes on one
  machine. (flock is advisory: an upstream Node process writing the directory at the same time is not
  excluded.)
- a new file is published complete: its header is written to a temporary file, fsynced and hard-linked
  to the run's name (``link`` fails if the name exists: an exclusive create that never shows a
  half-written header). Filesystems without hard links fall back to ``O_CREAT|O_EXCL``.
- the torn-tail truncation of reference §7 happens under the exclusive lock before every write, where no
  other writer can be mid-line, so a partial line is always a crashed writer's.
- a compacted file is written beside the old one and renamed over it; a process that locked the old file
  notices the swap (the inode at the path changed) and locks the new one.

Each write is one ``write()`` then ``fsync`` (and the directory is fsynced after a file is created or
replaced). Parsed files are cached per run and read incrementally (only the bytes appended since), so an
append stays O(line) on long runs; scans reuse a per-file summary while the file's (inode, size, mtime)
is unchanged.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from telo.clock import SYSTEM_CLOCK, uuid4_hex
from telo.errors import Code, JournalCorrupt, JournalError
from telo.journal import paging
from telo.journal.file_format import SUFFIX, FileState, dump_line, file_stem, run_of_stem
from telo.journal.model import RunRecord

_LOG = logging.getLogger("telo.journal.file")
_CACHED_FILES: Final = 256  # parsed run files kept in memory (LRU)
_PREFIX_BYTES: Final = 128  # how much of a file's head identifies it (a compacted file's base id is in it)
_STRIPES: Final = 64
_STALE_TMP_SECONDS: Final = 3600
_SCAN_WAIT_S: Final = 1.0  # how long a scan waits for a run file another process holds locked

_StatKey = tuple[int, int, int, int]
_Summary = tuple[_StatKey, RunRecord | None, bool]  # (stat key, record, an entry exists at its park path)


class Busy(Exception):
    """Another process holds the run file's lock (a scan does not wait for it: see RunFiles._summary)."""


@dataclass
class Locked:
    """A run file open and locked, with what its complete lines say."""

    fd: int
    state: FileState
    stat: os.stat_result


def write_failed(action: str, run: str | None, exc: OSError) -> JournalError:
    """An OSError of a journal write (a full disk, a read-only or failing filesystem) as the journal error that
    says so: nothing of the write stays, and an execution that meets it halts, leaving its run running."""
    where = f" of run {run!r}" if run is not None else ""
    return JournalError(
        Code.JOURNAL_WRITE_FAILED,
        f"the file journal could not {action}{where}: {exc.strerror or exc} (errno {exc.errno})",
        hint="free disk space or fix the filesystem; the run is left as it was and continues once writes "
        "succeed again (a worker, or running it again)",
        data={"run": run, "errno": exc.errno} if run is not None else {"errno": exc.errno},
    )


def _stat_key(st: os.stat_result) -> _StatKey:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def pread_all(fd: int, size: int, offset: int) -> bytes:
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


class RunFiles:
    """The run files of one journal directory."""

    def __init__(self, directory: str, *, fsync: bool) -> None:
        self.directory = directory
        self._fsync = fsync
        # In-process serialisation per run: threads of one process share the parse cache, and flock alone
        # would not stop two threads from feeding one cached state at once.
        self._stripes = [threading.RLock() for _ in range(_STRIPES)]
        self._cache_lock = threading.Lock()
        self._states: OrderedDict[str, FileState] = OrderedDict()
        self._summaries: dict[str, _Summary] = {}
        self._remove_stale_temporaries()

    def path(self, run: str) -> str:
        return os.path.join(self.directory, file_stem(run) + SUFFIX)

    def exists(self, run: str) -> bool:
        return os.path.exists(self.path(run))

    # --- locked access -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def open(self, run: str, *, writer: bool, wait: bool = True) -> Iterator[Locked | None]:
        """The run's file, locked (exclusive for a writer, shared for a reader) and parsed; None if absent.

        ``wait=False``: raise :class:`Busy` at once instead of waiting for another process's lock (scans)."""
        path = self.path(run)
        flags = (os.O_RDWR | os.O_APPEND) if writer else os.O_RDONLY
        with self._stripes[hash(run) % _STRIPES]:
            while True:
                try:
                    fd = os.open(path, flags | os.O_CLOEXEC)
                except FileNotFoundError:
                    fd = -1
                if fd < 0:
                    yield None
                    return
                try:
                    mode = fcntl.LOCK_EX if writer else fcntl.LOCK_SH
                    try:
                        fcntl.flock(fd, mode if wait else mode | fcntl.LOCK_NB)
                    except BlockingIOError:
                        raise Busy(run) from None
                    st = os.fstat(fd)
                    try:
                        now_at_path = os.stat(path)
                    except FileNotFoundError:
                        continue  # removed while we waited (by hand): look again
                    if (now_at_path.st_dev, now_at_path.st_ino) != (st.st_dev, st.st_ino):
                        continue  # compacted while we waited: we hold the lock of a replaced file
                    state = self._load(run, fd, st, writer=writer)
                    yield Locked(fd, state, os.fstat(fd) if writer else st)
                    return
                finally:
                    os.close(fd)  # also releases the flock

    def _load(self, run: str, fd: int, st: os.stat_result, *, writer: bool) -> FileState:
        with self._cache_lock:
            state = self._states.pop(run, None)
        if state is not None and (
            state.ident != (st.st_dev, st.st_ino)
            or state.offset > st.st_size
            or pread_all(fd, len(state.prefix), 0) != state.prefix
        ):
            state = None  # a different file now sits at the path: parse it from the start
        if state is None:
            state = FileState(run, (st.st_dev, st.st_ino))
        if st.st_size > state.offset:
            try:
                state.feed(pread_all(fd, st.st_size - state.offset, state.offset))  # JournalCorrupt: not cached
            except JournalCorrupt as exc:
                exc.partial = state.current  # type: ignore[attr-defined]  # what the lines before it say
                raise
            if writer and state.offset < st.st_size:
                # A torn final line: a writer crashed mid-write (no live writer can be, we hold the lock).
                os.ftruncate(fd, state.offset)
        if len(state.prefix) < _PREFIX_BYTES and state.offset > len(state.prefix):
            state.prefix = pread_all(fd, min(_PREFIX_BYTES, state.offset), 0)
        with self._cache_lock:
            self._states[run] = state
            while len(self._states) > _CACHED_FILES:
                self._states.popitem(last=False)
        return state

    def _forget(self, run: str) -> None:
        with self._cache_lock:
            self._states.pop(run, None)

    def write(self, locked: Locked, *lines: Mapping[str, Any]) -> None:
        """Append records in one write(), then fsync; on return they are durable and in ``locked.state``."""
        state = locked.state
        data = b"".join(dump_line(line) for line in lines)
        # Parse what we are about to write first: a record we could not read back must never reach the file.
        FileState(state.run, state.ident).feed(data)
        try:
            _write_all(locked.fd, data)
            if self._fsync:
                os.fsync(locked.fd)
        except BaseException as exc:
            self._forget(state.run)
            with contextlib.suppress(OSError):
                os.ftruncate(locked.fd, state.offset)
            if isinstance(exc, OSError):
                raise write_failed("append to its file", state.run, exc) from exc
            raise
        state.feed(data)

    # --- creating and replacing files ----------------------------------------------------------------

    def create(self, run: str, header: bytes) -> bool:
        """Publish a new run file holding ``header``; False if a file is already there.

        Also False when the filesystem has no hard links: then an empty file is created exclusively and
        the caller writes the header under the lock (whoever writes a header first owns the run).
        """
        path = self.path(run)
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
                with contextlib.suppress(FileExistsError):
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))
                    self._fsync_directory()
                return False
            self._fsync_directory()
        except OSError as exc:
            raise write_failed("create the file", run, exc) from exc
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return True

    def replace(self, locked: Locked, data: bytes) -> None:
        """Swap the locked file for one holding ``data`` (compaction), atomically and durably."""
        tmp = self._temporary("compact")
        try:
            self._write_temporary(tmp, data)
            os.replace(tmp, self.path(locked.state.run))
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise write_failed("compact the file", locked.state.run, exc) from exc
            raise
        self._forget(locked.state.run)
        self._fsync_directory()

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
        return os.path.join(self.directory, f".{purpose}-{uuid4_hex()}.tmp")

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
        cutoff = SYSTEM_CLOCK.now_ns() / 1e9 - _STALE_TMP_SECONDS  # (file times are real)
        with contextlib.suppress(OSError), os.scandir(self.directory) as it:
            for item in it:
                if item.name.startswith((".admit-", ".compact-")) and item.name.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        if item.stat().st_mtime < cutoff:
                            os.unlink(item.path)

    # --- scans ---------------------------------------------------------------------------------------

    def scan(self) -> list[tuple[RunRecord, bool]]:
        """Every run's record (with claim) and whether an entry exists at its park path; oldest first.

        Reference §7: the file journal scans the whole directory for runParkedOn and dueRuns.
        """
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
        # Not waiting indefinitely for a writer's lock: a writer holds it for a write and an fsync, unless its
        # process was paused (SIGSTOP, a frozen VM) holding it — and then every sweep and listing of every
        # process would hang on that one file. A file still locked after _SCAN_WAIT_S is scanned as it last was
        # (or left out until the next scan). A delivery found so can be refused (delivered: false) and retried.
        deadline = SYSTEM_CLOCK.monotonic() + _SCAN_WAIT_S
        try:
            while True:
                try:
                    with self.open(run, writer=False, wait=False) as locked:
                        if locked is None:
                            return None
                        record = locked.state.current
                        at_park = bool(record and record.parked and record.parked.path in locked.state.entries)
                        summary: _Summary = (_stat_key(locked.stat), record, at_park)
                    break
                except Busy:
                    if SYSTEM_CLOCK.monotonic() >= deadline:
                        return cached
                    time.sleep(0.005)
        except JournalCorrupt as exc:
            # One damaged file must not stop the sweep for every other run; it is reported once per change, and
            # listed as what its lines before the damage say, marked corrupt (never due: nothing executes it).
            _LOG.warning("journal.file.corrupt", extra={"durable.run": run, "error.code": exc.code,
                                                         "error.message": exc.message})
            partial = getattr(exc, "partial", None)
            base = partial if isinstance(partial, RunRecord) else RunRecord(run, "running")
            summary = (key, replace(base, corrupt=exc.message), False)
        with self._cache_lock:
            self._summaries[run] = summary
        return summary

    def clear(self) -> None:
        with self._cache_lock:
            self._states.clear()
            self._summaries.clear()
