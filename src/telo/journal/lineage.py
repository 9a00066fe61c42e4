"""Where a forked run came from, and whose idempotency keys its steps carry (event-log spec §2, §6).

A step's idempotency key is ``<run>/<step path>`` (event-log §2). A fork (event-log §6) is another run, so by
default the steps it executes again after its checkpoint carry keys no outside system has seen. A fork made
with ``keep_keys`` (``telo fork --keep-keys``) is keyed by the run it was forked from instead — by the ROOT of
a chain of such forks — so a system that deduplicated the original's effects by key answers the fork's from
its record.

The decision is part of the fork's ``@forked`` record, written in the fork's own log when the fork is made
(``{"from": <source>, "checkpoint": <seq>, "keys": <root run>}``; no ``keys`` member: the fork's own keys), so
every store carries it and every executor of the fork — another worker, a resubmission after a crash — reads
it back from the journal, never from process memory. Compaction truncates the ``@forked`` record, so a
snapshot carries a copy (its ``forked`` member; :func:`telo.journal.eventlog.compact`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from telo import paths
from telo.errors import Code, JournalError
from telo.journal.model import Entry

FORKED = paths.reserved("forked")
_SNAPSHOT_SEG = paths.reserved("snapshot")


@dataclass(frozen=True, slots=True)
class Origin:
    """A fork's provenance: the run and checkpoint it was copied from, and ``keys``, the run whose id keys its
    steps when it keeps the original's idempotency keys (None: its own id does)."""

    source: str
    checkpoint: int
    keys: str | None = None

    def to_value(self) -> dict[str, Any]:
        """The ``@forked`` record's value (and a snapshot's copy of it): ``keys`` only when kept, so a fork made
        without it records exactly what it always has."""
        out: dict[str, Any] = {"from": self.source, "checkpoint": self.checkpoint}
        if self.keys is not None:
            out["keys"] = self.keys
        return out

    @classmethod
    def from_value(cls, run: str, value: Any, where: str) -> Origin:
        try:
            keys = value.get("keys")
            if keys is not None and not isinstance(keys, str):
                raise TypeError(keys)
            return cls(str(value["from"]), int(value["checkpoint"]), keys)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise JournalError(
                Code.DURABLE_JOURNAL_CORRUPT,
                f"{where} of run {run!r} does not have the shape of a fork's origin",
                hint="the journal was written by something other than telo, or damaged; inspect it with "
                "`telo runs journal RUN`",
                data={"run": run, "path": where},
            ) from exc


def origin(run: str, records: Sequence[Entry]) -> Origin | None:
    """The run's origin as its log records it: its ``@forked`` record, or — once compaction truncated it — the
    copy the newest snapshot holds; None for a run that is not a fork."""
    newest: Entry | None = None
    for rec in records:
        first = rec.path.split("/", 1)[0]
        if first == FORKED:
            return Origin.from_value(run, rec.decode(run), FORKED)
        if first.startswith(_SNAPSHOT_SEG) and (newest is None or (rec.seq or 0) > (newest.seq or 0)):
            newest = rec
    if newest is None:
        return None
    data = newest.decode(run)
    copied = data.get("forked") if isinstance(data, Mapping) else None
    return None if copied is None else Origin.from_value(run, copied, newest.path)


def key_run(run: str, found: Origin | None) -> str:
    """Whose id prefixes the idempotency keys of ``run``'s steps (event-log §2): the root run a fork kept the keys
    of, else the run itself."""
    return found.keys if found is not None and found.keys is not None else run
