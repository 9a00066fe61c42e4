"""The journal read as the event log of the event-log durability spec: typed events, recovery, snapshots and
compaction, time travel (restore, fork).

One log, two vocabularies (ARCHITECTURE §4): a run's entries ARE its events.

=============================  ======================================================================
event kind (event-log §1)      journal record
=============================  ======================================================================
effect_intent                  a step's ``inputs`` decision, written before the step executes; its
                               idempotency key is ``<run>/<step path>``
effect_receipt (+ transaction) a step entry, written on completion; or a ``failure`` decision at
                               ``<step>/@failed``: the receipt of an effect that failed (its outcome)
retry_decision                 a decision at a ``retry[k]`` or ``@retry…`` segment
interrupt                      the run record's park (status ``parked``)
snapshot                       a decision at ``@snapshot[<base>]`` holding the whole state
transaction                    every other decision; a restore (``@restore[k]``) or fork (``@forked``,
                               which also records whose keys the fork's steps carry: telo.journal.lineage)
stream_cursor                  a ``stream_cursor`` decision at ``<step>/@cursor[k]``: where a
                               ``Durable.Consume`` got to after batch ``k`` (telo.kinds.consume)
=============================  ======================================================================

**Epochs.** A restore never rewrites history (event-log §6): it appends ``@restore[k]`` naming a checkpoint,
and from then on the run's entries are stored under ``@epoch[k]/<path>``, so first-writer-wins holds per
epoch while the paths the engine sees stay the same. Epoch 0 stores paths unprefixed, exactly as upstream.
A record of an abandoned epoch (a writer that had not noticed the restore) is ignored by :func:`fold`. The
messages sent to the run (``@inbox/…``, telo.durable.messages) are its inputs, not its history: stored under no
epoch (a send need not know the epoch, so none races a restore into an abandoned one), kept by a restore, untaken
again where their receives came after the checkpoint (as Temporal's reset reapplies signals).

**Snapshots.** :func:`compact` appends ``@snapshot[<base>]`` holding every effective entry as of log
position ``base``, then truncates what it subsumes. :func:`fold` starts from the newest snapshot and applies
only records after its base, so a crash between the snapshot and the truncation changes nothing, and
recovery from the compacted log equals recovery from the full log.
"""

from __future__ import annotations

import enum
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace

from telo import faults, paths
from telo.clock import SYSTEM_CLOCK, Clock
from telo.errors import Code, JournalError
from telo.journal import keyed, lineage, rules
from telo.journal.lineage import Origin
from telo.journal.model import Admission, Entry, RunRecord
from telo.journal.snapshot_rows import entries_from_snapshot, snapshot_value, state_hash
from telo.journal.store import Store

SNAPSHOT = "snapshot"
RESTORE = "restore"
STREAM_CURSOR = "stream_cursor"  # a Durable.Consume's cursor decision
FORKED = lineage.FORKED
_SNAPSHOT_SEG = paths.reserved(SNAPSHOT)
_RESTORE_SEG = paths.reserved(RESTORE)
_EPOCH_SEG = paths.reserved("epoch")
_RETRY_SEG = paths.reserved("retry")
_INBOX_SEG = paths.reserved("inbox")


class EventKind(enum.StrEnum):
    TRANSACTION = "transaction"
    EFFECT_INTENT = "effect_intent"
    EFFECT_RECEIPT = "effect_receipt"
    RETRY_DECISION = "retry_decision"
    INTERRUPT = "interrupt"
    STREAM_CURSOR = "stream_cursor"
    SNAPSHOT = "snapshot"


@dataclass(frozen=True, slots=True)
class Event:
    """One typed event: ``seq`` is the log position (None for the interrupt read off the run record)."""

    run: str
    seq: int | None
    kind: EventKind
    path: str
    epoch: int = 0
    idempotency_key: str | None = None
    entry: Entry | None = None


