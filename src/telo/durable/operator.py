"""Operator actions on one run's record, written once: the rules the addressing kinds (``DurableLocal.Cancel``,
``Resume`` …, reference §6 "Addressing kinds") and :mod:`telo.operations` (the CLI, the Python API, the
dashboard) share. They sit here, below both, because the kinds may not import the operations layer.

Every function is synchronous and blocks on the store (stores are thread-safe; async callers use
``asyncio.to_thread``). A run that is not in the journal is always :func:`run_not_found`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from telo import paths
from telo.durable.messages import INBOX_TOKEN_PREFIX
from telo.errors import Code, TeloError
from telo.journal import eventlog
from telo.journal.compat import writer_for
from telo.journal.model import NO_VALUE, Entry, Outcome, RunRecord
from telo.journal.store import Store
from telo.values import Timestamp

NOT_FOUND = Code.DURABLE_RUN_NOT_FOUND
RESOLUTIONS = ("redrive", "skip", "fail")
# Where a durable schedule's ledger run is parked (telo.kinds.schedule_ledger): nothing is ever written there,
# so the run is never due. A run command pointed at it is refused (refuse_ledger).
SCHEDULE_LEDGER_PATH = "schedule-ledger"


def run_not_found(run: str) -> TeloError:
    """The one error for a run id the journal does not hold."""
    return TeloError(NOT_FOUND, f"no run {run!r} in this journal",
                     hint="list the journal's runs with `telo runs list`", data={"run": run})


def require_run(store: Store, run: str) -> RunRecord:
    record = store.read_run(run)
    if record is None:
        raise run_not_found(run)
    return record


def refuse_ledger(record: RunRecord, what: str) -> None:
    """A schedule's ledger is operated through its schedule, never as a run: cancelling or resuming it would
    stop the schedule's record or make it due (``ERR_SCHEDULE_LEDGER_PROTECTED``)."""
    if record.parked is not None and record.parked.path == SCHEDULE_LEDGER_PATH:
        schedule = record.parked.resource or record.run.removesuffix("@ledger")
        raise TeloError(Code.SCHEDULE_LEDGER_PROTECTED, f"{record.run!r} is the ledger of schedule {schedule!r}, "
                        f"not a run to {what}", hint=f"operate the schedule: telo schedules pause|resume|trigger "
                        f"MANIFEST {schedule}", data={"run": record.run, "schedule": schedule})


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
    refuse_ledger(record, "cancel")
    store.complete(run, Outcome.cancelled(reason))
    return Cancelled(run, True, "cancelled")


@dataclass(frozen=True, slots=True)
class Resumed:
    """What a resume did: ``resumed`` is false for a settled run, and (:func:`unmovable`) for one a resume
    would not move, with ``reason`` saying why and ``hint`` what does move it; ``forced`` when it accepted a
    changed manifest."""

    run: str
    resumed: bool
    status: str
    forced: bool = False
    reason: str | None = None
    hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.resumed:
            return {"run": self.run, "resumed": True, "forced": self.forced}
        if self.reason is None:  # DurableLocal.Resume's answer for a settled run, as it always was
            return {"resumed": False, "status": self.status}
        out = {"run": self.run, "resumed": False, "status": self.status, "reason": self.reason}
        return out if self.hint is None else {**out, "hint": self.hint}


def unconfirmed_step(path: str) -> str | None:
    """The step ``telo resolve`` answers for a run parked at ``path`` — its park at ``<step>/@unconfirmed[n]``,
    stored under the run's epoch — as the logical step path; None for a park of another kind."""
    logical = eventlog.split_storage_path(path)[1]
    if paths.parse(logical)[-1].name != paths.UNCONFIRMED:
        return None
    return paths.parent(logical) or logical


