"""Confirmed effects (event-log spec §2): an effect whose outcome is unknown is never re-run blindly.

A step's inputs decision — written before it executes — is its effect INTENT; its step entry is the RECEIPT.
A retried step adds a start marker per re-attempt (``<step>/@attempt[k]``) and a verdict per failed attempt
(``<step>/@retry[k]``: attempt, error code, backoff, due time; the upstream ``retry[k]`` due-time record is
kept too, where the spec puts it). When a run resumes and reaches a step whose intent was already recorded
but which has no receipt, the journal tells which case it is:

- the last start has a verdict after it: the attempt FAILED (confirmed) — continue with the next attempt,
  after what is left of its recorded backoff (a crash mid-retry neither resets the budget nor repeats a delay);
- the last start has no verdict: the effect may or may not have happened — it is UNCONFIRMED, and the step's
  policy decides (``onUnconfirmed`` on the step, else the target's): ``redrive`` (execute again with the SAME
  idempotency key ``<run>/<path>``; the default for built-in kinds and for targets declared idempotent or
  key-consuming), ``park`` (wait for an operator: ``telo resolve RUN PATH --redrive | --skip-with JSON |
  --fail``), or ``fail``; a target's ``lookup(key)`` hook may resolve the outcome from the outside system.

Every resolution is recorded at ``<step>/@unconfirmed[n]`` before it is acted on, so a crash while acting on
it resolves the same way, and a redrive that is itself interrupted counts as a new unconfirmed start.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from telo import paths
from telo.journal.model import Entry

REDRIVE: Final = "redrive"
PARK: Final = "park"
FAIL: Final = "fail"

ATTEMPT = paths.ATTEMPT_MARK
VERDICT = paths.RETRY_VERDICT
UNCONFIRMED = paths.UNCONFIRMED


class _NotFound:
    def __repr__(self) -> str:
        return "NOT_FOUND"


NOT_FOUND: Final = _NotFound()
"""What a ``lookup(key)`` hook returns when the outside system has no record of the effect."""

Lookup = Callable[[str], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class EffectPolicy:
    """``implicit`` marks the built-in kinds' redrive: re-entering a wait or a composite body IS how they
    resume (their own effects are journaled step by step), so it is not an operator-visible choice and is
    not recorded."""

    mode: str = REDRIVE
    lookup: Lookup | None = None
    implicit: bool = False


unconfirmed_path = paths.unconfirmed_path


@dataclass(frozen=True, slots=True)
class EffectState:
    """What the journal says about a step that has an intent and no receipt."""

    unconfirmed: bool
    next_attempt: int  # the attempt index to start at when not unconfirmed (or to redrive)
    due_at: int | None  # epoch ms before which that attempt must not start (its recorded backoff)
    resolutions: int  # how many unconfirmed resolutions are recorded (the next one's index)
    last_attempt: int  # the attempt whose outcome is unknown, when unconfirmed
    pending: int | None = None  # a resolution recorded after the last start, not yet acted on (skip / fail)

    @property
    def resolution_index(self) -> int:
        """Where this recovery's resolution is (or will be) recorded."""
        return self.pending if self.pending is not None else self.resolutions


def effect_state(step: str, entries: Mapping[str, Entry], run: str) -> EffectState:
    """Read the step's intent, start markers, verdicts and resolutions (all direct children of ``step``).

    Starts are the intent (attempt 0), ``@attempt[k]`` and ``@redrive[n]``; a resolution recorded after the
    last start is still to be acted on (a crash may fall between recording a decision and acting on it)."""
    prefix = step + "/"
    intent = entries.get(paths.inputs_path(step))
    last_start = intent.seq or 0 if intent is not None else 0
    last_start_attempt = 0
    last_verdict = -1
    verdict_attempt = -1
    verdict_due: int | None = None
    resolutions = 0
    resolved: list[tuple[int, int]] = []  # (seq, index) of every recorded resolution
    for path, entry in entries.items():
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix):]
        if "/" in rest:
            continue
        seg = paths.parse(rest)[0]
        seq = entry.seq or 0
        if seg.index is None:
            continue
        if seg.name == ATTEMPT and seq > last_start:
            last_start, last_start_attempt = seq, seg.index
        elif seg.name == paths.REDRIVE_MARK and seq > last_start:
            last_start = seq  # a redrive re-executes the attempt that was interrupted
        elif seg.name in (VERDICT, paths.RETRY) and seq > last_verdict:
            last_verdict, verdict_attempt = seq, seg.index
            value = entry.decode(run)
            due = value.get("dueAt") if isinstance(value, Mapping) else value
            verdict_due = due if isinstance(due, int) else None
        elif seg.name == UNCONFIRMED:
            resolutions = max(resolutions, seg.index + 1)
            resolved.append((seq, seg.index))
    if last_verdict > last_start:
        return EffectState(False, verdict_attempt + 1, verdict_due, resolutions, -1)
    pending = max((r for r in resolved if r[0] > last_start), default=None)
    return EffectState(True, last_start_attempt, None, resolutions, last_start_attempt,
                       pending[1] if pending is not None else None)


def describe_resolution(value: Any) -> str:
    if not isinstance(value, Mapping):
        return str(value)
    return f"{value.get('action')} (by {value.get('by', '?')})"
