"""What a ``DurableLocal.Queue`` does with a second start of a key (issue 16, step 4 of
docs/proposals/admission-control.md): ``dedupKey`` + ``onDuplicate``, ``debounce`` and ``singleton``.

Each key is CEL over the start's inputs, evaluated once at admission and recorded with the run (replay never
re-evaluates it); the journal decides in the admission's transaction (:mod:`telo.journal.keyed`), so racing
starts — in any number of processes — make one run. A queue has at most one of the three: each says what a second
start of a key does, and two answers to one question would contradict each other (which wins when a dedup key
and a singleton key are both live?). ``singleton: {mode: queue}`` is a ``concurrencyKey`` of limit 1, so it
excludes ``concurrencyKey``.

- ``dedupKey``: while a run of the key is live (scheduled, running or parked), a start attaches to it
  (``onDuplicate: attach``, the default: the caller gets the live run's handle, as Temporal's workflow id and
  telo's own ``runId`` + ``onConflict: attach`` answer a second start — a retried request must not fail because
  its first attempt got through) or is refused with ``ERR_DURABLE_RUN_EXISTS`` (``reject``, DBOS's behaviour).
- ``debounce: {period, key}``: a start finding an unstarted run of the key (and workflow) gives it its inputs
  and moves its due time to now + period: the run starts once a period passes without a newer start, with the
  latest inputs. The first start is due at now + period too.
- ``singleton: {key, mode}``: ``skip`` — a start while a run of the key is live admits nothing and answers
  ``{runId: <the live run>, skipped: true}``; ``cancel-running`` — the live run is cancelled (as ``telo cancel``
  does) and the start admitted; ``queue`` — runs of one key execute one at a time, in admission order.

These apply to starts (``telo run``, a step, ``App.start``); ``Local.Schedule`` and ``telo schedule`` admit a
run for a set time with its queue, concurrency key and priority only.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from telo.engine.dispatch import InvokeError
from telo.errors import Code, TeloError
from telo.kinds.journals import compile_time
from telo.runtime.resource import RunOutcome
from telo.specs.durations import duration_ms

if TYPE_CHECKING:
    from telo.engine.steps import Evaluable
    from telo.journal.model import RunRecord
    from telo.runtime.resource import Host

log = logging.getLogger("telo.durable")

ON_DUPLICATE: Final = ("attach", "reject")
SINGLETON_MODES: Final = ("skip", "cancel-running", "queue")
_EXCLUSIVE: Final = ("dedupKey", "debounce", "singleton")


@dataclass(frozen=True, slots=True)
class AdmissionKeys:
    """A queue's keyed-admission settings, checked at load; all None: starts are never keyed."""

    dedup: Evaluable | None = None  # the dedupKey, or a singleton key of mode skip / cancel-running
    on_duplicate: str = "attach"  # attach | reject | skip | cancel-running: what a live run of the key means
    debounce: Evaluable | None = None
    debounce_ms: int = 0
    serial: Evaluable | None = None  # a singleton key of mode queue: a concurrency key of limit 1

    @classmethod
    def load(cls, app: Host, config: Mapping[str, Any], where: str, queue: str) -> AdmissionKeys:
        present = [name for name in _EXCLUSIVE if config.get(name) is not None]
        if len(present) > 1:
            raise _invalid(f"{where} sets {' and '.join(present)}: a queue has at most one of dedupKey, debounce "
                           "and singleton (each says what a second start of a key does)", queue, present[1],
                           "split the workflows over two queues, or keep the one rule you mean")
        if config.get("onDuplicate") is not None and "dedupKey" not in present:
            raise _invalid(f"{where}.onDuplicate is set without dedupKey", queue, "onDuplicate",
                           'add dedupKey: !cel "inputs.order", or drop onDuplicate')
        c = app.compiler
        if "dedupKey" in present:
            return cls(dedup=c.value(config["dedupKey"], where=f"{where}.dedupKey"),
                       on_duplicate=str(config.get("onDuplicate") or "attach"))
        if "debounce" in present:
            d = config["debounce"]
            return cls(debounce=c.value(d["key"], where=f"{where}.debounce.key"),
                       debounce_ms=positive_period_ms(
                           app, d.get("period"), f"{where}.debounce.period", queue, "debounce.period",
                           'write e.g. debounce: { period: 5s, key: !cel "inputs.user" }'))
        if "singleton" in present:
            s = config["singleton"]
            mode, key = str(s.get("mode", "skip")), c.value(s["key"], where=f"{where}.singleton.key")
            if mode == "queue":
                if config.get("concurrencyKey") is not None:
                    raise _invalid(f"{where} sets singleton mode queue and concurrencyKey: the singleton is a "
                                   "concurrency key of limit 1", queue, "singleton",
                                   "keep one: concurrencyKey: { key: …, limit: 1 } is the same rule")
                return cls(serial=key)
            return cls(dedup=key, on_duplicate=mode)
        return cls()

    def fields(self, app: Host, inputs: Any, now_ms: int) -> dict[str, Any]:
        """The admission's keyed fields (``Admission`` names; a debounce's due time)."""
        scope = {**app.module_scope(), "inputs": inputs}
        if self.debounce is not None:
            return {"debounce_key": scalar_key(self.debounce, scope, "a debounce key"),
                    "due_at": now_ms + self.debounce_ms}
        if self.dedup is not None:
            return {"dedup_key": scalar_key(self.dedup, scope, "a dedup key"),
                    "supersede": self.on_duplicate == "cancel-running"}
        return {}


