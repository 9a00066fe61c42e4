"""The run-handle protocol (spec §2): what a step engine journals through.

The engine never touches storage. At each journaling site it calls :meth:`RunHandle.decide` or
:meth:`RunHandle.step`; the backend decides replay versus execute. Outside a durable run there is no
handle and nothing is journaled.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn, Protocol

from telo.engine.suspend import ParkUntil, ParkWhere
from telo.engine.zones import Zone, ZoneReport

Compute = Callable[[], Any]  # sync, or returning an awaitable
Execute = Callable[[], Awaitable[Any]]


class RunHandle(Protocol):
    run_id: str
    # Whose id prefixes the idempotency key handed to each effect, ``<key_run>/<step path>`` (event-log §2): the
    # run's own, or — for a fork that keeps the original's keys — the run it was forked from.
    key_run: str

    async def step(self, path: str, target: Mapping[str, str] | None, inputs: Any, execute: Execute) -> Any:
        """Hand over an effect: the recorded result on replay, else ``await execute()`` journaled on completion.

        Returns the value as stored and decoded (``NO_VALUE`` for a step that produced nothing), so the first
        pass and a replay hand the engine identical values.
        """
        ...

    async def decide(self, path: str, kind: str, compute: Compute) -> Any:
        """A control-flow decision, recorded on first execution and returned verbatim on replay."""
        ...

    async def park(self, where: ParkWhere, until: ParkUntil) -> NoReturn:
        """Record the park, latch the signal, then raise :class:`~telo.engine.suspend.Suspension`."""
        ...

    def writes_inside(self, zone: Zone) -> bool:
        """Does this handle's own recording land inside ``zone``'s atomicity? (spec §8.2)"""
        ...

    def report_zone(self, report: ZoneReport) -> None:
        """How a region resolved (spec §8.3); the backend logs ``durable.zone.mode`` and counts collapses."""
        ...

    def check_cancelled(self) -> None:
        """Raise if the run was cancelled: a running body stops at its next journaling point."""
        ...

    async def check_cancelled_async(self) -> None:
        """Read the run's status when due, then :meth:`check_cancelled`: for a step that waits long between
        journaling points (a ``Durable.Consume`` polling an open stream)."""
        ...

    def halt(self, exc: BaseException) -> NoReturn:
        """Stop this execution for ``exc`` (a cancel, a drain, a lost claim): raised as a halt that no ``catch``
        sees and no failure receipt records, leaving the run to its next execution (telo.durable.halting)."""
        ...


def epoch_ms_value(handle: RunHandle | None, ms: int) -> int | float:
    """An epoch-ms time the runtime decides (a sleep's wakeAt, an await's deadline, a retry's due time), as it is
    recorded: an int — or a double where the journal is written for a runtime that predates the codec and holds
    these as JS numbers (journal compat legacy: the handle says ``epoch_ms_as_double``; docs/compat.md)."""
    return float(ms) if getattr(handle, "epoch_ms_as_double", False) else ms


def as_epoch_ms(value: Any) -> int | None:
    """A recorded epoch-ms time as an int: a double (an upstream journal's, or a legacy one's) rounded up, so a
    wait never ends early; None for anything that is not a finite number."""
    if type(value) is int:
        return value
    if type(value) is float and math.isfinite(value):
        return math.ceil(value)
    return None
