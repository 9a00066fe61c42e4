"""Queues as an operator sees them (issue 16; docs/proposals/admission-control.md "Visibility"): a queue's limits
(its manifest's, unless ``telo queues set`` overrides them in the journal), what holds its slots and what waits in
it (its journal's), and why one waiting run waits.

``telo queues list|show``, ``telo status`` of a queued run, the dashboard's queue pages and
``telo.testing.assert_never_more_than`` all read through here, so they count alike — by the rule the journal
grants by (:mod:`telo.journal.queues`): a run **holds a slot** while it is ``running`` under a live claim, and
while it is parked if the queue says ``holdSlotWhileParked``; a run **waits for a slot** while it is
``scheduled`` and due, ``running`` without a live claim (its worker crashed), or parked and due without holding
one. The journal records a queue's runs and the limits an operator overrode, not the manifest's: those come from
a manifest's ``Local.Queue`` (:class:`QueueConfig`, its overrides applied: the limits in effect); without one
(the dashboard, ``telo status --journal``) the counts are shown and which limit holds a run is not claimed.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from telo.errors import Code, TeloError
from telo.journal.claims import Holder
from telo.journal.model import RunRecord
from telo.journal.queue_overrides import LimitValues, QueueOverride
from telo.journal.queue_reads import SLOT_STATES, QueueSnapshot
from telo.journal.store import Store
from telo.manifest.nodes import Cel, Ref, Template

NOT_FOUND = Code.QUEUE_NOT_FOUND
# The fields QueueConfig reads; any other a Local.Queue declares is shown as written (`more`).
_READ = frozenset({"journal", "concurrency", "workerConcurrency", "concurrencyKey", "holdSlotWhileParked",
                   "rateLimit"})
Time = Callable[[int | None], Any]  # how a front end writes a time (epoch ms) in its JSON


def _ms(at: int | None) -> Any:
    return at


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """A ``Local.Queue``'s limits in effect (None: no such limit): as its manifest declares them or, when
    ``telo queues set`` overrides some (``override``), with those replaced — ``manifest`` then holds the declared
    ones. ``key``: the CEL source of ``concurrencyKey.key``; ``rate_period``: ``rateLimit.period`` as written (an
    override's as :func:`period_text` writes it); ``more``: the other fields it declares (``priority``, …), as
    written."""

    name: str
    journal: str
    concurrency: int | None = None
    worker_concurrency: int | None = None
    key: str | None = None
    key_limit: int | None = None
    hold_parked: bool = False
    rate_limit: int | None = None
    rate_period_ms: int | None = None
    rate_period: str | None = None
    more: Mapping[str, Any] = field(default_factory=dict)
    manifest: QueueConfig | None = None
    override: QueueOverride | None = None

    @property
    def declared(self) -> QueueConfig:
        """The limits as the manifest declares them."""
        return self if self.manifest is None else self.manifest

    @property
    def rate(self) -> tuple[int, int] | None:
        """(limit, period ms) for :meth:`Store.queue_snapshot`, or None without a ``rateLimit``."""
        if self.rate_limit is None or self.rate_period_ms is None:
            return None
        return self.rate_limit, self.rate_period_ms

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"concurrency": self.concurrency, "workerConcurrency": self.worker_concurrency}
        if self.key is not None:
            out["concurrencyKey"] = {"key": self.key, "limit": self.key_limit}
        out["holdSlotWhileParked"] = self.hold_parked
        if self.rate_limit is not None:
            out["rateLimit"] = {"limit": self.rate_limit, "period": self.rate_period}
        return {**out, **self.more}


def declared(value: Any) -> Any:
    """A manifest value as its author wrote it: an expression as its source text, a reference as its name."""
    if isinstance(value, Cel):
        return value.text
    if isinstance(value, Template):
        return "".join(p if isinstance(p, str) else "${{ " + p.text + " }}" for p in value.parts)
    if isinstance(value, Ref):
        return value.text
    if isinstance(value, Mapping):
        return {str(k): declared(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [declared(v) for v in value]
    return value


def config_of(queue: Any) -> QueueConfig:
    """The limits in effect of an initialised :class:`telo.kinds.queue.Queue` resource: its manifest's, with the
    override it last read from the journal (issue 16, ``telo queues set``)."""
    keyed = queue.config.get("concurrencyKey")
    rate = queue.config.get("rateLimit")
    period = declared(rate.get("period")) if isinstance(rate, Mapping) else None
    limits = queue.declared
    config = QueueConfig(
        name=queue.name, journal=queue.journal.name, concurrency=limits.concurrency,
        worker_concurrency=limits.worker_concurrency,
        key=None if keyed is None else str(declared(keyed["key"])), key_limit=limits.key_limit,
        hold_parked=queue.hold_parked, rate_limit=limits.rate_limit, rate_period_ms=limits.rate_period_ms,
        rate_period=None if period is None else str(period),
        more={k: declared(v) for k, v in queue.config.items() if k not in _READ})
    return with_override(config, queue.override)


def with_override(config: QueueConfig, override: QueueOverride | None) -> QueueConfig:
    """``config``'s manifest limits with ``override`` applied (the manifest's alone for None)."""
    config = config.declared
    if override is None:
        return config
    eff = override.apply(LimitValues(config.concurrency, config.worker_concurrency, config.key_limit,
                                     config.rate_limit, config.rate_period_ms))
    same_period = eff.rate_period_ms == config.rate_period_ms
    return replace(config, concurrency=eff.concurrency, worker_concurrency=eff.worker_concurrency,
                   key_limit=eff.key_limit if config.key is not None else config.key_limit, rate_limit=eff.rate_limit,
                   rate_period_ms=eff.rate_period_ms,
                   rate_period=config.rate_period if same_period else period_text(eff.rate_period_ms),
                   manifest=config, override=override)


def period_text(ms: int | None) -> str | None:
    """A period in milliseconds as a manifest would write it, in the largest unit it is a whole number of:
    ``1h``, ``90s``, ``1500ms``."""
    if ms is None:
        return None
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def override_json(override: QueueOverride, time: Time = _ms) -> dict[str, Any]:
    """What ``override`` changes, by ``telo queues set``'s option names (null: no limit), and who and when."""
    names = {"concurrency": "concurrency", "worker_concurrency": "workerConcurrency", "key_limit": "keyLimit"}
    out: dict[str, Any] = {}
    for name, limit in override.overridden():
        if name == "rate_limit":
            out["rateLimit"] = None if limit is None else {"limit": limit,
                                                           "period": period_text(override.rate_period_ms)}
        else:
            out[names[name]] = limit
    return {**out, "setBy": override.set_by, "setAt": time(override.set_at)}


