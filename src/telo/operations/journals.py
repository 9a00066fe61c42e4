"""Opening a journal by name, with one not-found rule for every front end.

A journal is named as ``--journal`` names it (a SQLite file or ``sqlite:///path``, a file-journal directory
or ``file:///dir``, a ``postgresql://`` URL, ``memory:``) or taken from a manifest (its only journal).

The rule: a journal kept on this machine that does not exist is refused with ``ERR_JOURNAL_NOT_FOUND`` —
never created — unless the caller creates runs (``create=True``: ``telo.load(journal=…)``, whose ``start``
admits runs, and a manifest's own journal when ``telo run``/``telo schedule``/``telo worker`` start it).
Every command that only reads runs or operates on existing ones (``status``, ``result``, ``deliver``,
``cancel``, ``resume``, ``resolve``, ``runs …``, ``restore``, ``fork``, ``telo ui``) opens with
``create=False``: a mistyped path answering "no runs" from a fresh empty journal would be the wrong answer.
A PostgreSQL URL and ``memory:`` are not checked: a server has no path to test, a memory journal no past.

A journal named by the environment or a project file (:mod:`telo.operations.project`) is held to the same rule,
and its error says which of them named it: the reader did not type the path, so "there is no journal at 'x'"
alone would leave them guessing where 'x' came from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from telo.clock import Clock
from telo.errors import Code, TeloError
from telo.journal import open_store
from telo.journal.redact import redact
from telo.journal.store import Store
from telo.kinds.journals import Journal
from telo.operations.project import ENV_JOURNAL, JournalSource

NOT_FOUND = Code.JOURNAL_NOT_FOUND


def local_path(name: str) -> str | None:
    """The file or directory a journal name points to on this machine, or None (a server, memory)."""
    if name in ("memory:", "memory://") or name.startswith(("postgresql://", "postgres://")):
        return None
    for scheme in ("sqlite://", "file://"):
        if name.startswith(scheme):
            return name.removeprefix(scheme)
    if _URL.match(name):
        return None  # another scheme (ftp://, a mistyped postgresq://): open_store says it names no known store
    return name


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def journal_not_found(name: str, source: JournalSource | None = None) -> TeloError:
    shown = redact(name)  # a mistyped scheme (postgresq://user:pw@…) lands here as a "path"
    if source is not None and not source.by_flag:
        if source.journal is not None:
            message = f"{source.naming()}, {shown!r}, does not exist"
        else:
            message = f"the journal {source.naming()} ({source.manifest!r} declares it), {shown!r}, does not exist"
        return TeloError(NOT_FOUND, message, hint=f"fix {source.origin}, or name the journal with --journal "
                         "PATH-or-URL", data={"journal": shown, "namedBy": source.origin})
    return TeloError(NOT_FOUND, f"there is no journal at {shown!r}",
                     hint="pass an existing SQLite file, file-journal directory or postgresql:// URL, "
                     "or --manifest FILE to use the manifest's journal", data={"journal": shown})


def require_exists(name: str, path: str | None, source: JournalSource | None = None) -> None:
    if path is not None and not os.path.exists(path):
        raise journal_not_found(name, source)
    # An empty file is no journal either: opened, the SQLite store would write its tables into it, turning
    # the mistyped `touch`ed name into a fresh journal with "no runs" (any telo journal has its header page).
    if path is not None and os.path.isfile(path) and os.path.getsize(path) == 0:
        error = journal_not_found(name, source)
        raise TeloError(NOT_FOUND, f"{error.message}: the file is empty", hint=error.hint, data=error.data)


def open_journal(name: str, *, create: bool = False, clock: Clock | None = None,
                 source: JournalSource | None = None) -> Store:
    """The journal ``name`` names; see the module docstring for when a missing one is refused."""
    if not create:
        require_exists(name, local_path(name), source)
    return open_store(name) if clock is None else open_store(name, clock=clock)


def only_journal(journals: Iterable[Journal], where: str, hint: str) -> Journal:
    """The one journal resource of an application (``ERR_JOURNAL_AMBIGUOUS`` for none or several)."""
    found = list(journals)
    if len(found) != 1:
        raise TeloError(Code.JOURNAL_AMBIGUOUS, f"{where} declares {len(found)} journals", hint=hint)
    return found[0]


def open_manifest_journal(manifest: str, *, create: bool = False, source: JournalSource | None = None) -> Store:
    """The store of the only journal ``manifest`` declares, opened without starting anything else."""
    from telo.kinds.controllers import load_application

    if source is not None and not source.by_flag and not os.path.isfile(manifest):
        raise TeloError(NOT_FOUND, f"{source.naming()}, {manifest!r}, does not exist",
                        hint=f"fix {source.origin}, or name the journal with --journal PATH-or-URL",
                        data={"manifest": manifest, "namedBy": source.origin})
    app = load_application(manifest)
    app.create_resources()
    journal = only_journal((r for r in app.every_resource() if isinstance(r, Journal)), manifest,
                           "name the journal with --journal")
    if not create:
        path = journal.local_path()
        require_exists(path or manifest, path, source)
    return journal.open()


def open_source(source: JournalSource | None) -> Store:
    """What a read or operate command opens: the source's journal, or its manifest's only journal; neither is
    created. Raises ``ERR_JOURNAL_REQUIRED`` when nothing names a journal."""
    if source is not None and source.journal is not None:
        return open_journal(source.journal, source=source)
    if source is not None and source.manifest is not None:
        return open_manifest_journal(source.manifest, source=source)
    raise TeloError(Code.JOURNAL_REQUIRED, "no journal named", hint=REQUIRED_HINT)


def open_named(journal: str | None, manifest: str | None) -> Store:
    """:func:`open_source` of what ``journal``/``manifest`` name, else the environment or project file."""
    from telo.operations.project import journal_source

    return open_source(journal_source(journal, manifest))


REQUIRED_HINT = (f"name a journal with --journal PATH-or-URL or --manifest FILE, set {ENV_JOURNAL}, or write "
                 "journal = \"PATH\" in a telo.toml (or [tool.telo] in pyproject.toml)")
