"""``DurableLocal.Queue``: admission control for the workflows that name it (issue 16;
docs/proposals/admission-control.md, the slices built: concurrency, workerConcurrency, concurrencyKey,
holdSlotWhileParked; rateLimit and priority; the limits ``telo queues set`` overrides in the journal).

A queue is a resource, not workflow fields, because its limits are shared: "ten payment runs at once" spans
every workflow naming it. The limits are enforced by the journal, in the transaction that grants runs
(:mod:`telo.journal.queues`); this resource only says what they are, evaluates a run's concurrency key and
priority once at admission, and counts what this process executes (``workerConcurrency`` is per process, so only
the process can count it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from telo.errors import Code, TeloError
from telo.journal.queue_overrides import LimitValues, QueueOverride
from telo.journal.queues import QueueLimits
from telo.kinds.journals import Journal, compile_time
from telo.kinds.queue_keys import AdmissionKeys, positive_period_ms, scalar_key
from telo.kinds.queue_overrides import view_of
from telo.kinds.slot_waits import SlotWaits
from telo.runtime.resource import Resource

log = logging.getLogger("telo.durable")
_INT64 = 1 << 63  # a priority is a column of 64-bit integers (SQLite INTEGER, PostgreSQL BIGINT)

if TYPE_CHECKING:
    from telo.runtime.resource import Host


class Queue(Resource):
    kind = "DurableLocal.Queue"

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self.executing = 0  # runs of this queue executing in this process (workerConcurrency counts them)
        self.waits = SlotWaits()  # its runs waiting for a slot in this process (telo.kinds.slot_waits)

    async def init(self) -> None:
        where = f"{self.kind} {self.name!r}"
        self.concurrency = self._limit("concurrency", where)
        self.worker_concurrency = self._limit("workerConcurrency", where)
        keyed = self.config.get("concurrencyKey")
        self.key_ev = None if keyed is None else self.app.compiler.value(keyed["key"],
                                                                         where=f"{where}.concurrencyKey.key")
        self.key_limit = None if keyed is None else int(keyed["limit"])
        self.hold_parked = bool(self.config.get("holdSlotWhileParked", False))
        self.rate_limit, self.rate_period_ms = self._rate(where)
        priority = self.config.get("priority")
        self.priority_ev = None if priority is None else self.app.compiler.value(priority, where=f"{where}.priority")
        # dedupKey, debounce, singleton: what a second start of a key does (issue 16 step 4, kinds/queue_keys.py)
        self.keys = AdmissionKeys.load(self.app, self.config, where, self.name)
        if self.keys.serial is not None:  # singleton mode queue: a concurrency key of limit 1
            self.key_ev, self.key_limit = self.keys.serial, 1
        refuse_file_journal(self.journal, f"{where} is on", self.name)
        # The manifest's limits are the defaults; `telo queues set` overrides them in the journal (issue 16), read
        # before the first claim and again as claims ask, at most once a second (telo.kinds.queue_overrides).
        self.declared = LimitValues(self.concurrency, self.worker_concurrency, self.key_limit, self.rate_limit,
                                    self.rate_period_ms)
        self.override: QueueOverride | None = None
        await self.refresh_limits()

    async def refresh_limits(self) -> None:
        """Read the journal's overrides now and apply this queue's (at init; after an in-process change)."""
        self._apply((await view_of(self.journal.store).read()).get(self.name))

    def _apply(self, override: QueueOverride | None) -> None:
        """Make the limits in effect the manifest's with ``override`` applied (the attributes every claim and the
        fair share read). A key limit is overridden only where the manifest declares a ``concurrencyKey`` (a
        singleton's per-key 1, or no key at all, stays as declared)."""
        if override == self.override:
            return
        effective = self.declared if override is None else override.apply(self.declared)
        self.concurrency, self.worker_concurrency = effective.concurrency, effective.worker_concurrency
        keyed = self.config.get("concurrencyKey") is not None
        self.key_limit = effective.key_limit if keyed else self.declared.key_limit
        self.rate_limit, self.rate_period_ms = effective.rate_limit, effective.rate_period_ms
        if override is not None or self.override is not None:  # (a change an operator made: say so)
            log.info("durable.queue.limits", extra={"durable.queue": self.name,
                                                    "durable.override": override is not None,
                                                    "durable.limits": repr(effective)})
        self.override = override

    def _rate(self, where: str) -> tuple[int | None, int | None]:
        """``rateLimit: {limit, period}``: an integer ≥ 1 and a positive duration (of at least 1 ms)."""
        rate = self.config.get("rateLimit")
        if rate is None:
            return None, None
        limit = compile_time(self.app, rate.get("limit"), f"{where}.rateLimit.limit")
        if type(limit) is not int or limit < 1:
            raise TeloError(Code.MANIFEST_VALIDATION_FAILED, f"{where}.rateLimit.limit must be an integer ≥ 1, got "
                            f"{limit!r}", hint="write e.g. rateLimit: { limit: 100, period: 1m }",
                            data={"queue": self.name, "field": "rateLimit.limit"})
        period = positive_period_ms(self.app, rate.get("period"), f"{where}.rateLimit.period", self.name,
                                    "rateLimit.period", "write e.g. rateLimit: { limit: 100, period: 1m }")
        return limit, period

    def _limit(self, field: str, where: str) -> int | None:
        raw = self.config.get(field)
        if raw is None:
            return None
        value = compile_time(self.app, raw, f"{where}.{field}")
        if type(value) is not int or value < 1:
            raise TeloError(Code.MANIFEST_VALIDATION_FAILED, f"{where}.{field} must be an integer ≥ 1, got {value!r}",
                            hint=f"write e.g. {field}: 3", data={"queue": self.name, "field": field})
        return value

    @property
    def journal(self) -> Journal:
        resource = self.app.resource_for(self.config["journal"])
        assert isinstance(resource, Journal), "the schema requires a journal reference"
        return resource

    def check_journal(self, journal: Journal, where: str, workflow: str) -> None:
        """A workflow naming this queue must be on its journal: a queue counts the runs of one journal."""
        if self.journal is not journal and self.journal.store is not journal.store:
            raise TeloError(Code.MANIFEST_VALIDATION_FAILED,
                            f"{where} names the queue {self.name!r} of journal {self.journal.name!r}, but the "
                            f"workflow's journal is {journal.name!r}",
                            hint="a queue counts the runs of one journal: give the queue the workflow's journal",
                            data={"workflow": workflow, "queue": self.name})

    def limits(self) -> QueueLimits:
        """The limits a claim of this process passes to the journal now (its free ``workerConcurrency``): the
        manifest's, or an override's once this process has read it (telo.kinds.queue_overrides)."""
        self._apply(view_of(self.journal.store).current().get(self.name))
        free = None if self.worker_concurrency is None else max(self.worker_concurrency - self.executing, 0)
        return QueueLimits(self.concurrency, self.key_limit, free, self.hold_parked, self.rate_limit,
                           self.rate_period_ms)

    def priority_of(self, inputs: Any) -> int | None:
        """The run's priority (lower first), evaluated once at admission and recorded like its key; None when the
        queue has no ``priority`` (read as 0). ``ERR_INPUT_INVALID`` unless it is a 64-bit integer."""
        if self.priority_ev is None:
            return None
        value = self.priority_ev.evaluate({**self.app.module_scope(), "inputs": inputs})
        if isinstance(value, int) and not isinstance(value, bool) and -_INT64 <= value < _INT64:
            return int(value)
        raise TeloError(Code.INPUT_INVALID, f"{self.priority_ev.where}: a priority must be an integer (lower runs "
                        f"first), got {type(value).__name__} {value!r}",
                        hint="e.g. priority: !cel \"inputs.tier == 'gold' ? 0 : 10\"", data={"queue": self.name})

    def key_of(self, inputs: Any) -> str | None:
        """The run's concurrency key, evaluated once at admission and recorded (never re-evaluated on replay)."""
        if self.key_ev is None:
            return None
        return scalar_key(self.key_ev, {**self.app.module_scope(), "inputs": inputs}, "a concurrency key")


def refuse_file_journal(journal: Journal, what: str, queue: str) -> None:
    """The file journal keeps one file per run: it cannot count a queue's runs and grant one atomically, so a
    queue there is refused at load rather than enforced loosely (docs/guarantees.md)."""
    if journal.store.kind == "file":
        raise TeloError(
            Code.JOURNAL_CONFIG_INVALID,
            f"{what} the file journal {journal.name!r}, which cannot enforce a queue: it keeps one file per run "
            "and cannot count the runs of a queue and grant one in one atomic step",
            hint="put the queue's workflows on a SQLite or PostgreSQL journal (DurableJournalSqlite.Journal, "
                 "DurableJournalPostgres.Journal), or drop the queue",
            data={"queue": queue, "journal": journal.name},
        )