@dataclass(frozen=True, slots=True)
class ManifestQueue:
    """A manifest's queue: its limits, and the open store of its journal."""

    config: QueueConfig
    store: Store


@contextmanager
def manifest_queues(manifest: str, *, store: Store | None = None) -> Iterator[list[ManifestQueue]]:
    """Every ``Local.Queue`` of ``manifest`` (in name order) with its journal opened — never created: a journal
    that is not there is ``ERR_JOURNAL_NOT_FOUND``, as for every command that reads runs
    (:mod:`telo.operations.journals`). ``store``: the manifest's only journal, opened already by the caller
    (used, not closed). Nothing is started; the journals opened here are closed on exit."""
    from telo.kinds.controllers import load_application
    from telo.kinds.journals import Journal
    from telo.kinds.queue import Queue
    from telo.operations.journals import require_exists

    app = load_application(manifest)
    app.create_resources()
    journals = [r for r in app.resources.values() if isinstance(r, Journal)]
    queues = sorted((r for r in app.resources.values() if isinstance(r, Queue)), key=lambda q: q.name)
    if store is not None and len(journals) == 1:
        journals[0].use_store(store)
    try:
        for queue in queues:
            journal = queue.journal
            if store is None or len(journals) != 1:
                path = journal.local_path()
                require_exists(path or manifest, path)
            asyncio.run(queue.init())  # its limits, compiled and checked (nothing else is started)
        yield [ManifestQueue(config_of(q), q.journal.store) for q in queues]
    finally:
        for journal in journals:
            asyncio.run(journal.teardown())


def find(queues: list[ManifestQueue], name: str, manifest: str) -> ManifestQueue:
    """The queue ``name`` of a manifest's ``queues`` (``ERR_QUEUE_NOT_FOUND``, naming the ones it has)."""
    for queue in queues:
        if queue.config.name == name:
            return queue
    names = ", ".join(q.config.name for q in queues) or "none"
    raise TeloError(NOT_FOUND, f"{name!r} is not a Local.Queue of {manifest}", hint=f"its queues: {names}",
                    data={"queue": name, "queues": [q.config.name for q in queues]})


# --- what a queue holds -------------------------------------------------------------------------------------