@dataclass(frozen=True, slots=True)
class RunState:
    """Canonical state rebuilt from the log (event-log §4)."""

    run: str
    record: RunRecord | None
    entries: dict[str, Entry]  # logical path -> first effective entry
    epoch: int
    version: int  # the log position folded up to
    hash: str  # sha256 of the effective entries' content (seq excluded)
    origin: Origin | None = None  # a fork's provenance (telo.journal.lineage), None for any other run

    @property
    def key_run(self) -> str:
        """Whose id prefixes its steps' idempotency keys (event-log §2; a fork may keep its root's)."""
        return lineage.key_run(self.run, self.origin)

    def storage_path(self, path: str) -> str:
        return storage_path(self.epoch, path)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A state a run can be restored to or forked from: the state right after log position ``seq``."""

    seq: int
    path: str
    epoch: int
    kind: str


# --- paths ------------------------------------------------------------------------------------------------


def _first_segment(path: str) -> str:
    return path.split("/", 1)[0]


def storage_path(epoch: int, path: str) -> str:
    """Where an entry of ``epoch`` is stored (epoch 0: the path itself, as upstream writes it)."""
    if epoch == 0:
        return path
    return paths.extend(paths.step_path(_EPOCH_SEG, epoch), paths.parse(path))


def split_storage_path(stored: str) -> tuple[int, str]:
    """``(epoch, logical path)`` of a stored path."""
    if not stored.startswith(_EPOCH_SEG + "["):
        return 0, stored
    head = paths.parse(_first_segment(stored))[0]
    rest = paths.relative_to(stored, _first_segment(stored))
    return head.index or 0, paths.format(rest)


def _is_meta(path: str) -> bool:
    first = _first_segment(path)
    return first.startswith((_SNAPSHOT_SEG, _RESTORE_SEG)) or first == FORKED


def idempotency_key(run: str, step_path: str) -> str:
    """The stable key of a step execution: identical on every attempt and after a crash (event-log §2)."""
    return f"{run}/{step_path}"


# --- typed events -----------------------------------------------------------------------------------------


def classify(entry: Entry) -> EventKind:
    first = _first_segment(entry.path)
    if first.startswith(_SNAPSHOT_SEG):
        return EventKind.SNAPSHOT
    if first.startswith(_RESTORE_SEG) or first == FORKED:
        return EventKind.TRANSACTION
    _, logical = split_storage_path(entry.path)
    last = paths.parse(logical)[-1]
    if entry.kind == "step":
        return EventKind.EFFECT_RECEIPT if entry.target is not None else EventKind.TRANSACTION
    if entry.decision == "failure" and last.name == paths.FAILED:
        return EventKind.EFFECT_RECEIPT
    if (last.name == paths.RETRY and last.index is not None) or last.name.startswith(_RETRY_SEG):
        return EventKind.RETRY_DECISION
    if entry.decision == "inputs" and logical != paths.WORKFLOW_INPUTS:
        return EventKind.EFFECT_INTENT
    if entry.decision == STREAM_CURSOR:
        return EventKind.STREAM_CURSOR
    return EventKind.TRANSACTION


def events(store: Store, run: str) -> list[Event]:
    """The run's log as typed events, in sequence order, plus an interrupt while it is parked."""
    out: list[Event] = []
    records = store.read_entries(run)
    keyed = lineage.key_run(run, lineage.origin(run, records))  # the keys the effects were handed
    for entry in records:
        kind = classify(entry)
        epoch, logical = (0, entry.path) if _is_meta(entry.path) else split_storage_path(entry.path)
        key = None
        if kind is EventKind.EFFECT_INTENT:
            key = idempotency_key(keyed, paths.parent(logical) or logical)
        elif kind is EventKind.EFFECT_RECEIPT:
            key = idempotency_key(keyed, logical if entry.kind == "step" else paths.parent(logical) or logical)
        out.append(Event(run, entry.seq, kind, logical, epoch, key, entry))
    record = store.read_run(run)
    if record is not None and record.status == "parked" and record.parked is not None:
        out.append(Event(run, None, EventKind.INTERRUPT, record.parked.path))
    return out


# --- recovery ---------------------------------------------------------------------------------------------


