"""The suspension signal (spec §2 park, §7.7): not an error, and nothing may absorb it.

It derives from ``BaseException`` so ``except Exception`` — in user code, in a composer, in a retry policy —
lets it pass. Because a third-party ``except BaseException`` could still swallow it, a park also LATCHES the
signal on its run handle before raising; the workflow checks the latch when its body returns
(``ERR_DURABLE_SUSPENSION_SWALLOWED``), which needs no cooperation from the absorber.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from telo.errors import ERR_DURABLE_SUSPENDED, Code


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

    code = ERR_DURABLE_SUSPENDED.value  # an exact str, as TeloError.code

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


class ExecutionHalted(BaseException):
    """This execution must stop now, leaving the run for another (spec §7.7 for why not an error).

    Raised by a run handle when continuing would break the one-executor promise or build on writes that did
    not happen: the run's claim is no longer this execution's (``ERR_DURABLE_CLAIM_LOST``), an earlier deferred
    write failed (``ERR_DURABLE_CHAIN_BROKEN``), the run was cancelled, the journal refused a write for a
    transient reason, or the process is shutting down. None of those is the body's own failure, so no
    ``catch``, ``catches:``, retry policy or compensation may see it: like :class:`Suspension` it derives from
    ``BaseException``, and the handle latches it so that a swallowing ``except BaseException`` is detected.
    ``cause`` is the error that says why (a :class:`telo.errors.TeloError`).
    """

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause

    @property
    def code(self) -> str:
        return str(getattr(self.cause, "code", Code.INTERNAL))