def process_of(holder: str) -> str:
    """The process a claim's holder is (``host:pid``; a holder telo did not write, as it is): what
    ``workerConcurrency`` counts per."""
    parsed = Holder.parse(holder)
    return holder if parsed is None else f"{parsed.host}:{parsed.pid}"


@dataclass(frozen=True, slots=True)
class QueueState:
    """A queue's runs by state (:data:`telo.journal.queue_reads.STATES`), in total and per key; the runs each
    process executes; the oldest waiting runs, in grant order; the rate window's starts. ``config``: its
    limits when a manifest said them."""

    name: str
    config: QueueConfig | None
    totals: Counter[str]
    keys: dict[str | None, Counter[str]]
    processes: dict[str, int]
    oldest: tuple[RunRecord, ...] = ()
    started: int | None = None
    frees_at: int | None = None

    @classmethod
    def of(cls, name: str, config: QueueConfig | None, snap: QueueSnapshot) -> QueueState:
        totals: Counter[str] = Counter()
        keys: dict[str | None, Counter[str]] = {}
        processes: Counter[str] = Counter()
        for c in snap.counts:
            totals[c.state] += c.count
            keys.setdefault(c.key, Counter())[c.state] += c.count
            if c.state == "running" and c.holder is not None:
                processes[process_of(c.holder)] += c.count
        return cls(name, config, totals, keys, dict(sorted(processes.items())), snap.oldest, snap.started,
                   snap.frees_at)

    @property
    def hold_parked(self) -> bool:
        return self.config is not None and self.config.hold_parked

    def holding(self, key: str | None = None, *, any_key: bool = True) -> int:
        """Runs holding a slot, of the queue or (``any_key=False``) of ``key``."""
        counts = self.totals if any_key else self.keys.get(key, Counter())
        return counts["running"] + (counts["parked"] + counts["parkedDue"] if self.hold_parked else 0)

    def waiting(self, counts: Counter[str] | None = None) -> int:
        """Runs waiting for a slot (due now), of the queue or of one key's ``counts``."""
        c = self.totals if counts is None else counts
        return c["waiting"] + c["unclaimed"] + (0 if self.hold_parked else c["parkedDue"])

    def to_json(self, time: Time = _ms) -> dict[str, Any]:
        t = self.totals
        out: dict[str, Any] = {"queue": self.name}
        if self.config is not None:
            out["journal"] = self.config.journal
            out["limits"] = self.config.to_json()  # (in effect: the manifest's, or as overridden)
            out["manifestLimits"] = self.config.declared.to_json()
            out["override"] = None if self.config.override is None else override_json(self.config.override, time)
        out.update(holding=self.holding(), running=t["running"], unclaimed=t["unclaimed"],
                   parked=t["parked"] + t["parkedDue"],
                   depth={"dueNow": t["waiting"], "dueLater": t["later"], "total": t["waiting"] + t["later"]},
                   waitingForSlot=self.waiting())
        out["keys"] = [{"key": k, "holding": self.holding(k, any_key=False), "running": c["running"],
                        "waiting": self.waiting(c), "later": c["later"], "parked": c["parked"] + c["parkedDue"]}
                       for k, c in sorted(self.keys.items(), key=self._key_order)]
        out["processes"] = [{"process": p, "running": n} for p, n in self.processes.items()]
        if self.started is not None and self.config is not None:
            out["rate"] = {"started": self.started, "limit": self.config.rate_limit,
                           "period": self.config.rate_period, "freesAt": time(self.frees_at)}
        if self.oldest:
            out["oldest"] = [oldest_json(r, i, time) for i, r in enumerate(self.oldest, 1)]
        return out

    def _key_order(self, item: tuple[str | None, Counter[str]]) -> tuple[int, int, str]:
        key, counts = item
        return -self.holding(key, any_key=False), -self.waiting(counts), key or ""


def oldest_json(record: RunRecord, position: int, time: Time = _ms) -> dict[str, Any]:
    out: dict[str, Any] = {"position": position, "run": record.run, "status": record.status,
                           "workflow": record.workflow, "key": record.queue_key}
    if record.priority is not None:
        out["priority"] = record.priority
    out.update(keyed_json(record), dueAt=time(record.due_at), createdAt=time(record.created_at))
    return out


def keyed_json(record: RunRecord) -> dict[str, str]:
    """A run's dedup (or singleton) key and debounce key, when its queue recorded one (issue 16 step 4)."""
    keys = {"dedupKey": record.dedup_key, "debounceKey": record.debounce_key}
    return {name: key for name, key in keys.items() if key is not None}


