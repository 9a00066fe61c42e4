"""Journal compat: whether a journal is written for this runtime or for one that predates the codec
(docs/compat.md).

``typed`` (the default) writes every value as a typed frame under a codec version (spec §5.2). ``legacy`` writes
the values an upstream runtime reads back — step entries, deliveries, the decisions of
:data:`~telo.journal.model.UPSTREAM_DECISIONS`, a run's inputs and result — as plain JSON with no ``v``, which the
upstream release that predates the codec (telo-reference [M]) takes as it stands; a value plain JSON cannot carry
back with its CEL type is refused (``ERR_JOURNAL_LEGACY_UNENCODABLE``), never written as something else
(:mod:`telo.values.legacy`). telo reads both kinds of journal whatever its mode: the mode decides only how it
writes.

The mode is not a field of the journal (the upstream schemas refuse unknown ones): it is the process's
(``TELO_JOURNAL_COMPAT``, which ``--journal-compat`` sets for its command) unless a store was given its own
(``Store.journal_compat``: ``telo.load(..., journal_compat=…)`` sets it on the application's journals).
"""

from __future__ import annotations

import os
from typing import Final, Protocol

from telo.errors import Code, TeloError
from telo.journal.stored import TYPED, Writer

ENV: Final = "TELO_JOURNAL_COMPAT"
TYPED_MODE: Final = "typed"
LEGACY_MODE: Final = "legacy"
MODES: Final = (TYPED_MODE, LEGACY_MODE)

# The stores whose upstream counterparts wrote an int as {"$bigint": "…"} and read it back as one (reference §7
# "Values"); telo's SQLite journal reads its legacy rows so too. The file journal's upstream reader has no such
# form: an int cannot be carried there.
_BIGINT_STORES: Final = frozenset({"postgres", "sqlite"})
_LEGACY: Final = Writer(legacy=True)
_LEGACY_BIGINT: Final = Writer(legacy=True, bigint=True)


class _Configurable(Protocol):
    kind: str
    journal_compat: str | None


def check_mode(mode: str, where: str) -> str:
    """``mode`` if it is one of :data:`MODES`, else ``ERR_JOURNAL_CONFIG_INVALID`` naming ``where``."""
    if mode not in MODES:
        raise TeloError(Code.JOURNAL_CONFIG_INVALID, f"{where} is {mode!r}, not one of {', '.join(MODES)}",
                        hint=f"{LEGACY_MODE}: plain JSON values for a runtime that predates the codec "
                        f"(docs/compat.md); {TYPED_MODE}: typed frames, the default",
                        data={"mode": mode, "modes": list(MODES)})
    return mode


def process_mode() -> str:
    """The process's mode: ``TELO_JOURNAL_COMPAT`` (unset or empty: ``typed``)."""
    mode = os.environ.get(ENV) or TYPED_MODE
    return mode if mode == TYPED_MODE else check_mode(mode, ENV)


def given_mode(store: _Configurable, mode: str, where: str) -> None:
    """Give ``store`` its own mode. A store shared by several applications keeps the first one it was given: a
    different one is refused (``ERR_JOURNAL_CONFIG_INVALID``), never written over — the last application would
    otherwise decide how the others write."""
    if store.journal_compat not in (None, mode):
        raise TeloError(Code.JOURNAL_CONFIG_INVALID, f"{where}: its journal store is written in journal compat "
                        f"{store.journal_compat!r} already, for another application sharing it; {mode!r} was asked",
                        hint="give each application its own store, or the same journal_compat",
                        data={"mode": mode, "storeMode": store.journal_compat})
    store.journal_compat = mode


def mode_of(store: _Configurable) -> str:
    """The mode ``store`` is written in: its own, else the process's."""
    return store.journal_compat or process_mode()


def writer_for(store: _Configurable) -> Writer:
    """How values are written into ``store`` (:class:`~telo.journal.stored.Writer`)."""
    if mode_of(store) != LEGACY_MODE:
        return TYPED
    return _LEGACY_BIGINT if store.kind in _BIGINT_STORES else _LEGACY