def fold(run: str, records: Sequence[Entry]) -> tuple[dict[str, Entry], int, int]:
    """Effective ``(entries by logical path, epoch, version)`` of a log (see the module docstring)."""
    ordered = sorted(records, key=lambda e: e.seq or 0)
    entries: dict[str, Entry] = {}
    epoch = 0
    base = 0
    snapshots = [e for e in ordered if _first_segment(e.path).startswith(_SNAPSHOT_SEG)]
    if snapshots:
        newest = max(snapshots, key=lambda e: entries_from_snapshot(run, e)[2])
        entries, epoch, base = entries_from_snapshot(run, newest)
    version = base
    for rec in ordered:
        seq = rec.seq or 0
        if seq <= base or rec in snapshots:
            continue
        version = max(version, seq)
        first = _first_segment(rec.path)
        if first.startswith(_RESTORE_SEG):
            data = rec.decode(run)
            checkpoint, epoch = int(data["checkpoint"]), int(data["epoch"])
            inbox = {p: e for p, e in entries.items() if _first_segment(p) == _INBOX_SEG}  # (module docstring)
            entries = {**inbox, **fold(run, [r for r in ordered if (r.seq or 0) <= checkpoint])[0]}
            continue
        if first == FORKED:
            continue
        rec_epoch, logical = split_storage_path(rec.path)
        # A message is the run's input, not its history: stored under no epoch, so a send never has to know
        # the epoch and cannot race a restore into an abandoned one (a copy under an epoch, from journals of
        # before that, counts too).
        if (rec_epoch == epoch or _first_segment(logical) == _INBOX_SEG) and logical not in entries:
            entries[logical] = replace(rec, path=logical)
    return entries, epoch, version


def recover(store: Store, run: str, record: RunRecord | None = None) -> RunState:
    """Rebuild a run's canonical state: newest snapshot plus the records after it (event-log §4). ``record``:
    the run's record, when the caller has just read it (not read again)."""
    if record is None:
        record = store.read_run(run)
    records = store.read_entries(run)
    entries, epoch, version = fold(run, records)
    return RunState(run, record, entries, epoch, version, state_hash(entries), lineage.origin(run, records))


def compact(store: Store, run: str, *, clock: Clock = SYSTEM_CLOCK) -> Entry:
    """Append a snapshot of the run's state and truncate what it subsumes (event-log §4).

    Refused while another live holder executes the run. Safe against a crash at any point: until the
    truncation, the log holds both the snapshot and the records it subsumes, and :func:`fold` reads either.
    """
    record = _require(store, run)
    if rules.claim_is_live(record.claim, clock.now_ms()):
        raise JournalError(
            Code.RUN_BUSY,
            f"run {run!r} is being executed by {record.claim.holder if record.claim else '?'}; "
            "compacting it now could drop entries it is writing",
            hint="compact settled or parked runs, or wait until the holder's claim lapses",
            data={"run": run},
        )
    # In order: a message still committing (PostgreSQL draws its seq before the commit) is waited for, so no
    # entry below the truncation point is one this read did not see (Store.read_entries_in_order).
    records = store.read_entries_in_order(run)
    entries, epoch, version = fold(run, records)
    snapshot = Entry.decided(paths.step_path(_SNAPSHOT_SEG, version), SNAPSHOT,
                             snapshot_value(entries, epoch, version, lineage.origin(run, records)))
    stored = store.append(run, snapshot)
    faults.point("after-snapshot-append")
    store.truncate_before(run, version + 1)
    return stored


# --- time travel ------------------------------------------------------------------------------------------


def checkpoints(store: Store, run: str) -> list[Checkpoint]:
    """States the run can be restored to or forked from: its start (until compacted), each step entry
    (every epoch, so abandoned timelines stay reachable), and each snapshot."""
    _require(store, run)
    records = store.read_entries(run)
    out: list[Checkpoint] = []
    if not any(_first_segment(e.path).startswith(_SNAPSHOT_SEG) for e in records):
        out.append(Checkpoint(0, "(start)", 0, "start"))
    for e in records:
        first = _first_segment(e.path)
        if first.startswith(_SNAPSHOT_SEG):
            out.append(Checkpoint(e.seq or 0, e.path, 0, "snapshot"))
        elif e.kind == "step" and not _is_meta(e.path):
            epoch, logical = split_storage_path(e.path)
            out.append(Checkpoint(e.seq or 0, logical, epoch, "step"))
    return out


def _checkpoint_records(store: Store, run: str, checkpoint: int) -> list[Entry]:
    valid = {c.seq for c in checkpoints(store, run)}
    if checkpoint not in valid:
        raise JournalError(
            Code.CHECKPOINT_NOT_FOUND,
            f"run {run!r} has no checkpoint {checkpoint}",
            hint=f"list the run's checkpoints with `telo runs checkpoints {shlex.quote(run)}` and pass one of "
            "their seq numbers",
            data={"run": run, "checkpoint": checkpoint},
        )
    return [e for e in store.read_entries(run) if (e.seq or 0) <= checkpoint]


