"""``DurableLocal.Workflow`` (reference §6; spec §7); its resumer is :mod:`telo.kinds.resumer`.

Starting a run admits it BEFORE anything executes, claims it, and starts the body detached under a hold,
returning ``{runId, started, status}`` at once. (On SQLite a new run's admission, its claim written with it, is
queued for the group commit and the body starts meanwhile: its writes queue behind it and it waits for them before any
effect that must not be repeated blindly, so such an effect never runs for a run that is not admitted; the
caller gets the id once the admission is durable.) Resubmitting an id attaches: a settled run answers with its
outcome, a running or parked one is continued only if its claim is free (resume by resubmission) — a claim
whose holder process died on this host is free at once. Unlike upstream (reference §15.6), a cancelled run
stays cancelled and a scheduled run keeps its own inputs and due time.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from telo import faults
from telo.clock import SYSTEM_CLOCK, uuid7
from telo.durable import shutdown
from telo.durable.aio import AsyncStore
from telo.durable.digest import digest_of
from telo.durable.effects import EffectPolicy
from telo.durable.execute import Execution, WorkflowBody, execute_run
from telo.durable.halting import halts
from telo.engine.context import current
from telo.engine.dispatch import InvokeError
from telo.engine.steps import compile_steps
from telo.errors import Code, TeloError
from telo.journal.claims import Fence, Holder
from telo.journal.compat import writer_for
from telo.journal.model import NO_VALUE, Admission, RunRecord
from telo.journal.rules import claim_is_live
from telo.kinds.attached import warn_if_inputs_differ
from telo.kinds.journals import Journal
from telo.kinds.queue import Queue
from telo.kinds.queue_keys import keyed_conflict, superseded_note
from telo.kinds.queued import admit_queued, claim_queued, queued_admission, slot_done, wait_for_slot
from telo.runtime.contracts import contract_for
from telo.runtime.resource import Resource, RunOutcome

if TYPE_CHECKING:
    from telo.runtime.resource import Host

log = logging.getLogger("telo.durable")

# How often a process waiting in-process for a time park re-reads the run (to notice a cancel or a resume).
PARKED_RECHECK_MS = 500
# Codes of a run whose journal or record this process cannot read: resumers skip it (resumer.Resumer._skip).
UNREADABLE = frozenset({Code.DURABLE_ENTRY_UNDECODABLE, Code.DURABLE_JOURNAL_CORRUPT})

# How many runs deep a chain of runs started by each other's steps may go (issue 15). A start returns at once and
# the body runs detached (reference §6 "Invoke" step 5), so workflows that start each other never loop in one call
# — they multiply runs: 13,184 in 30 s before this limit. Real orchestration nests a few levels (a parent, its
# children, theirs); 64 leaves room for a recursion by design (a tree walked by nested runs) while a runaway pair
# stops after 64 runs, well under a second. (For scale: SQL Server caps nested procedure calls and triggers at
# 32.) A start past it fails with ERR_DURABLE_NESTING_TOO_DEEP, a failed step like any other, so the deepest run
# settles `failed`. The chain lives in process memory (_CHAIN): a run continued by a worker or a resubmission
# after its process died starts a new chain, and so does a run admitted by Local.Schedule — the way for a
# workflow to go on for ever, one due run at a time.
MAX_NESTED_RUNS = 64
# The workflows of the runs whose steps led to the current body, outermost first (the current run's last). Its
# own variable, not a member of the invocation context: a body starts from the root context (spec §7.3), which
# rightly drops the handle, path and zones of the step that started it, but not this ancestry. Every body task
# sets it (run_to_rest); tasks spawned inside a body inherit it (contextvars).
_CHAIN: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("telo_workflow_chain", default=())


def default_run_id(name: str) -> str:
    """``<name>:<uuid>`` (reference §6), the uuid a time-ordered UUIDv7 — except when started by a step of a
    durable run: then ``<name>:<parent run>/<step path>``, so that should the parent crash after the start and
    before its step's entry is durable, the redriven step starts the same id again and attaches to the run it
    started rather than starting a second one.

    Why v7: the journal's indexes are keyed by run id, and random ids scatter each new run's rows over the
    whole index, so every commit writes (and first reads) pages all over a grown journal; time-ordered ids
    keep a commit's writes on the indexes' last pages (benchmarks/durable.py: ~10 % faster sequentially, ~20 %
    with 100 runs in flight on a 30 MB journal)."""
    ctx = current()
    if ctx.handle is not None and ctx.run_id and ctx.path:
        return f"{name}:{ctx.run_id}/{ctx.path}"
    return f"{name}:{uuid7()}"


class Workflow(Resource):
    kind = "DurableLocal.Workflow"

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self.holder = Holder.for_this_process(f"workflow-{name}").to_text()
        self.executions: dict[str, Execution] = {}
        # Runs whose body this process executes right now (execute): a resubmission attaches to them.
        # Re-claiming one would be granted (the same holder) and fence out the live execution mid-effect.
        self.active: set[str] = set()
        self.waiting: set[str] = set()  # queued runs this process waits to be granted a slot for (queued.py)
        self._async_store: AsyncStore | None = None
        # inputType: checked at the dispatch chokepoint before ``invoke`` admits anything (issue 15)
        self.contract = contract_for(app, {"inputType": config.get("inputType")})

    async def init(self) -> None:
        c = self.app.compiler
        where = f"{self.kind} {self.name!r}"
        self.body = WorkflowBody(
            self.name,
            compile_steps(self.config.get("steps", []), c, where=f"{where}.steps"),
            c.value(self.config["inputs"], where=f"{where}.inputs") if "inputs" in self.config else None,
            self.app.module_scope,
            self.kind,
            self.policy_of_target,
            digest_of(self.app.manifest, self.name) if self.name in self.app.manifest.resources else None,
            str(self.config.get("durability", "deferred")),
        )
        self.run_id_ev = c.value(self.config["runId"], where=f"{where}.runId") if "runId" in self.config else None
        self.on_conflict = str(self.config.get("onConflict", "attach"))
        if self.queue is not None:
            self.queue.check_journal(self.journal, f"{where}.queue", self.name)

    @property
    def queue(self) -> Queue | None:
        """The ``DurableLocal.Queue`` its runs wait in (issue 16), if any."""
        if self.config.get("queue") is None:
            return None
        resource = self.app.resource_for(self.config["queue"])
        assert isinstance(resource, Queue), "the schema requires a queue reference"
        return resource

    def policy_of_target(self, target: Mapping[str, str] | None) -> EffectPolicy:
        """The unconfirmed-effect policy of a step's target: the resource's own, else redrive (built-in kinds
        are pure, or journal their own effects step by step)."""
        resource = self.app.resources.get(target.get("name", "")) if target else None
        own = getattr(resource, "effect_policy", None)
        return own() if callable(own) else EffectPolicy(implicit=True)

    @property
    def journal(self) -> Journal:
        resource = self.app.resource_for(self.config["journal"])
        assert isinstance(resource, Journal), "the schema requires a journal reference"
        return resource

    @property
    def store(self) -> AsyncStore:
        sync = self.journal.store
        cached = self._async_store
        if cached is None or cached.sync is not sync:
            cached = self._async_store = AsyncStore(sync)
        return cached

    def checked_inputs(self, inputs: Mapping[str, Any]) -> Any:
        """A start's inputs against ``inputType`` (defaults filled), for starts that do not pass the dispatch
        chokepoint (``telo schedule``, ``App.schedule``); ERR_INPUT_INVALID before anything is admitted."""
        validator = self.contract.inputs if self.contract is not None else None
        return validator.validate(dict(inputs), where=f"{self.name} inputs") if validator is not None else inputs

    def run_id_for(self, inputs: Any) -> str:
        if self.run_id_ev is None:
            return default_run_id(self.name)
        run_id = self.run_id_ev.evaluate({**self.app.module_scope(), "inputs": inputs})
        if not isinstance(run_id, str) or not run_id:
            raise TeloError(Code.DURABLE_RUN_ID_INVALID, f"{self.run_id_ev.where}: runId must be a non-empty string, "
                            f"got {run_id!r}", data={"workflow": self.name})
        return run_id

    def nested_chain(self) -> tuple[str, ...]:
        """The chain of workflows a run started here would end: the starting body's, then this workflow. Raises
        ``ERR_DURABLE_NESTING_TOO_DEEP`` past :data:`MAX_NESTED_RUNS`, before anything is admitted."""
        chain = (*_CHAIN.get(), self.name)
        if len(chain) <= MAX_NESTED_RUNS:
            return chain
        shown = chain if len(chain) <= 8 else (*chain[:3], "…", *chain[-4:])
        raise InvokeError(
            Code.DURABLE_NESTING_TOO_DEEP,
            f"{self.kind} {self.name!r} would start a run {len(chain)} runs deep, past the limit of "
            f"{MAX_NESTED_RUNS} runs started by each other's steps: {' → '.join(shown)}",
            hint="the workflows start each other without end: guard the start with `when:` on an input that ends "
                 "the chain, give the workflow a fixed runId (a second start attaches), or schedule the next run "
                 "with Local.Schedule",
            data={"workflow": self.name, "depth": len(chain), "limit": MAX_NESTED_RUNS, "chain": list(chain),
                  "parentRun": current().run_id},
        )

    async def invoke(self, inputs: Any) -> Any:
        inputs = inputs if inputs is not None else {}
        chain = self.nested_chain()
        run = self.run_id_for(inputs)
        store = self.store
        faults.point("before-admit")
        # The call inputs go into the record: a worker continuing a run whose starter died before the
        # body's inputs decision has nothing else to evaluate the workflow's `inputs:` against.
        digest = self.body.digest
        admission = Admission.of(run, workflow=self.name, inputs=inputs,
                                 manifest_digest=digest.value if digest else None,
                                 digest_scope=digest.scope if digest else None, writer=writer_for(store.sync))
        clock = self.app.clock
        queue = self.queue
        if queue is not None:  # admitted scheduled, granted only while the queue has room (telo.kinds.queued)
            admission = queued_admission(queue, admission, inputs, clock.now_ms())
        elif self.run_id_ev is None and current().handle is None and store.admits_queued:
            # A new id (a fresh uuid): nothing to attach to. The admission, with the claim, is queued for the
            # group commit, and the body starts meanwhile: every write of it queues behind it, and it waits for
            # its writes before any effect that must not be repeated blindly — so nothing such runs before
            # the run is durably admitted. The caller gets the run id once it is. (The body's task is created
            # first — it starts only once this one waits — so that it runs before the loop's next iteration
            # wakes the writer thread for the admission: a lone run commits everything at once, itself.)
            granted = SYSTEM_CLOCK.monotonic()  # (real time: the lease is renewed in real time, renewals.py)
            body = self.app.hold(self.run_to_rest(run, inputs, Fence(self.holder, 1, granted), fresh=True,
                                                    chain=chain))
            try:
                queued = store.submit_admission(admission, self.holder, clock.now_ms())
            except BaseException:
                body.cancel()
                raise
            if not (await queued).admitted:
                raise TeloError(Code.DURABLE_RUN_EXISTS, f"run {run!r}, a freshly generated id, already exists",
                                data={"run": run})
            faults.point("after-admit")
            return {"runId": run, "started": True, "status": "running"}
        # a queued run is granted in its admission's operation if its queue has room (keyed: admitted alone)
        admitted, granted = await admit_queued(self, queue, admission, inputs, chain) \
            if queue is not None and not admission.keyed else (await store.admit(admission), False)
        if admitted.admitted and queue is not None:  # admitted `scheduled` (docs/kinds.md), granted or to wait
            superseded_note(queue.name, run, admitted.superseded)
            if not granted:
                wait_for_slot(self, queue, run, inputs, chain)
            return {"runId": run, "started": True, "status": "scheduled"}
        if not admitted.admitted:
            record = admitted.record
            if queue is not None and record.run != run:  # a run holding the start's key (kinds/queue_keys.py)
                answer = keyed_conflict(self.app, queue.name, queue.keys, self.name, record)
                if answer is not None:
                    return answer
                run, inputs = record.run, record.decoded_inputs()  # attached: that run, with its inputs
            elif self.on_conflict != "reject":
                warn_if_inputs_differ(run, record, inputs)
            else:
                raise InvokeError(Code.DURABLE_RUN_EXISTS, f"run {run!r} already exists ({record.status})",
                                  hint="use onConflict: attach to attach to it", data={"run": run,
                                                                                       "status": record.status})
            if record.status == "completed":
                result = record.decoded_result()
                self.app.run_rested(RunOutcome(run, "completed", result=None if result is NO_VALUE else result,
                                               has_result=result is not NO_VALUE))
                out: dict[str, Any] = {"runId": run, "attached": True, "status": "completed"}
                if result is not NO_VALUE:
                    out["result"] = result
                return out
            if record.status == "failed":  # raised, as upstream does; `telo run` reports the run's outcome too
                error = dict(record.error or {})
                self.app.run_rested(RunOutcome(run, "failed", error=error))
                raise InvokeError(error.get("code") or Code.DURABLE_RUN_FAILED,
                                  error.get("message") or f"run {run!r} failed", data={"run": run})
            if record.status in ("cancelled", "scheduled") or run in self.active:
                if record.status == "cancelled":
                    self.app.run_rested(RunOutcome(run, "cancelled"))
                elif queue is not None and record.status == "scheduled" and record.queue is not None:
                    wait_for_slot(self, queue, run, inputs, chain)  # (its starter may be gone: wait here too)
                return {"runId": run, "attached": True, "status": record.status}
            if record.status == "parked" and record.parked is not None and record.parked.token is not None:
                # waiting for a delivery: nothing to continue until it lands (a claim would find it parked)
                self.app.run_rested(RunOutcome(run, "parked", parked=record.parked.to_json()))
            fence = await self.claim_run(run, self.holder)
            if fence is None and queue is not None and not claim_is_live(record.claim, clock.now_ms()):
                wait_for_slot(self, queue, run, inputs, chain)  # free, but its queue is full: wait for a slot
                return {"runId": run, "attached": True, "status": record.status}
            if fence is None:
                self._attached_elsewhere(run, record)
                return {"runId": run, "attached": True, "status": record.status}
            # Resume by resubmission (reference §6): the claim was free, so this call continues the run and
            # answers like a start.
            self.app.hold(self.run_to_rest(run, inputs, fence, chain=chain, queued=queue))
            return {"runId": run, "started": True, "status": "running"}
        fence = await store.claim(run, self.holder, clock.now_ms())
        if fence is None:
            return {"runId": run, "attached": True, "status": "running"}
        faults.point("after-admit")
        self.app.hold(self.run_to_rest(run, inputs, fence, chain=chain))
        return {"runId": run, "started": True, "status": "running"}

    async def claim_run(self, run: str, holder: str) -> Fence | None:
        """Claim ``run`` to continue it here: through its queue's grant for a queued workflow (issue 16)."""
        queue = self.queue
        if queue is None:
            return await self.store.claim(run, holder, self.app.clock.now_ms())
        return await claim_queued(self, queue, run, holder)

    def _attached_elsewhere(self, run: str, record: RunRecord) -> None:
        """A resubmission found the run claimed by another execution: say which, for ``telo run``."""
        if record.status == "parked" and record.parked is not None:
            self.app.run_rested(RunOutcome(run, "parked", parked=record.parked.to_json()))
            return
        holder = record.claim.holder if record.claim is not None else None
        self.app.run_rested(RunOutcome(run, "elsewhere", holder=holder))

    async def run_to_rest(self, run: str, inputs: Any, fence: Fence, *, fresh: bool = False,
                          chain: tuple[str, ...] | None = None, queued: Queue | None = None,
                          record: RunRecord | None = None) -> Execution:
        """Execute, and while the run parks on TIME only (a durable sleep, a long retry backoff), wait in this
        process and continue it — so ``telo run`` behaves like a script; ``kill -9`` during the wait loses
        nothing, since the park is journaled and a worker or a rerun continues it. A run waiting for a
        delivery leaves the process free to exit.

        ``chain``: the workflows of the runs that led to this one, itself last (:meth:`nested_chain`; default:
        a chain of its own). Set for this task only: the body runs in a task of its own (App.hold). ``queued``:
        the run's queue, whose slot this process counts until each execution rests (telo.kinds.queued); ``record``:
        the run's record as its grant returned it (not read again)."""
        _CHAIN.set(chain if chain is not None else (self.name,))
        store = self.store
        while True:
            try:
                execution = await self.execute(run, inputs, fence, fresh=fresh, record=record)
                fresh, record = False, None
            except Exception:
                log.exception("durable.run.crashed", extra={"durable.run": run})
                raise
            finally:
                slot_done(queued)
            self.app.run_rested(_outcome(execution))
            if execution.status != "parked":
                return execution
            try:
                record = await store.read_run(run)
            except TeloError as exc:
                if not halts(exc):
                    raise
                return execution  # the park is journaled: a worker continues the run once the journal answers
            if record is not None and record.status == "parked" and record.parked is not None:
                self.app.run_rested(RunOutcome(run, "parked", parked=record.parked.to_json()))
            delivered = record is not None and record.status == "running" and not shutdown.draining()
            # (running again already: a delivery landed while the body unwound from its park, and a resubmission
            # in this process attached to this execution rather than continuing the run itself)
            if not delivered:
                if record is None or record.status != "parked" or record.parked is None \
                        or record.parked.token is not None or record.due_at is None:
                    return execution
                if not await self._wait_parked(run, record.due_at):
                    return execution  # cancelled or settled while it waited (or the journal failed)
            try:
                again = await self.claim_run(run, fence.holder)
            except TeloError as exc:
                if not halts(exc):
                    raise
                return execution
            if again is None:
                return execution  # a worker took it over meanwhile
            fence = again

    async def _wait_parked(self, run: str, due_at: int) -> bool:
        """Wait for a time park to come due, re-reading the run meanwhile: False as soon as it is cancelled or
        settled (a ``Local.Cancel`` must not keep this process alive until the due time), True when the time
        has come or the run was unparked early (an operator resume), so the caller continues it now."""
        clock = self.app.clock
        while True:
            if shutdown.draining():
                return False  # the park is journaled: a worker continues the run when it is due
            remaining_ms = due_at - clock.now_ms()
            if remaining_ms <= 0:
                return True
            await asyncio.sleep(min(remaining_ms, PARKED_RECHECK_MS) / 1000)
            try:
                record = await self.store.read_run(run)
            except TeloError as exc:
                if not halts(exc):
                    raise
                return False
            if record is None or record.terminal:
                return False
            if record.status != "parked" or record.due_at != due_at:
                return True

    async def execute(self, run: str, inputs: Any, fence: Fence, *, fresh: bool = False,
                      record: RunRecord | None = None) -> Execution:
        """Continue ``run`` (claimed under ``fence``): the path shared by starts, resubmissions and resumers.

        ``fresh``: admitted and claimed by this very call chain just now — nothing to read first; ``record``: the
        run's record, read by the caller under this claim (a resumer's), so it is not read again."""
        store = self.store
        if record is None and not fresh:
            record = await store.read_run(run)
        if record is not None and record.terminal:
            # Settled since the caller decided to continue it (a sweep's due list is stale by the time it claims;
            # another process finished the run during an in-process wait): a claim does not stop that, so do
            # not replay the body and settle the run again.
            await store.release(run, fence)
            return Execution(run, record.status, record=record)
        if record is not None and record.corrupt is not None:
            await store.release(run, fence)
            message = f"run {run!r} is damaged in the journal: {record.corrupt}"
            code = Code.DURABLE_JOURNAL_CORRUPT.value
            log.error("durable.run.corrupt", extra={"durable.run": run, "error.code": code, "error.message": message})
            return Execution(run, "running", error={"code": code, "message": message}, record=record)
        if record is not None and record.status in ("scheduled", "parked"):
            record = await store.update_run(run, fence=fence, status="running", parked=None, due_at=None)
        self.active.add(run)
        try:
            execution = await execute_run(store, run, self.body, inputs, fence=fence, services=self.app.services,
                                          clock=self.app.clock, fresh=fresh, record=record)
        finally:
            self.active.discard(run)
        self.executions[run] = execution
        if execution.status == "running":
            try:
                await store.release(run, fence)
            except TeloError:  # the journal is what failed: the claim lapses after its lease instead
                log.warning("durable.claim.release_failed", extra={"durable.run": run}, exc_info=True)
        self.app.events.emit(f"{self.name}.Run{execution.status.capitalize()}",
                             {"run": run, "status": execution.status, "replayedSteps": execution.replayed_steps})
        return execution


def _outcome(execution: Execution) -> RunOutcome:
    """What ``telo run`` reports of an execution (a park's details are read from the record after it)."""
    has_result = execution.status == "completed" and execution.result is not NO_VALUE
    return RunOutcome(execution.run, execution.status, result=execution.result if has_result else None,
                      has_result=has_result, error=execution.error)
