"""The journal: entries, run records, the store protocol and its four stores (spec §5.2, event-log spec).

:func:`open_store` names a journal the way the CLI does: a SQLite file path (or ``sqlite:///path``), a
file-journal directory (or ``file:///dir``), a ``postgresql://`` URL, or ``memory:``.
"""

from __future__ import annotations

import os
from typing import Any

from telo.errors import Code, JournalError
from telo.journal.model import (
    CODEC_VERSION,
    NO_VALUE,
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
from telo.journal.redact import redact
from telo.journal.store import Store, StoreTransaction

__all__ = [
    "CODEC_VERSION",
    "NO_VALUE",
    "Admission",
    "AdmitResult",
    "Claim",
    "Entry",
    "Outcome",
    "Parked",
    "RunFilter",
    "RunPage",
    "RunRecord",
    "Store",
    "StoreTransaction",
    "open_store",
]


def open_store(url: str, **options: Any) -> Store:
    """Open the journal a URL or path names (see the module docstring)."""
    if url == "memory:" or url == "memory://":
        from telo.journal.memory import MemoryStore

        return MemoryStore(**options)
    if url.startswith(("postgresql://", "postgres://")):
        from telo.journal.postgres import PostgresStore

        return PostgresStore(url, **options)
    if url.startswith("sqlite://"):
        from telo.journal.sqlite import SqliteStore

        return SqliteStore(url.removeprefix("sqlite://"), **options)
    if url.startswith("file://"):
        from telo.journal.file import FileStore

        return FileStore(url.removeprefix("file://"), **options)
    if os.path.isdir(url) or url.endswith(("/", os.sep)):
        from telo.journal.file import FileStore

        return FileStore(url, **options)
    if url.endswith((".db", ".sqlite", ".sqlite3")) or os.path.isfile(url):
        from telo.journal.sqlite import SqliteStore

        return SqliteStore(url, **options)
    raise JournalError(
        Code.JOURNAL_URL_INVALID,
        f"cannot tell which journal {redact(url)!r} names",  # a mistyped scheme may still carry a password
        hint="pass a SQLite file (*.db), an existing file-journal directory (or file:///dir), "
        "a postgresql:// URL, or memory:",
    )
