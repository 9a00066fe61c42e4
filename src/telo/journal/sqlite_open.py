"""Why a SQLite journal did not open, as one clear error instead of sqlite3's traceback (issue 15).

SQLite answers a directory with "unable to open database file", and a text file or a truncated journal with
"file is not a database" / "database disk image is malformed", raised from the first PRAGMA. None of that
tells an operator which path is wrong or what to do, so :func:`unopenable` reads the file's 100-byte header
itself — without SQLite, so nothing is written — and names the case: a directory, not a SQLite database at
all, or a SQLite database that is damaged (shorter than its header says, when that is why). The file is left
as it was: every one of these errors is raised before telo writes a byte to it.
"""

from __future__ import annotations

import os
import sqlite3

from telo.errors import Code, JournalError

MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file (sqlite.org/fileformat)
HEADER = 100


def unopenable(path: str, exc: sqlite3.DatabaseError) -> JournalError | None:
    """The error to raise for ``exc``, raised while opening the SQLite journal at ``path``; None when it is
    not about the file itself (a lock held too long, say), which the caller re-raises as it is."""
    data = {"path": path}
    if os.path.isdir(path):
        return JournalError(Code.JOURNAL_CONFIG_INVALID, f"the SQLite journal {path!r} is a directory, not a file",
                            hint=f"name the SQLite file (e.g. {os.path.join(path, 'journal.db')}), or pass "
                            f"file://{path} if the directory holds a file journal", data=data)
    if isinstance(exc, sqlite3.OperationalError):
        if "unable to open" not in str(exc):
            return None
        return JournalError(Code.JOURNAL_CONFIG_INVALID, f"cannot open the SQLite journal {path!r}: {exc}",
                            hint="check that the path names a file this user may read and write, in a directory "
                            "it may write", data=data)
    try:
        with open(path, "rb") as f:
            header = f.read(HEADER)
        size = os.path.getsize(path)
    except OSError:
        return None
    if not header.startswith(MAGIC):
        return JournalError(Code.DURABLE_JOURNAL_CORRUPT, f"{path!r} is not a SQLite database (it does not begin "
                            "with SQLite's header)", hint="check the path: --journal names the SQLite file telo "
                            "created (e.g. journal.db), a file-journal directory or a postgresql:// URL; if this "
                            "file was a journal, restore it from a backup", data=data)
    return JournalError(Code.DURABLE_JOURNAL_CORRUPT, f"the SQLite journal {path!r} is damaged: {exc}"
                        f"{_truncation(header, size)}", hint="restore the journal from a backup (telo left the "
                        "file as it is)", data=data)


def _truncation(header: bytes, size: int) -> str:
    """`` (truncated: …)`` when the file is shorter than the page count its header records, else ''."""
    if len(header) < HEADER:
        return f" (truncated: {size} bytes, shorter than SQLite's {HEADER}-byte header)"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The page count is only valid when the change counter matches "version-valid-for" (sqlite.org/fileformat).
    if header[24:28] == header[92:96] and size < pages * page_size:
        return f" (truncated: {size} bytes of the {pages * page_size} its header counts)"
    return ""
