"""Execution zones (spec §7.3-§7.5, §8): ambient regions that carry attributes a durable run must respect.

A zone is opened by a kind around the body it drives — ``Durable.Idempotent`` provides ``idempotent``,
``Sql.Transaction`` provides ``atomic`` and ``noSuspend``, a durable workflow provides ``replayed``. Each
attribute carries the schema-declared reason text, which error messages and collapse reports quote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import count
from typing import Any, Final

REPLAYED: Final = "replayed"
IDEMPOTENT: Final = "idempotent"
ATOMIC: Final = "atomic"
NO_SUSPEND: Final = "noSuspend"
_SERIALS = count(1)  # next() on itertools.count is atomic under the GIL


@dataclass(frozen=True, slots=True, eq=False)
class Zone:
    """One open zone. Identity matters (two regions of one kind are two zones), so equality is identity.

    ``kind`` is the canonical kind that provides it (``Durable.Idempotent``); ``transaction`` is the open
    database transaction of an ``atomic`` zone, which a journal may attest it writes inside (spec §8.2).
    """

    kind: str
    attributes: Mapping[str, str]
    resource: str | None = None
    transaction: Any = None
    data: Mapping[str, Any] = field(default_factory=dict)
    # unique in the process, unlike id(): what a report keys the zone by without keeping it (and its
    # transaction) alive (telo.durable.regions)
    serial: int = field(default_factory=lambda: next(_SERIALS))

    def has(self, attribute: str) -> bool:
        return attribute in self.attributes

    def reason(self, attribute: str) -> str:
        return self.attributes.get(attribute, "")


@dataclass(frozen=True, slots=True)
class ZoneReport:
    """How a region resolved at a journaling site (spec §8.3): the ``durable.zone.mode`` record's fields."""

    zone: Zone
    attribute: str  # "idempotent" | "atomic"
    mode: str  # "collapsed" | "perStep"
    attestation: str | None = None  # "writesInside" for perStep
