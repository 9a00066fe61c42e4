"""Journal entries and run records (spec §5.2; reference §7-§8).

An :class:`Entry` is one record of a run's append-only log. Its value is kept as TEXT exactly as stored —
canonical typed-frame text under codec version ``v`` (1 or 2), or, for a legacy entry (``v is None``), the
plain JSON the store wrote before codecs existed — and decoded only on request, so a store never interprets a
value and a value crosses the journal only through :mod:`telo.values`.

``value is None`` means the step produced NOTHING, which differs from a JSON ``null`` (whose text is
``"null"``): absence belongs to the entry, not to a value (§5.2).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from telo.errors import Code, JournalCorrupt
from telo.journal.stored import CODEC_VERSION as CODEC_VERSION  # (moved there with the writer)
from telo.journal.stored import NO_VALUE as NO_VALUE  # (moved there; imported from here everywhere)
from telo.journal.stored import READABLE_VERSIONS as READABLE_VERSIONS
from telo.journal.stored import TYPED, Writer
from telo.journal.stored import decode_stored as decode_stored
from telo.values import encode_frame

# The decisions the upstream runtime records and reads back (reference §4): written by a journal's writer, so in
# plain JSON for a runtime that predates the codec (telo.journal.compat). Every other decision is telo's own
# record, which no upstream runtime reads: always a typed frame, whose exact types telo needs back.
UPSTREAM_DECISIONS: Final = frozenset({"inputs", "predicate", "condition", "switch", "value", "collection"})

EntryKind = Literal["step", "decision"]
RunStatus = Literal["scheduled", "running", "parked", "completed", "failed", "cancelled"]
STATUSES: Final[tuple[str, ...]] = ("scheduled", "running", "parked", "completed", "failed", "cancelled")
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class Entry:
    """One journal entry. ``seq`` is assigned by the store: per run, strictly increasing in write order; ``at``
    (epoch ms) is when the store wrote it, from the store's clock, unless the appended entry carries one (a fork's
    copies keep the original's) — None for an entry written before entries had times (an upstream journal)."""

    path: str
    kind: EntryKind
    value: str | None = None
    v: int | None = CODEC_VERSION
    decision: str | None = None
    target: Mapping[str, str] | None = None
    seq: int | None = None
    at: int | None = None

    @classmethod
    def step(cls, path: str, target: Mapping[str, str] | None, value: Any = NO_VALUE, *,
             writer: Writer = TYPED) -> Entry:
        """A step entry written on completion; ``target`` is ``{kind, name, module?}`` (None for a delivery)."""
        if writer is TYPED:
            return cls(path, "step", encode_value(value), CODEC_VERSION, None, _target(target))
        text, v = writer.stored(value)
        return cls(path, "step", text, v, None, _target(target))

    @classmethod
    def decided(cls, path: str, decision: str, value: Any, *, writer: Writer = TYPED) -> Entry:
        """A decision entry; ``writer`` writes only the :data:`UPSTREAM_DECISIONS` (telo's own: typed frames)."""
        if writer is TYPED or decision not in UPSTREAM_DECISIONS:
            return cls(path, "decision", encode_value(value), CODEC_VERSION, decision, None)
        text, v = writer.stored(value)
        return cls(path, "decision", text, v, decision, None)

    def with_seq(self, seq: int) -> Entry:
        return replace(self, seq=seq)

    def decode(self, run: str) -> Any:
        """The entry's value as a domain value, or :data:`NO_VALUE` (reading rules of §5.2)."""
        return decode_stored(self.value, self.v, run=run, path=self.path)

    def same_record(self, other: Entry) -> bool:
        """Equal apart from the store-assigned ``seq`` and ``at`` (what converging racing writers compare)."""
        return (self.path == other.path and self.kind == other.kind and self.value == other.value
                and self.v == other.v and self.decision == other.decision and self.target == other.target)

    def to_json(self) -> dict[str, Any]:
        """The upstream NDJSON ``entry`` object ([N] shape: value is the frame text as a JSON string)."""
        out: dict[str, Any] = {"path": self.path, "kind": self.kind}
        if self.decision is not None:
            out["decision"] = self.decision
        if self.target is not None:
            out["target"] = dict(self.target)
        if self.v is not None:
            out["v"] = self.v
            if self.value is not None:
                out["value"] = self.value
        elif self.value is not None:
            out["value"] = json.loads(self.value)
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], *, run: str, seq: int | None = None) -> Entry:
        """Read an upstream NDJSON ``entry`` object (legacy, v1 or v2). Raises JournalCorrupt on a bad shape."""
        path, kind = obj.get("path"), obj.get("kind")
        if not isinstance(path, str) or kind not in ("step", "decision"):
            raise JournalCorrupt(
                f"journal entry of run {run!r} has no valid path/kind: {json.dumps(obj)[:200]}",
                data={"run": run},
            )
        v = obj.get("v")
        raw = obj.get("value", _MISSING)
        if raw is _MISSING:
            value = None
        elif v is None:
            value = json.dumps(raw, ensure_ascii=False, separators=(",", ":"))  # legacy: plain JSON
        elif isinstance(raw, str):
            value = raw
        else:
            raise JournalCorrupt(
                f"journal entry {path!r} of run {run!r} carries codec v{v} but its value is not frame text",
                data={"run": run, "path": path},
            )
        if v is not None and (type(v) is not int):
            raise JournalCorrupt(
                f"journal entry {path!r} of run {run!r} has a non-integer codec version {v!r}",
                data={"run": run, "path": path},
            )
        target = obj.get("target")
        decision = obj.get("decision")
        return cls(
            path,
            kind,
            value,
            v,
            decision if isinstance(decision, str) else None,
            _target(target) if isinstance(target, Mapping) else None,
            seq,
        )