def read(store: Store, name: str, config: QueueConfig | None = None, *, now_ms: int | None = None,
         oldest: int = 0) -> QueueState:
    """What queue ``name`` holds and what waits in it now: one read of the journal
    (:meth:`Store.queue_snapshot`), with the ``oldest`` waiting runs."""
    from telo.clock import SYSTEM_CLOCK

    now = SYSTEM_CLOCK.now_ms() if now_ms is None else now_ms
    snap = store.queue_snapshot(name, now, oldest=oldest, rate=None if config is None else config.rate)
    return QueueState.of(name, config, snap)


# --- why a run waits --------------------------------------------------------------------------------------


def why_waiting(store: Store, record: RunRecord, config: QueueConfig | None = None, *, now_ms: int | None = None,
                time: Time = _ms) -> dict[str, Any]:
    """A queued run's queue and key and, while it waits (``scheduled``), why — computed from the counts the
    grant uses: ``running`` (under a live claim), ``runningWithKey``, ``parked``; once due, its ``position``
    among the runs waiting for a slot in grant order and how many wait (``waitingForSlot``). Given its queue's
    ``config``: the ``limits``, what holds a slot (``holding``) and ``heldBy``, the limits that keep it waiting
    now — ``concurrency`` at its maximum, its key's ``concurrencyKey``, a full ``rateLimit`` window (and when it
    frees) — or, with none of them full, ``workerConcurrency`` when every process executing the queue's runs is
    at it, or ``ahead`` when the runs before it take the room there is; empty: nothing holds it, a worker's next
    sweep starts it."""
    from telo.clock import SYSTEM_CLOCK

    assert record.queue is not None
    out: dict[str, Any] = {"name": record.queue}
    if record.queue_key is not None:
        out["key"] = record.queue_key
    if record.priority is not None:  # (proposal step 3: lower first; none recorded reads 0)
        out["priority"] = record.priority
    out.update(keyed_json(record))
    if record.status != "scheduled":
        return out
    now = SYSTEM_CLOCK.now_ms() if now_ms is None else now_ms
    due = record.due_at is not None and record.due_at <= now
    snap = store.queue_snapshot(record.queue, now, ahead_of=record if due else None,
                                rate=None if config is None else config.rate)
    state = QueueState.of(record.queue, config, snap)
    mine = state.keys.get(record.queue_key, Counter())
    out["running"] = state.totals["running"]
    if record.queue_key is not None:
        out["runningWithKey"] = mine["running"]
    out["parked"] = state.totals["parked"] + state.totals["parkedDue"]
    if not due:
        return out  # waiting for its time first (a scheduled start), then for a slot
    ahead = sum(c.count for c in snap.ahead
                if c.state in SLOT_STATES and not (c.state == "parkedDue" and state.hold_parked))
    out.update(position=ahead + 1, waitingForSlot=state.waiting())
    if config is not None:
        out.update(limits=config.to_json(), holding=state.holding(), heldBy=held_by(state, config, record, ahead,
                                                                                    time))
    return out


def held_by(state: QueueState, config: QueueConfig, record: RunRecord, ahead: int,
            time: Time = _ms) -> list[dict[str, Any]]:
    """The limits that keep ``record`` waiting now (see :func:`why_waiting`)."""
    held: list[dict[str, Any]] = []
    holding = state.holding()
    if config.concurrency is not None and holding >= config.concurrency:
        held.append({"limit": "concurrency", "holding": holding, "max": config.concurrency})
    if config.key_limit is not None:
        with_key = state.holding(record.queue_key, any_key=False)
        if with_key >= config.key_limit:
            held.append({"limit": "concurrencyKey", "key": record.queue_key, "holding": with_key,
                         "max": config.key_limit})
    if state.frees_at is not None:
        held.append({"limit": "rateLimit", "started": state.started, "max": config.rate_limit,
                     "period": config.rate_period, "freesAt": time(state.frees_at)})
    if held:
        return held
    busy = state.processes
    if config.worker_concurrency is not None and busy and all(n >= config.worker_concurrency for n in busy.values()):
        held.append({"limit": "workerConcurrency", "max": config.worker_concurrency, "processes": len(busy)})
    elif config.concurrency is not None and ahead >= config.concurrency - holding:
        held.append({"limit": "ahead", "ahead": ahead, "room": config.concurrency - holding})
    return held
