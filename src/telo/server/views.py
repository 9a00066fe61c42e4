"""What the dashboard shows and does, read from and written to a journal store.

Every function here is synchronous and blocks on the store (a SQLite read, a PostgreSQL round trip); the web
layer (:mod:`telo.server.app`) calls them through a thread pool so the event loop never waits on the journal.
Values leave in the plain encoding (spec §6.4), exactly as ``telo status --json`` prints them, and every read
and action goes through :mod:`telo.operations`, so the JSON API and the pages agree with the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from telo import paths
from telo.clock import SYSTEM_CLOCK
from telo.durable.messages import inbox_token
from telo.durable.waits import recorded_schema
from telo.errors import Code, TeloError
from telo.journal import eventlog
from telo.journal.eventlog import Event, EventKind
from telo.journal.model import NO_VALUE, STATUSES, RunFilter, RunRecord
from telo.journal.redact import redact
from telo.journal.store import Store
from telo.kinds import schedule_ledger
from telo.operations import actions, runs
from telo.operations.runs import RunView
from telo.server import console
from telo.server.console import rfc3339

PAGE_SIZE: Final = 50
MAX_PAGE_SIZE: Final = 500
# Counting runs per status reads the run list (the store protocol has no COUNT); past this many runs the
# counts stop and the page says so, so a huge journal cannot make every page load scan it all.
COUNT_CAP: Final = 5_000
VALUE_PREVIEW: Final = 160  # characters of a value shown inline in the timeline before it folds away


def _plain(value: Any) -> Any:
    from telo.values import to_plain

    return to_plain(value)


def _decoded(read: Callable[[], Any]) -> dict[str, Any]:
    """``{"value": plain}``, ``{}`` for no value, or ``{"error": ...}`` when the stored text does not decode —
    a dashboard must still show a run whose journal it cannot fully read."""
    try:
        value = read()
    except TeloError as exc:
        return {"error": {"code": exc.code, "message": exc.message}}
    return {} if value is NO_VALUE else {"value": _plain(value)}


def run_summary(record: RunRecord) -> dict[str, Any]:
    """One row of the runs list."""
    out: dict[str, Any] = {"run": record.run, "status": record.status, "workflow": record.workflow,
                           "createdAt": rfc3339(record.created_at), "updatedAt": rfc3339(record.updated_at)}
    if record.due_at is not None:
        out["dueAt"] = rfc3339(record.due_at)
    if record.parked is not None:
        out["parked"] = _parked(record)
    if record.error:
        out["error"] = dict(record.error)
    if record.corrupt is not None:
        out["corrupt"] = {"code": Code.DURABLE_JOURNAL_CORRUPT.value, "message": record.corrupt}
    return out


def _parked(record: RunRecord) -> dict[str, Any]:
    assert record.parked is not None
    parked = record.parked.to_json()
    if "at" in parked:
        parked["at"] = rfc3339(parked["at"])
    return parked


def list_runs(store: Store, *, status: str | None = None, workflow: str | None = None, after: str | None = None,
              limit: int = PAGE_SIZE) -> dict[str, Any]:
    """One page of runs, newest first, with the cursor of the next page (None on the last)."""
    if status is not None and status not in STATUSES:
        raise TeloError(Code.INVALID_VALUE, f"unknown status {status!r}", hint=f"use one of {', '.join(STATUSES)}")
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    page = runs.list_runs(store, RunFilter(status=status, workflow=workflow or None, limit=limit, after=after or None))
    return {"runs": [run_summary(r) for r in page.runs], "next": page.next, "status": status,
            "workflow": workflow or None, "limit": limit}


def count_by_status(store: Store, *, workflow: str | None = None, cap: int = COUNT_CAP) -> dict[str, Any]:
    """Runs per status (every status listed, zeros included); ``complete`` is False once ``cap`` runs were
    counted and the rest were not."""
    counts = dict.fromkeys(STATUSES, 0)
    seen = 0
    after: str | None = None
    while seen < cap:
        page = runs.list_runs(store, RunFilter(workflow=workflow or None, limit=min(500, cap - seen), after=after))
        for record in page.runs:
            counts[record.status] = counts.get(record.status, 0) + 1
        seen += len(page.runs)
        if page.next is None:
            return {"counts": counts, "total": seen, "complete": True}
        after = page.next
    return {"counts": counts, "total": seen, "complete": False}


def _ledger_of(record: RunRecord) -> str | None:
    """The schedule whose ledger ``record`` is (:mod:`telo.kinds.schedule_ledger`), or None."""
    parked = record.parked
    if parked is None or parked.path != schedule_ledger.LEDGER_PATH or parked.resource is None:
        return None
    return parked.resource if record.run == schedule_ledger.ledger_id(parked.resource) else None


def run_detail(store: Store, run: str) -> dict[str, Any]:
    """A run's record with its inputs and result in the plain encoding, its counts and zone reports, and which
    operator actions apply to it now."""
    # Lenient: an unreadable journal shows up in the timeline; the summary stays available.
    view = runs.status(store, run, lenient=True)
    record = view.record
    out = run_summary(record)
    # The epoch counts restores (eventlog: each restore starts a new one); the log is its authority.
    out["epoch"] = view.epoch if view.epoch is not None else record.epoch
    if view.origin is not None:  # a fork: where from, and whose idempotency keys it carries if not its own
        out.update(forkedFrom=view.origin.source, forkCheckpoint=view.origin.checkpoint)
        if view.origin.keys is not None:
            out["keepsKeysOf"] = view.origin.keys
    if record.claim is not None:
        out["claim"] = {"holder": record.claim.holder, "until": rfc3339(record.claim.until), "fence": record.fence}
    if view.queue is not None:  # issue 16: its queue and key; waiting, its position (telo.operations.queues)
        out["queue"] = view.queue
    out["inputs"] = _decoded(record.decoded_inputs)
    if record.terminal:
        out["result"] = _decoded(record.decoded_result)
        out["replayedSteps"] = record.replayed_steps or 0
        # Zone reports reach the record as counts: how many regions collapsed, and why (spec §8.3).
        out["collapsedRegions"] = record.collapsed_regions or 0
        out["collapseReasons"] = list(record.collapse_reasons or ())
    if record.manifest_digest is not None:
        out["manifestDigest"] = record.manifest_digest
    out["unconfirmedEffects"] = _unconfirmed(view)
    held = view.held
    out["held"] = held
    # A run parked on a Durable.Receive (its token inbox:<run>:<topic>) is moved by a message, not a delivery.
    inbox = _inbox_topic(record)
    deliverable = (record.status == "parked" and record.parked is not None and record.parked.token is not None
                   and inbox is None)
    # A durable schedule's ledger (issue 17) is a run parked where nothing is written: its page links to the
    # schedule's, and offers no cancel or resume (the schedule's page pauses and resumes the schedule).
    ledger = _ledger_of(record)
    if ledger is not None:
        out["schedule"] = ledger
    out["actions"] = {
        "deliver": record.parked.token if deliverable and record.parked is not None else None,
        # The schema the Await recorded for its payload: shown by the deliver form, enforced on delivery.
        "deliverSchema": _plain(recorded_schema(store, record)) if deliverable else None,
        "cancel": not record.terminal and ledger is None,
        "resume": record.status == "parked" and not held and ledger is None,
        "resumeForce": held,
        "resolve": _awaiting_answer(record),
        # Messages to a run that has not settled (telo send; a settled one refuses them), the topic prefilled
        # with the one a receive waits on.
        "send": not record.terminal and ledger is None,
        "sendTopic": inbox,
    }
    return out


def _inbox_topic(record: RunRecord) -> str | None:
    """The topic a receive of the run is parked on (telo.durable.messages.inbox_token), or None."""
    parked = record.parked
    prefix = inbox_token(record.run, "")
    if record.status != "parked" or parked is None or not parked.token or not parked.token.startswith(prefix):
        return None
    return parked.token[len(prefix):] or None


def _awaiting_answer(record: RunRecord) -> list[dict[str, Any]]:
    """The unconfirmed effects the run waits on an operator's answer for: it parks at ``<step>/@unconfirmed[n]``
    (durable/unconfirmed.py), one at a time; ``telo resolve`` answers it."""
    parked = record.parked
    if record.status != "parked" or parked is None:
        return []
    try:
        if paths.parse(parked.path)[-1].name != paths.UNCONFIRMED:
            return []
    except TeloError:
        return []
    return [{"step": paths.parent(parked.path) or parked.path, "path": parked.path, "resource": parked.resource,
             "reason": parked.reason}]


def _unconfirmed(view: RunView) -> list[dict[str, Any]]:
    """Every recorded resolution of an unconfirmed effect (``<step>/@unconfirmed[n]``), as ``telo status``."""
    return [{"step": u.step, **_decoded(u.resolution)} for u in view.unconfirmed]


# --- the timeline -----------------------------------------------------------------------------------------

#: What each timeline category means, for the page's legend (and docs/dashboard.md).
CATEGORIES: Final[Mapping[str, str]] = {
    "inputs": "the workflow's resolved inputs",
    "intent": "a step's inputs, recorded before it executes (an effect intent)",
    "step": "a step's result (an effect receipt)",
    "decision": "a recorded decision (branch, loop turn, guard, value)",
    "wait": "a wait's pinned token, deadline or wake time",
    "park": "where the run waits now (interrupt)",
    "delivery": "a payload delivered to a parked run",
    "retry": "a retry verdict or attempt mark (retry[k], @retry, @attempt)",
    "failure": "a step's failure receipt: the error its effect ended with (@failed)",
    "resolution": "an unconfirmed effect's resolution (@unconfirmed)",
    "redrive": "the re-execution a resolution decided (@redrive)",
    "resume": "an operator resume",
    "digest": "the manifest digest, a hold on a changed manifest, or its acceptance",
    "restore": "a restore to a checkpoint (a new epoch)",
    "fork": "this run was forked from another",
    "snapshot": "a compaction snapshot",
}

_WAIT_NAMES: Final = frozenset({paths.WAKE_AT, paths.TOKEN, paths.DEADLINE})
_RETRY_NAMES: Final = frozenset({paths.RETRY_VERDICT, paths.ATTEMPT_MARK})
_DIGEST_NAMES: Final = frozenset({"@digest", "@held", "@manifest"})


def category(event: Event) -> str:
    """The timeline category of one event (see :data:`CATEGORIES`)."""
    if event.kind is EventKind.SNAPSHOT:
        return "snapshot"
    if event.kind is EventKind.INTERRUPT:
        return "park"
    first = event.path.split("/", 1)[0]
    if first.startswith("@restore"):
        return "restore"
    if first == eventlog.FORKED:
        return "fork"
    entry = event.entry
    if entry is not None and entry.kind == "step":
        return "step" if entry.target is not None else "delivery"
    try:
        last = paths.parse(event.path)[-1]
    except TeloError:
        return "decision"
    if event.kind is EventKind.RETRY_DECISION or last.name in _RETRY_NAMES:
        return "retry"
    if last.name == paths.FAILED:
        return "failure"
    if last.name == paths.UNCONFIRMED:
        return "resolution"
    if last.name == paths.REDRIVE_MARK:
        return "redrive"
    if event.path.startswith(f"{paths.OVERRIDE}/{paths.RESUME}/"):
        return "resume"
    if last.name in _DIGEST_NAMES or first in _DIGEST_NAMES or first.split("[", 1)[0] in _DIGEST_NAMES:
        return "digest"
    if event.kind is EventKind.EFFECT_INTENT:
        return "intent"
    if event.path == paths.WORKFLOW_INPUTS:
        return "inputs"
    if last.name in _WAIT_NAMES:
        return "wait"
    return "decision"


def timeline(store: Store, run: str) -> dict[str, Any]:
    """The run's journal in log order, each entry with its category, its value in the plain encoding and its
    time (``at``: when the store wrote it, or for an entry without a time the one its value records, if any); a
    parked run ends with its park (at the record's last change). ``steps`` is the steps' overview with their
    durations (:func:`telo.server.console.steps`), ``lastSeq`` the log's last position, ``spanMs`` how long the
    entries span and ``scale`` what the timeline is laid out over (``time``, or ``log`` positions)."""
    record, found = runs.events(store, run)
    out: list[dict[str, Any]] = []
    times: dict[int, int] = {}  # each entry's write time, by seq
    for event in found:
        item: dict[str, Any] = {"seq": event.seq, "epoch": event.epoch, "event": event.kind.value,
                                "category": category(event), "path": event.path}
        entry = event.entry
        if entry is not None:
            if entry.target is not None:
                item["target"] = dict(entry.target)
            if entry.decision is not None:
                item["decision"] = entry.decision
            item.update(_decoded(partial(entry.decode, run)))
            if entry.at is not None and event.seq is not None:
                times[event.seq] = entry.at
            at = entry.at if entry.at is not None else console.recorded_at(item)
            if at is not None:
                item["at"] = rfc3339(at)
        if event.idempotency_key is not None:
            item["idempotencyKey"] = event.idempotency_key
        if event.kind is EventKind.INTERRUPT and record.parked is not None:
            item["parked"] = _parked(record)
            if record.updated_at is not None:  # parking is the record's last change until something lifts it
                item["at"] = rfc3339(record.updated_at)
        out.append(item)
    last_seq = max((e["seq"] for e in out if isinstance(e["seq"], int)), default=0)
    now = SYSTEM_CLOCK.now_ms()
    overview = console.steps(out, record, now, console.retry_budgets(record), times)
    span = console.span_ms(times, overview, record, now)
    return {"run": run, "status": record.status, "createdAt": rfc3339(record.created_at),
            "updatedAt": rfc3339(record.updated_at), "lastSeq": last_seq, "spanMs": span,
            "scale": "time" if console.in_time(overview, span) else "log", "steps": overview, "events": out}


# --- operator actions -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What an action did: ``done`` False means it changed nothing (answered 409), ``data`` is its report."""

    done: bool
    data: dict[str, Any]
    run: str | None = None


def deliver(store: Store, token: str, payload: Any) -> ActionResult:
    """Deliver a payload (a domain value) to the run parked on ``token`` (as ``telo deliver``)."""
    result = actions.deliver(store, token, payload)
    return ActionResult(result.delivered, result.to_json(), result.run)


def cancel(store: Store, run: str, reason: str) -> ActionResult:
    """Cancel a run that has not settled (as ``telo cancel``)."""
    out = actions.cancel(store, run, reason)
    return ActionResult(out.cancelled, {"run": run, "cancelled": out.cancelled, "status": out.status}, run)


def resume(store: Store, run: str, reason: str, *, force: bool = False) -> ActionResult:
    """Continue a parked run now (as ``telo resume [--force]``); refuses a held run without ``force``."""
    out = actions.resume(store, run, reason, SYSTEM_CLOCK.now_ms(), force=force)
    return ActionResult(out.resumed, {"run": run, **out.to_json()}, run)


def resolve(store: Store, run: str, path: str, action: str, value: Any = NO_VALUE) -> ActionResult:
    """Answer the unconfirmed effect at ``path``: redrive, skip with ``value`` as its result, or fail (as
    ``telo resolve``)."""
    out = actions.resolve(store, run, path, action, value, SYSTEM_CLOCK.now_ms())
    return ActionResult(True, _plain(dict(out)), run)


def checkpoints(store: Store, run: str) -> dict[str, Any]:
    """The states the run can be restored to or forked from (as ``telo runs checkpoints``), oldest first."""
    found = runs.checkpoints(store, run)
    return {"run": run, "checkpoints": [{"seq": c.seq, "path": c.path, "epoch": c.epoch, "kind": c.kind}
                                        for c in found]}


def restore(store: Store, run: str, checkpoint: int | str, reason: str) -> ActionResult:
    """Roll the run back to ``checkpoint`` as a new epoch (as ``telo restore``)."""
    out = actions.restore(store, run, checkpoint, reason=reason)
    return ActionResult(True, {"run": run, "restored": True, "checkpoint": out.checkpoint, "epoch": out.epoch,
                               "status": out.status}, run)


def fork(store: Store, run: str, checkpoint: int | str, new_run: str | None, *,
         keep_keys: bool = False) -> ActionResult:
    """Copy the run's state at ``checkpoint`` into a new run (as ``telo fork [--run-id] [--keep-keys]``);
    ``run`` of the result is the new run."""
    out = actions.fork(store, run, checkpoint, new_run or None, keep_keys=keep_keys)
    note = actions.fork_keys_note(out.run, out.source, out.keys, keep=KEEP_KEYS_ASK)
    return ActionResult(True, {**out.to_json(), "note": note}, out.run)


# How the dashboard asks to keep the original's idempotency keys (telo fork --keep-keys): the fork form's
# checkbox, the JSON body's member of the same name.
KEEP_KEYS_FIELD: Final = "keepKeys"
KEEP_KEYS_ASK: Final = f"“keep the original idempotency keys” ticked ({KEEP_KEYS_FIELD}: true)"


MAX_BULK: Final = 500  # runs one bulk action may name (a page of the list holds at most MAX_PAGE_SIZE)


def bulk(store: Store, action: str, selected: list[str], reason: str, *, force: bool = False) -> dict[str, Any]:
    """Cancel or resume each run of ``selected`` in turn, as the single actions do (resume forces a held run
    only with ``force``): one result per run, in order, saying what happened — ``done``, the action's report,
    and for a refusal its reason (or ``error``: the code the operation raised, e.g. an unknown run)."""
    one: Callable[[str], ActionResult]
    if action == "cancel":
        one = partial(cancel, store, reason=reason)
    elif action == "resume":
        one = partial(resume, store, reason=reason, force=force)
    else:
        raise TeloError(Code.INVALID_VALUE, f"unknown bulk action {action!r}", hint="use cancel or resume")
    if not selected or len(selected) > MAX_BULK:
        raise TeloError(Code.INVALID_VALUE, f"select between 1 and {MAX_BULK} runs (got {len(selected)})")
    results: list[dict[str, Any]] = []
    for run in dict.fromkeys(selected):  # each run once, in the order given
        try:
            result = one(run)
        except TeloError as exc:
            error = {"code": exc.code, "message": redact(exc.message),
                     **({"hint": redact(exc.hint)} if exc.hint else {})}
            results.append({"run": run, "done": False, "error": error})
            continue
        results.append({**result.data, "run": run, "done": result.done})
    return {"action": action, "force": force, "done": sum(r["done"] for r in results), "results": results}
