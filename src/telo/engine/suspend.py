"""The suspension signal (spec §2 park, §7.7): not an error, and nothing may absorb it.

It derives from ``BaseException`` so ``except Exception`` — in user code, in a composer, in a retry policy —
lets it pass. Because a third-party ``except BaseException`` could still swallow it, a park also LATCHES the
signal on its run handle before raising; the workflow checks the latch when its body returns
(``ERR_DURABLE_SUSPENSION_SWALLOWED``), which needs no cooperation from the absorber.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from telo.errors import ERR_DURABLE_SUSPENDED


@dataclass(frozen=True, slots=True)
class ParkUntil:
    """What wakes a parked run: a due time (epoch ms), a delivery token, or either."""

    at: int | None = None
    token: str | None = None


@dataclass(frozen=True, slots=True)
class ParkWhere:
    """Where a run parks: the path a resume re-enters (and a delivery writes), and what it waits on."""

    path: str
    resource: str
    reason: str | None = None


class Suspension(BaseException):
    """``ERR_DURABLE_SUSPENDED``: unwinds to the workflow that owns the run once the park is recorded."""

    code = ERR_DURABLE_SUSPENDED

    def __init__(self, run_id: str, where: ParkWhere, until: ParkUntil) -> None:
        super().__init__(f"{ERR_DURABLE_SUSPENDED}: run {run_id!r} parked at {where.path}")
        self.run_id = run_id
        self.where = where
        self.until = until

    @property
    def data(self) -> dict[str, Any]:
        until: dict[str, Any] = {}
        if self.until.at is not None:
            until["at"] = self.until.at
        if self.until.token is not None:
            until["token"] = self.until.token
        return {"runId": self.run_id, "path": self.where.path, "resource": self.where.resource, "until": until}
