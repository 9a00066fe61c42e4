"""A snapshot's value (event-log §4, telo.journal.eventlog "Snapshots"): every effective entry of a run as one
row each, and the state hash recovery compares. Written by :func:`telo.journal.eventlog.compact`, read back by
its ``fold``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from telo.errors import Code, JournalError
from telo.journal.lineage import Origin
from telo.journal.model import Entry


def snapshot_value(entries: Mapping[str, Entry], epoch: int, base: int,
                    origin: Origin | None = None) -> dict[str, Any]:
    # Each row ends with the entry's write time (Entry.at; null when it has none): a reader of the seven
    # members before it (an older telo) ignores it, and the compacted entries keep their times.
    rows = [
        [e.path, e.kind, e.decision, dict(e.target) if e.target else None, e.v, e.value, e.seq or 0, e.at]
        for e in sorted(entries.values(), key=lambda e: e.seq or 0)
    ]
    out = {"epoch": epoch, "base": base, "hash": state_hash(entries), "entries": rows}
    # The truncation drops the @forked record: the snapshot keeps a fork's origin (and the keys it chose).
    return out if origin is None else {**out, "forked": origin.to_value()}


def entries_from_snapshot(run: str, entry: Entry) -> tuple[dict[str, Entry], int, int]:
    data = entry.decode(run)
    try:
        entries = {
            row[0]: Entry(row[0], row[1], row[5], row[4], row[2], row[3], row[6], _time_of(row))
            for row in data["entries"]
        }
        return entries, int(data["epoch"]), int(data["base"])
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise JournalError(
            Code.DURABLE_JOURNAL_CORRUPT,
            f"snapshot {entry.path!r} of run {run!r} does not have the snapshot shape",
            data={"run": run, "path": entry.path},
        ) from exc


def _time_of(row: Sequence[Any]) -> int | None:
    """A snapshot row's write time: its optional eighth member (a snapshot of an older telo has seven)."""
    at = row[7] if len(row) > 7 else None
    return at if type(at) is int else None


def state_hash(entries: Mapping[str, Entry]) -> str:
    canon = [
        [p, e.kind, e.decision, sorted(e.target.items()) if e.target else None, e.v, e.value]
        for p, e in sorted(entries.items())
    ]
    text = json.dumps(canon, ensure_ascii=False, separators=(",", ":"))
    return "sha256-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
