"""Operator actions on one run's record, written once: the rules the addressing kinds (``DurableLocal.Cancel``,
``Resume`` …, reference §6 "Addressing kinds") and :mod:`telo.operations` (the CLI, the Python API, the
dashboard) share. They sit here, below both, because the kinds may not import the operations layer.

Every function is synchronous and blocks on the store (stores are thread-safe; async callers use
``asyncio.to_thread``). A run that is not in the journal is always :func:`run_not_found`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from telo import paths
from telo.errors import Code, TeloError
from telo.journal import eventlog
from telo.journal.model import NO_VALUE, Entry, Outcome, RunRecord
from telo.journal.store import Store
from telo.values import Timestamp

NOT_FOUND = Code.DURABLE_RUN_NOT_FOUND
RESOLUTIONS = ("redrive", "skip", "fail")


def run_not_found(run: str) -> TeloError:
    """The one error for a run id the journal does not hold."""
    return TeloError(NOT_FOUND, f"no run {run!r} in this journal",
                     hint="list the journal's runs with `telo runs list`", data={"run": run})


def require_run(store: Store, run: str) -> RunRecord:
    record = store.read_run(run)
    if record is None:
        raise run_not_found(run)
    return record


def is_held(record: RunRecord) -> bool:
    """Parked because its manifest changed (spec §9): only a forced resume continues it."""
    return record.status == "parked" and record.parked is not None and "@manifest[" in record.parked.path


@dataclass(frozen=True, slots=True)
class Cancelled:
    """What a cancel did: ``cancelled`` is false for a run that had already settled (``status`` says how)."""

    run: str
    cancelled: bool
    status: str


def cancel_run(store: Store, run: str, reason: str) -> Cancelled:
    """Cancel a run that has not settled; a body executing it stops at its next step."""
    record = require_run(store, run)
    if record.terminal:
        return Cancelled(run, False, record.status)
    store.complete(run, Outcome.cancelled(reason))
    return Cancelled(run, True, "cancelled")


@dataclass(frozen=True, slots=True)
class Resumed:
    """What a resume did: ``resumed`` is false for a settled run; ``forced`` when it accepted a changed
    manifest."""

    run: str
    resumed: bool
    status: str
    forced: bool = False

    def to_json(self) -> dict[str, Any]:
        if not self.resumed:
            return {"resumed": False, "status": self.status}
        return {"run": self.run, "resumed": True, "forced": self.forced}


def resume_run(store: Store, run: str, reason: str, now_ms: int, *, force: bool = False) -> Resumed:
    """Continue a parked run now (reference §6 "Local.Resume"), recorded as ``override/resume/<ms>``. A run
    HELD because its manifest changed continues only with ``force``, which records the acceptance at the
    hold's own path (spec §9 ERR_DURABLE_MANIFEST_CHANGED)."""
    record = require_run(store, run)
    if record.terminal:
        return Resumed(run, False, record.status)
    at = Timestamp.from_epoch_millis(now_ms).to_text()
    held = is_held(record)
    if held and record.parked is not None:
        if not force:
            raise TeloError(Code.DURABLE_MANIFEST_CHANGED, record.parked.reason or f"run {run!r} is held",
                            hint=f"continue it against the new manifest with `telo resume {run} --force`",
                            data={"run": run})
        store.append(run, Entry.decided(record.parked.path, "digest", {"accept": True, "reason": reason, "at": at}))
    store.append(run, Entry.decided(paths.resume_override_path(now_ms), "value",
                                    {"reason": reason, "at": at, "force": force}))
    store.unpark(run)
    return Resumed(run, True, "running", held)


def resolve_unconfirmed(store: Store, run: str, path: str, action: str, value: Any = NO_VALUE,
                        now_ms: int | None = None) -> Mapping[str, Any]:
    """An operator's answer to an unconfirmed effect (event-log spec §2): ``redrive`` it with the same
    idempotency key, ``skip`` it with the given result as its receipt, or ``fail`` the run. The answer is
    recorded at the step's next ``@unconfirmed[n]`` (where the run parked, if it did) and the run unparked."""
    from telo.durable.effects import effect_state

    if action not in RESOLUTIONS:
        raise TeloError(Code.INVALID_VALUE, f"unknown resolution {action!r}", hint="use redrive, skip or fail")
    state = eventlog.recover(store, run)
    if state.record is None:
        raise run_not_found(run)
    if state.record.terminal:
        raise TeloError(Code.DURABLE_RUN_SETTLED, f"run {run!r} is already {state.record.status}",
                        hint="restore or fork it to a checkpoint to run that step again")
    if path in state.entries or paths.failure_path(path) in state.entries \
            or paths.inputs_path(path) not in state.entries:
        raise TeloError(Code.DURABLE_EFFECT_NOT_UNCONFIRMED,
                        f"step {path!r} of run {run!r} has no effect with an unknown outcome",
                        hint=f"`telo status {run}` shows where the run waits and which effects are unconfirmed")
    n = effect_state(path, state.entries, run).resolutions
    answer: dict[str, Any] = {"action": action, "by": "operator"}
    if now_ms is not None:
        answer["at"] = Timestamp.from_epoch_millis(now_ms).to_text()
    if action == "skip":
        answer["value"] = None if value is NO_VALUE else value
    stored = store.append(run, Entry.decided(state.storage_path(paths.unconfirmed_path(path, n)), "unconfirmed",
                                             answer))
    store.unpark(run)
    return {"run": run, "path": path, "resolution": stored.decode(run)}


@dataclass(frozen=True, slots=True)
class UnconfirmedEffect:
    """A recorded resolution of an effect whose outcome was unknown after a crash (``<step>/@unconfirmed[n]``)."""

    step: str
    run: str
    entry: Entry

    def resolution(self) -> Any:
        """The recorded answer (``{"action": …, "by": …}``); raises if the stored text does not decode."""
        return self.entry.decode(self.run)


def unconfirmed_effects(state: eventlog.RunState) -> tuple[UnconfirmedEffect, ...]:
    """Every unconfirmed-effect resolution of the run, settled or not: they are its history of unknown
    outcomes, which an operator still asks about after the run settled."""
    out = []
    for path, entry in state.entries.items():
        if paths.parse(path)[-1].name == paths.UNCONFIRMED:
            out.append(UnconfirmedEffect(paths.parent(path) or "", state.run, entry))
    return tuple(out)