def scalar_key(ev: Evaluable, scope: Mapping[str, Any], what: str) -> str:
    """A key's value as recorded: text of a string, an integer or a boolean (``ERR_INPUT_INVALID`` otherwise)."""
    value = ev.evaluate(scope)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int):
        return str(value)
    raise TeloError(Code.INPUT_INVALID, f"{ev.where}: {what} must be a string, an integer or a boolean, got "
                    f"{type(value).__name__} {value!r}",
                    hint="key on a scalar of the inputs, e.g. !cel \"inputs.order\"")


def keyed_conflict(app: Host, queue: str, keys: AdmissionKeys, workflow: str, record: RunRecord
                   ) -> dict[str, Any] | None:
    """A start of ``workflow`` found ``record``, a run holding its key (another id than its own) in ``queue``, whose
    rules are ``keys``: refuse it (``onDuplicate: reject``), answer it (``singleton`` ``skip``; a live run of
    another workflow of the queue, which this one cannot execute), or None — attach to it, as to a run of the
    same id."""
    run, key = record.run, record.dedup_key
    where = f"queue {queue!r}"
    if keys.on_duplicate == "reject":
        raise InvokeError(Code.DURABLE_RUN_EXISTS, f"run {run!r} ({record.status}) holds the dedup key {key!r} of "
                          f"{where}; this start is refused (onDuplicate: reject)",
                          hint=f"wait for it to settle (telo result {shlex.quote(run)} --wait 60s), or attach to "
                               "it: onDuplicate: attach",
                          data={"run": run, "status": record.status, "queue": queue, "dedupKey": key})
    if keys.on_duplicate == "skip":
        log.info("durable.run.skipped", extra={"durable.run": run, "durable.queue": queue, "durable.key": key})
        app.run_rested(RunOutcome(run, "skipped"))
        return {"runId": run, "skipped": True, "status": "skipped"}
    if record.workflow != workflow:
        app.run_rested(RunOutcome(run, "elsewhere", holder=record.claim.holder if record.claim else None))
        return {"runId": run, "attached": True, "status": record.status}
    return None


def superseded_note(queue: str, run: str, cancelled: tuple[str, ...]) -> None:
    """Say which runs a ``cancel-running`` start cancelled (the journal records each as cancelled)."""
    for old in cancelled:
        log.info("durable.run.superseded", extra={"durable.run": old, "durable.by": run, "durable.queue": queue})


def positive_period_ms(app: Host, raw: Any, where: str, queue: str, field: str, hint: str) -> int:
    """A queue's period field (``debounce.period``, ``rateLimit.period``) in ms: a duration of 1 ms or more,
    evaluated at load; ``ERR_MANIFEST_VALIDATION_FAILED`` otherwise."""
    period = compile_time(app, raw, where)
    try:
        ms = duration_ms(period)
    except ValueError as exc:
        ms, reason = 0.0, str(exc)
    else:
        reason = f"got {period!r}"
    if ms < 1:
        raise _invalid(f"{where} must be a positive duration (1ms or more): {reason}", queue, field, hint)
    return int(ms)


def _invalid(message: str, queue: str, field: str, hint: str) -> TeloError:
    return TeloError(Code.MANIFEST_VALIDATION_FAILED, message, hint=hint, data={"queue": queue, "field": field})