def restore(
    store: Store, run: str, checkpoint: int, *, reason: str = "restored by operator", clock: Clock = SYSTEM_CLOCK
) -> RunState:
    """Roll a run back to a checkpoint as a NEW committed record (event-log §6).

    The run becomes ``running`` with no result, so the next execution continues from the restored state:
    the steps after the checkpoint execute again (in a new epoch), the ones before replay. A settled run whose
    queue's dedup key another live run holds now is refused (``ERR_DURABLE_RUN_EXISTS``, naming that run) before
    anything is written: live again, it would take the key back (:func:`telo.journal.keyed.refuse_taken_key`).
    """
    record = _require(store, run)
    if rules.claim_is_live(record.claim, clock.now_ms()):
        raise JournalError(
            Code.RUN_BUSY,
            f"run {run!r} is being executed right now; restoring under it would race its writes",
            hint="cancel the run or wait for it to park or settle, then restore",
            data={"run": run},
        )
    _checkpoint_records(store, run, checkpoint)
    keyed.refuse_taken_key(store, record)
    _, epoch, _ = fold(run, store.read_entries(run))
    new_epoch = epoch + 1
    store.append(
        run,
        Entry.decided(
            paths.step_path(_RESTORE_SEG, new_epoch),
            RESTORE,
            {"checkpoint": checkpoint, "epoch": new_epoch, "reason": reason, "at": clock.now_ms()},
        ),
    )
    try:
        store.update_run(run, status="running", result=None, result_v=None, error=None, parked=None, due_at=None)
    except Exception:  # a run admitted with the key since the check above? (the index refused the write)
        keyed.refuse_taken_key(store, record)
        raise
    return recover(store, run)


def fork(store: Store, run: str, checkpoint: int, new_run: str, *, keep_keys: bool = False) -> RunState:
    """Copy the run's state at a checkpoint into a new run, leaving the original untouched (event-log §6).

    The copy is admitted ``scheduled`` with no due time (so no worker takes a half-copied run), filled,
    marked ``@forked``, then made ``running``; repeating a fork that crashed midway completes it.
    ``keep_keys``: the ``@forked`` record says the copy's steps are keyed by the run whose keys ``run``'s are
    (``run`` itself, or the root it kept them from; event-log §2, telo.journal.lineage), not by ``new_run``.
    """
    source = _require(store, run)
    keys = lineage.key_run(run, lineage.origin(run, store.read_entries(run))) if keep_keys else None
    entries = fold(run, _checkpoint_records(store, run, checkpoint))[0]
    admitted = store.admit(
        Admission(
            new_run,
            "scheduled",
            None,
            source.inputs,
            source.inputs_v,
            source.workflow,
            source.manifest_digest,
            source.digest_scope,
        )
    )
    existing = store.read_entries(new_run)
    if not admitted.admitted and any(e.path == FORKED for e in existing):
        raise JournalError(
            Code.DURABLE_RUN_EXISTS,
            f"run {new_run!r} already exists",
            hint="choose another --run-id for the fork",
            data={"run": new_run},
        )
    if not admitted.admitted and (existing and admitted.record.status != "scheduled"):
        raise JournalError(
            Code.DURABLE_RUN_EXISTS,
            f"run {new_run!r} already exists and is not an unfinished fork",
            hint="choose another --run-id for the fork",
            data={"run": new_run},
        )
    for e in sorted(entries.values(), key=lambda e: e.seq or 0):
        store.append(new_run, replace(e, seq=None))
    store.append(new_run, Entry.decided(FORKED, "fork", Origin(run, checkpoint, keys).to_value()))
    store.update_run(new_run, status="running")
    return recover(store, new_run)


def _require(store: Store, run: str) -> RunRecord:
    record = store.read_run(run)
    if record is None:
        raise JournalError(
            Code.DURABLE_RUN_NOT_FOUND,
            f"no run {run!r} in this journal",
            hint="list the journal's runs with `telo runs list`",
            data={"run": run},
        )
    return record
