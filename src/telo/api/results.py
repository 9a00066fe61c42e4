"""The Python API's results: frozen dataclasses whose values are domain values (``int``, ``str``, ``dict``,
:class:`telo.values.Timestamp` …), as CEL and the journal see them (docs/python-api.md "Results")."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from telo.errors import Code, TeloError
from telo.journal.model import NO_VALUE, Entry, Parked, RunRecord
from telo.operations.runs import RunView

Wait: TypeAlias = float | int | str | None


@dataclass(frozen=True, slots=True)
class RunRef:
    """A run :meth:`AsyncApp.start` started (``started``) or attached to; ``status`` as it was then."""

    run_id: str
    workflow: str | None
    started: bool
    status: str

    def __str__(self) -> str:
        return self.run_id


RunLike: TypeAlias = str | RunRef


@dataclass(frozen=True, slots=True)
class RunError:
    """How a run failed: the error code and message its record keeps."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class RunStatus:
    """A run's record (``telo status``): where it is, where it waits, who executes it."""

    run_id: str
    status: str  # scheduled | running | parked | completed | failed | cancelled
    workflow: str | None = None
    due_at: int | None = None  # epoch ms it becomes due (a time park, a scheduled run)
    parked: Parked | None = None  # where a parked run waits (path, resource, token, reason)
    error: RunError | None = None
    claim_holder: str | None = None  # the process executing it right now (while its claim is live)
    claim_until: int | None = None
    unconfirmed_effects: tuple[Mapping[str, Any], ...] = ()  # {step, resolution} of each unknown outcome
    created_at: int | None = None
    updated_at: int | None = None
    forked_from: str | None = None  # a fork's source run (read from its journal by status(), not by runs())
    keeps_keys_of: str | None = None  # the run whose idempotency keys a fork made with keep_keys carries

    @property
    def settled(self) -> bool:
        """Completed, failed or cancelled: nothing will change it (short of a restore)."""
        return self.status in ("completed", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class RunList:
    """A page of runs, newest first (``telo runs list``); iterate it for its :class:`RunStatus` rows. ``next`` is
    the cursor of the page after it (pass it as ``after=``), None on the last page."""

    runs: tuple[RunStatus, ...]
    next: str | None = None

    def __iter__(self) -> Iterator[RunStatus]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    @property
    def ids(self) -> list[str]:
        return [r.run_id for r in self.runs]


@dataclass(frozen=True, slots=True)
class Scheduled:
    """What :meth:`AsyncApp.schedule` did (``telo schedule``): ``scheduled`` is false when a run with that id
    exists already (``status`` is then that run's, and nothing was written)."""

    run_id: str
    workflow: str
    scheduled: bool
    status: str
    due_at: int | None = None  # epoch ms

    def __str__(self) -> str:
        return self.run_id


@dataclass(frozen=True, slots=True)
class Resolution:
    """What :meth:`AsyncApp.resolve` recorded (``telo resolve``): the answer to the unconfirmed effect at
    ``path`` (``{"action", "by", "at", "value"?}``) and whether the run was continued in this process."""

    run_id: str
    path: str
    action: str  # redrive | skip | fail
    resolution: Any = None
    continued: bool = False


@dataclass(frozen=True, slots=True)
class RunResult:
    """A run's outcome so far (``telo result``): ``value`` is its result once completed, ``{"steps": …}``."""

    run_id: str
    status: str
    value: Any = None
    error: RunError | None = None
    replayed_steps: int = 0  # steps the settling execution returned from the journal instead of running
    collapsed_regions: int = 0
    collapse_reasons: tuple[str, ...] = ()
    parked: Parked | None = None
    due_at: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def settled(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")

    @property
    def steps(self) -> Mapping[str, Any]:
        """The completed run's ``steps`` map (``{name: {"result": …}}``); empty before completion."""
        steps = self.value.get("steps") if isinstance(self.value, Mapping) else None
        return steps if isinstance(steps, Mapping) else {}

    def step(self, name: str) -> Any:
        """The result of top-level step ``name`` (``KeyError`` if it produced none)."""
        return self.steps[name]["result"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """What :meth:`AsyncApp.deliver` did: ``delivered`` is false for a spent or unknown token."""

    delivered: bool
    run_id: str | None = None
    continued: bool = False  # the run was continued in this process


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journal entry, its value decoded (``has_value`` false for an entry that carries none)."""

    seq: int | None
    path: str
    kind: str  # step | decision
    decision: str | None = None
    target: Mapping[str, str] | None = None
    value: Any = None
    has_value: bool = False
    at: int | None = None  # epoch ms the store wrote it (None: written before entries had times, e.g. upstream)


def run_error(raw: Mapping[str, Any] | None) -> RunError | None:
    if not raw:
        return None
    return RunError(str(raw.get("code") or Code.DURABLE_RUN_FAILED), str(raw.get("message") or ""))


def run_result(record: RunRecord) -> RunResult:
    value = record.decoded_result() if record.result is not None else NO_VALUE
    return RunResult(record.run, record.status, None if value is NO_VALUE else value, run_error(record.error),
                     record.replayed_steps or 0, record.collapsed_regions or 0, tuple(record.collapse_reasons or ()),
                     record.parked, record.due_at)


def run_status(view: RunView) -> RunStatus:
    record, claim = view.record, view.record.claim
    unconfirmed = tuple({"step": u.step, "resolution": u.resolution()} for u in view.unconfirmed)
    origin = view.origin
    return RunStatus(record.run, record.status, record.workflow, record.due_at, record.parked,
                     run_error(record.error), claim.holder if claim else None, claim.until if claim else None,
                     unconfirmed, record.created_at, record.updated_at, origin.source if origin else None,
                     origin.keys if origin else None)


def record_status(record: RunRecord) -> RunStatus:
    """A :class:`RunStatus` from the record alone (a listing's row): no log is read, so no unconfirmed effects."""
    return run_status(RunView(record))


def seconds(wait: Wait) -> float | None:
    """``wait`` in seconds: a number, or a duration text (``"30s"``); None for no bound."""
    if wait is None:
        return None
    if isinstance(wait, str):
        from telo.kinds.addressing import duration_ms

        out = duration_ms(wait, "wait") / 1000
    elif isinstance(wait, int | float) and not isinstance(wait, bool):
        out = float(wait)
    else:
        raise TeloError(Code.INVALID_VALUE, f"wait: expected seconds or a duration text, got {wait!r}",
                        hint="write e.g. 30 or '30s'")
    if out < 0:
        raise TeloError(Code.INVALID_VALUE, f"wait: a wait cannot be negative ({wait!r})", hint="write e.g. 30s")
    return out


def run_id(run: RunLike) -> str:
    return run.run_id if isinstance(run, RunRef) else str(run)


def journal_entries(run: str, entries: Sequence[Entry]) -> list[JournalEntry]:
    out = []
    for e in entries:
        decoded = e.decode(run)
        out.append(JournalEntry(e.seq, e.path, e.kind, e.decision, dict(e.target) if e.target else None,
                                None if decoded is NO_VALUE else decoded, decoded is not NO_VALUE, e.at))
    return out