_MISSING: Final = object()


def _target(target: Mapping[str, Any] | None) -> Mapping[str, str] | None:
    if target is None:
        return None
    out = {k: str(target[k]) for k in ("kind", "name", "module") if target.get(k) is not None}
    return out


def encode_value(value: Any) -> str | None:
    """Frame text for a value; ``None`` for :data:`NO_VALUE`. Raises TypedFrameUnencodable."""
    if value is NO_VALUE:
        return None
    return encode_frame(value)


@dataclass(frozen=True, slots=True)
class Parked:
    """Where a parked run waits (§5.2): ``path`` is where a resume re-enters and a delivery writes."""

    path: str
    resource: str | None = None
    token: str | None = None
    at: int | None = None  # epoch ms when it becomes due with no delivery
    reason: str | None = None  # why, for an operator (telo extension; e.g. an unconfirmed effect)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path}
        for k in ("resource", "token", "at", "reason"):
            val = getattr(self, k)
            if val is not None:
                out[k] = val
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Parked:
        return cls(
            str(obj["path"]),
            obj.get("resource"),
            obj.get("token"),
            obj.get("at") if isinstance(obj.get("at"), int) else None,
            obj.get("reason"),
        )


@dataclass(frozen=True, slots=True)
class Claim:
    """Who may execute a run until when. ``holder`` is a :class:`telo.journal.claims.Holder` text."""

    holder: str
    until: int  # epoch ms


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run record (§5.2 plus the fields the upstream stores add; reference §15.1)."""

    run: str
    status: str
    due_at: int | None = None
    parked: Parked | None = None
    inputs: str | None = None  # typed-frame text (or legacy JSON when inputs_v is None)
    inputs_v: int | None = None
    result: str | None = None
    result_v: int | None = None
    error: Mapping[str, Any] | None = None  # {code, message}
    collapsed_regions: int | None = None
    collapse_reasons: tuple[str, ...] | None = None
    replayed_steps: int | None = None
    manifest_digest: str | None = None
    digest_scope: str | None = None
    workflow: str | None = None  # telo extension: the workflow resource, for listing and filtering
    created_at: int | None = None  # telo extension: epoch ms of admission
    updated_at: int | None = None  # telo extension: epoch ms of the last lifecycle change
    claim: Claim | None = None
    epoch: int = 0  # telo extension: bumped by each restore (see telo.journal.eventlog)
    # telo extension: the fencing token of the run's latest claim grant (telo.journal.claims "Fencing"); kept
    # when the claim is released, so the next grant's token is greater than every one before it
    fence: int = 0
    # telo extension (issue 16): the Local.Queue the run was admitted to, and its concurrency key's value
    # (evaluated once at admission; replay never re-evaluates it). None: not queued (every upstream row).
    queue: str | None = None
    queue_key: str | None = None
    # telo extension (issue 16): a queued run's priority (lower first, None reads 0; evaluated at admission) and
    # the journal's time of its first grant — the start a rateLimit counts (a re-grant never moves it)
    priority: int | None = None
    started_at: int | None = None
    # telo extension (issue 16 step 4, telo.journal.keyed): the queue's dedupKey or singleton key (one live run per
    # key) and its debounce key (one unstarted run per key), evaluated once at admission
    dedup_key: str | None = None
    debounce_key: str | None = None
    # Set by a store that read the record but found part of it damaged (a column that is not JSON, a file line
    # that does not parse): what and where (ERR_DURABLE_JOURNAL_CORRUPT). The damaged fields read as None; the
    # run is listed, shown and can be cancelled, but no worker executes it (issue 12: corruption is isolated).
    corrupt: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def decoded_inputs(self) -> Any:
        return decode_stored(self.inputs, self.inputs_v, run=self.run, path="<run inputs>")

    def decoded_result(self) -> Any:
        return decode_stored(self.result, self.result_v, run=self.run, path="<run result>")


@dataclass(frozen=True, slots=True)
class Admission:
    """What :meth:`Store.admit` creates: the initial record of a run."""

    run: str
    status: str = "running"
    due_at: int | None = None
    inputs: str | None = None
    inputs_v: int | None = None
    workflow: str | None = None
    manifest_digest: str | None = None
    digest_scope: str | None = None
    queue: str | None = None  # issue 16: a queued admission is `scheduled`, due at its admission time
    queue_key: str | None = None
    priority: int | None = None  # issue 16: the queue's priority of the run (lower first), None: the default 0
    # issue 16 step 4 (telo.journal.keyed): admitted unless a live run of the queue has ``dedup_key`` — unless
    # ``supersede``, which cancels that run first; an unstarted run with ``debounce_key`` takes these inputs
    dedup_key: str | None = None
    debounce_key: str | None = None
    supersede: bool = False

    @classmethod
    def of(
        cls,
        run: str,
        *,
        status: str = "running",
        due_at: int | None = None,
        inputs: Any = NO_VALUE,
        workflow: str | None = None,
        manifest_digest: str | None = None,
        digest_scope: str | None = None,
        queue: str | None = None,
        queue_key: str | None = None,
        priority: int | None = None,
        dedup_key: str | None = None,
        debounce_key: str | None = None,
        supersede: bool = False,
        writer: Writer = TYPED,
    ) -> Admission:
        text, v = writer.stored(inputs)
        return cls(
            run,
            status,
            due_at,
            text,
            v,
            workflow,
            manifest_digest,
            digest_scope,
            queue,
            queue_key,
            priority,
            dedup_key,
            debounce_key,
            supersede,
        )

    @property
    def keyed(self) -> bool:
        """A second admission of its key is decided by the store (telo.journal.keyed), not grouped with others."""
        return self.dedup_key is not None or self.debounce_key is not None

    def record(self, now_ms: int, claim: Claim | None = None) -> RunRecord:
        """The run record this admission creates at ``now_ms`` (what every store writes on admit), claimed by
        ``claim`` when the store writes the first claim with the row."""
        return RunRecord(
            run=self.run,
            status=self.status,
            due_at=self.due_at,
            inputs=self.inputs,
            inputs_v=self.inputs_v,
            workflow=self.workflow,
            manifest_digest=self.manifest_digest,
            digest_scope=self.digest_scope,
            created_at=now_ms,
            updated_at=now_ms,
            claim=claim,
            fence=0 if claim is None else 1,
            queue=self.queue,
            queue_key=self.queue_key,
            priority=self.priority,
            dedup_key=self.dedup_key,
            debounce_key=self.debounce_key,
        )


@dataclass(frozen=True, slots=True)
class AdmitResult:
    """``record``: the run admitted, else the one found — the same id, or a live run holding the admission's
    key (``record.run`` names it); ``superseded``: the runs a ``supersede`` admission cancelled."""

    admitted: bool
    record: RunRecord
    superseded: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run settles (``completed``, ``failed`` or ``cancelled``)."""

    status: str
    result: str | None = None
    result_v: int | None = None
    error: Mapping[str, Any] | None = None
    collapsed_regions: int = 0
    collapse_reasons: tuple[str, ...] = ()
    replayed_steps: int = 0

    @classmethod
    def completed(
        cls,
        result: Any,
        *,
        collapsed_regions: int = 0,
        collapse_reasons: tuple[str, ...] = (),
        replayed_steps: int = 0,
        writer: Writer = TYPED,
    ) -> Outcome:
        text, v = writer.stored(result)
        return cls(
            "completed",
            text,
            v,
            None,
            collapsed_regions,
            collapse_reasons,
            replayed_steps,
        )

    @classmethod
    def failed(cls, code: str, message: str, **counts: Any) -> Outcome:
        # str(): a Code member becomes the exact str the journal's value domain takes
        return cls("failed", None, None, {"code": str(code), "message": message}, **counts)

    @classmethod
    def cancelled(cls, reason: str = "cancelled") -> Outcome:
        return cls("cancelled", None, None, {"code": Code.DURABLE_RUN_CANCELLED.value, "message": reason})


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Listing runs for the CLI: newest first, paged by an opaque ``after`` cursor."""

    status: str | None = None
    workflow: str | None = None
    since: int | None = None  # epoch ms; runs created at or after
    limit: int = 50
    after: str | None = None  # cursor from RunPage.next


@dataclass(frozen=True, slots=True)
class RunPage:
    runs: list[RunRecord] = field(default_factory=list)
    next: str | None = None