def unmovable(record: RunRecord, now_ms: int, *, message_waiting: bool = False) -> Resumed | None:
    """Why an operator's resume would not move ``record``, or None when it would (issue 15: `telo resume` printed
    ``resumed: true`` for runs that parked again at once). A resume only makes a run due: the step it parked at
    runs again and parks again unless what it waits for has come — an answer to an unconfirmed effect, a
    delivery to an Await, a message to a receive (``message_waiting``: one is, untaken). A time-only park (a
    sleep, a retry backoff) is left to :func:`resume_run`: it re-checks the recorded wake time, which is what
    resuming one has always meant. The addressing kind ``DurableLocal.Resume`` keeps upstream's behaviour and
    does not ask."""
    run = record.run
    if record.terminal:
        return Resumed(run, False, record.status, reason=f"the run has already settled ({record.status})",
                       hint="restore or fork it to a checkpoint to run steps again "
                       f"(`telo runs checkpoints {shlex.quote(run)}`)")
    if record.status != "parked" or record.parked is None:
        return Resumed(run, False, record.status, reason=f"the run is {record.status}, not parked",
                       hint=f"`telo status {shlex.quote(run)}` shows who holds it or when it is due")
    parked = record.parked
    step = unconfirmed_step(parked.path)
    if step is not None:
        return Resumed(run, False, "parked", reason=f"the effect at {step} may or may not have happened; "
                       "resuming would park the run there again",
                       hint=f"answer it: `telo resolve {shlex.quote(run)} {shlex.quote(step)} --redrive | "
                       "--skip-with JSON | --fail`")
    if message_waiting:  # a receive of the run waits for a message that is there (its send's wake was lost)
        return None
    inbox = f"{INBOX_TOKEN_PREFIX}{run}:"
    if parked.token is not None and parked.token.startswith(inbox) and (parked.at is None or parked.at > now_ms):
        topic = parked.token[len(inbox):]
        return Resumed(run, False, "parked", reason=f"the run waits at {parked.path} for a message on topic "
                       f"{topic!r}, and none is waiting; resuming would park it there again",
                       hint=f"send one: `telo send {shlex.quote(run)} {shlex.quote(topic)} --payload JSON`")
    if parked.token is not None and (parked.at is None or parked.at > now_ms):
        return Resumed(run, False, "parked", reason=f"the run waits at {parked.path} for a delivery to token "
                       f"{parked.token!r}; resuming would park it there again",
                       hint=f"deliver to it: `telo deliver {shlex.quote(parked.token)} --payload JSON`")
    return None


def resume_run(store: Store, run: str, reason: str, now_ms: int, *, force: bool = False) -> Resumed:
    """Continue a parked run now (reference §6 "Local.Resume"), recorded as ``override/resume/<ms>``. A run
    HELD because its manifest changed continues only with ``force``, which records the acceptance at the
    hold's own path (spec §9 ERR_DURABLE_MANIFEST_CHANGED)."""
    record = require_run(store, run)
    if record.terminal:
        return Resumed(run, False, record.status)
    refuse_ledger(record, "resume")
    at = Timestamp.from_epoch_millis(now_ms).to_text()
    held = is_held(record)
    if held and record.parked is not None:
        if not force:  # the park reason starts with the code: the message must not repeat it
            reason = (record.parked.reason or "").removeprefix(f"{Code.DURABLE_MANIFEST_CHANGED}: ")
            raise TeloError(Code.DURABLE_MANIFEST_CHANGED, reason or f"run {run!r} is held",
                            hint="continue it against the new manifest with "
                            f"`telo resume {shlex.quote(run)} --force`",
                            data={"run": run})
        store.append(run, Entry.decided(record.parked.path, "digest", {"accept": True, "reason": reason, "at": at}))
    store.append(run, Entry.decided(paths.resume_override_path(now_ms), "value",
                                    {"reason": reason, "at": at, "force": force}, writer=writer_for(store)))
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
    path = unconfirmed_step(path) or path  # (the park's own path, as `telo status` shows it, names the step too)
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
                        hint=f"`telo status {shlex.quote(run)}` shows where the run waits and which effects are "
                        "unconfirmed")
    n = effect_state(path, state.entries, run).resolutions
    answer: dict[str, Any] = {"action": action, "by": "operator"}
    if now_ms is not None:
        answer["at"] = Timestamp.from_epoch_millis(now_ms).to_text()
    if action == "skip":
        answer["value"] = None if value is NO_VALUE else value
        writer_for(store).stored(answer["value"])  # becomes the step's receipt: refused now, if the journal can't
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
