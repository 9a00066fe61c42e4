"""A queue's limits changed by an operator, recorded in the journal (issue 16; docs/proposals/admission-control.md
"Visibility": ``telo queues set payments --concurrency 20`` writes an override row that sweeps read — limits
change without restarting workers; the manifest's value is the default).

An override is one row per queue in a telo-only table ``<prefix>_queues`` beside the runs (SQLite: schema v7,
:mod:`telo.journal.sqlite_queue_overrides`; PostgreSQL: created with the other telo extension DDL,
:mod:`telo.journal.postgres_queue_overrides`; the memory store keeps it in memory; the file journal, which refuses
queues, holds none). Upstream runtimes never read the table: they ignore queues altogether.

Each limit column of the row is one of three things, so that a second ``set`` changes only what it names:

- NULL: not overridden — the manifest's value holds;
- :data:`NO_LIMIT` (0): overridden to *no* limit (``--concurrency none``), whatever the manifest says;
- an integer ≥ 1: overridden to that limit.

``rate_limit`` and ``rate_period_ms`` go together (a ``rateLimit`` is ``{limit, period}``). ``set_by`` and
``set_at`` say who changed the row last and when (epoch ms), which ``telo queues show`` prints beside the
manifest's value and the effective one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from typing import Any, Final

NO_LIMIT: Final = 0  # an override to "no limit" (a limit itself is ≥ 1)
# The limit fields of a row, in column order (the SQL stores' column names are the same).
LIMIT_FIELDS: Final = ("concurrency", "worker_concurrency", "key_limit", "rate_limit", "rate_period_ms")


@dataclass(frozen=True, slots=True)
class LimitValues:
    """A queue's limits as numbers (None: no such limit): as a manifest declares them, or as they are in effect
    once an override is applied (:meth:`QueueOverride.apply`)."""

    concurrency: int | None = None
    worker_concurrency: int | None = None
    key_limit: int | None = None
    rate_limit: int | None = None
    rate_period_ms: int | None = None


@dataclass(frozen=True, slots=True)
class QueueOverride:
    """One row of ``<prefix>_queues``: a limit field None is not overridden, :data:`NO_LIMIT` is overridden to
    no limit, an integer ≥ 1 is the limit (module docstring)."""

    queue: str
    concurrency: int | None = None
    worker_concurrency: int | None = None
    key_limit: int | None = None
    rate_limit: int | None = None
    rate_period_ms: int | None = None
    set_by: str | None = None
    set_at: int | None = None

    def overridden(self) -> Iterator[tuple[str, int | None]]:
        """``(field, limit)`` of each overridden limit field (``rate_period_ms`` goes with ``rate_limit``), the
        limit None where the override removes it."""
        for name in LIMIT_FIELDS[:4]:
            value = getattr(self, name)
            if value is not None:
                yield name, None if value == NO_LIMIT else int(value)

    def apply(self, declared: LimitValues) -> LimitValues:
        """The limits in effect: ``declared`` (the manifest's) with each overridden field replaced."""
        changes: dict[str, Any] = dict(self.overridden())
        if "rate_limit" in changes:
            changes["rate_period_ms"] = None if changes["rate_limit"] is None else self.rate_period_ms
        return replace(declared, **changes)

    def merged(self, newer: QueueOverride) -> QueueOverride:
        """This row updated by ``newer``: the fields ``newer`` overrides replace these, the others stay (what the
        SQL stores' upsert does; the memory store calls it)."""
        changes = {f.name: getattr(newer, f.name) for f in fields(newer)
                   if f.name in LIMIT_FIELDS and getattr(newer, f.name) is not None}
        if newer.rate_limit is not None:
            changes["rate_period_ms"] = newer.rate_period_ms
        return replace(self, **changes, set_by=newer.set_by, set_at=newer.set_at)


def from_row(row: tuple[Any, ...]) -> QueueOverride:
    """A row of ``SELECT queue, <LIMIT_FIELDS>, set_by, set_at``."""
    queue, *limits, set_by, set_at = row
    values = dict(zip(LIMIT_FIELDS, (None if v is None else int(v) for v in limits), strict=True))
    return QueueOverride(str(queue), values["concurrency"], values["worker_concurrency"], values["key_limit"],
                         values["rate_limit"], values["rate_period_ms"], None if set_by is None else str(set_by),
                         None if set_at is None else int(set_at))


def row_of(override: QueueOverride) -> tuple[Any, ...]:
    """The parameters of an upsert, in :func:`from_row`'s order."""
    return (override.queue, *(getattr(override, name) for name in LIMIT_FIELDS), override.set_by, override.set_at)


COLUMNS: Final = ", ".join(("queue", *LIMIT_FIELDS, "set_by", "set_at"))


def unsupported(kind: str) -> Exception:
    """What a store that keeps no overrides raises when asked to write one: the file journal (which refuses queues
    at load, so a manifest of it never reaches here) and any store written before this table."""
    from telo.errors import Code, JournalError

    return JournalError(Code.JOURNAL_CONFIG_INVALID, f"the {kind} journal keeps no queue overrides: it cannot "
                        "enforce a queue", hint="put the queue on a SQLite or PostgreSQL journal",
                        data={"journal": kind})


def table_ddl(table: str, integer: str) -> str:
    """The DDL of ``<prefix>_queues`` — one row per overridden queue; a limit NULL is the manifest's, 0 is no
    limit — with ``integer`` the store's 64-bit integer type (``table``: the name, quoted as the store needs).
    Here, not in the stores' modules, because the schema modules create it and the stores' modules read it."""
    limits = ", ".join(f"{name} {integer}" for name in LIMIT_FIELDS)
    return f"CREATE TABLE IF NOT EXISTS {table} (queue TEXT PRIMARY KEY, {limits}, set_by TEXT, set_at {integer})"
