"""The asynchronous Python API, :class:`AsyncApp`: load a manifest, start and address durable runs with
coroutines, on the event loop you await them from (``AsyncApp.load(...)``; ``async with`` closes it). Async
``@telo.kind`` functions then run on your loop. :class:`telo.api.sync.App` offers the same methods blocking.

Addressing goes through :mod:`telo.operations` (the rules the CLI and the dashboard use too; the operator's
methods are in :mod:`telo.api.operator`); what is this module's own is running the application in-process:
starting runs, continuing the ones it made ready, recovering due runs on start, and serving as a worker.
Runs are addressed by run id (a ``str`` or a :class:`RunRef`) in the application's journal; ``journal=``
replaces the journal of every journal resource of the manifest (see :mod:`telo.api`). With a clock other than
the system clock (``FakeClock()`` in tests) time does not pass by itself: :meth:`~AsyncApp.run` returns as
soon as a run parks on time; advance the clock and call :meth:`~AsyncApp.run_due` (see :mod:`telo.testing`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from telo.api.documents import POSITION, add_documents, load_source, with_journal
from telo.api.operator import OperatorActions
from telo.api.results import (
    RunLike,
    RunRef,
    RunResult,
    RunStatus,
    Scheduled,
    Wait,
    run_id,
    run_result,
    run_status,
    seconds,
)
from telo.clock import SYSTEM_CLOCK, Clock, SystemClock
from telo.durable.slots import DEFAULT_CONCURRENCY
from telo.errors import Code, TeloError
from telo.journal.compat import check_mode, given_mode, process_mode
from telo.journal.model import NO_VALUE, RunRecord
from telo.journal.store import Store
from telo.kinds.journals import Journal
from telo.kinds.queued import slot_done
from telo.kinds.workflow import Workflow
from telo.manifest import Manifest, Pos, ResourceDecl
from telo.operations import runs, starting, worker
from telo.operations.journals import only_journal, open_journal
from telo.operations.starting import find_workflow
from telo.runtime.app import Application
from telo.runtime.resource import Resource

__all__ = ["AsyncApp"]

POLL_S = 0.02  # how often a wait re-reads a run record


# --- AsyncApp ----------------------------------------------------------------------------------------------


class AsyncApp(OperatorActions):
    """A loaded manifest whose durable runs you start and address with coroutines (see the module docstring;
    the operator's methods — ``runs``, ``deliver``, ``resolve``, ``fork`` … — are :mod:`telo.api.operator`'s).

    Resources are created and initialised on first use (any coroutine method), in the running event loop;
    with ``recover=True`` that first use also continues the due runs of its workflows (:meth:`recover`).
    """

    def __init__(self, application: Application, *, journal: Store | None = None, owns_journal: bool = False,
                 recover: bool = False, journal_compat: str | None = None) -> None:
        from telo import observability

        observability.trace_from_environment()  # TELO_OTEL, read once per process (docs/observability.md)
        self.application = application
        self.journal_store = journal  # replaces every journal resource's own store
        if journal is not None:
            application.on_create.append(self._use_journal)
        # How the application's journals write values (telo.journal.compat; docs/compat.md): None, the process's.
        process_mode()  # a bad TELO_JOURNAL_COMPAT is refused now, not after a run was claimed
        self.journal_compat = None if journal_compat is None else check_mode(journal_compat, "journal_compat")
        if self.journal_compat is not None:
            if journal is not None:
                given_mode(journal, self.journal_compat, "telo.load(journal=…)")
            application.on_create.append(self._use_compat)
        self.clock: Clock = application.clock
        self._owns_journal = owns_journal
        self._started = False
        self._closed = False
        self._pending: list[ResourceDecl] = []
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self._start_lock: asyncio.Lock | None = None
        self._recover = recover
        self._serving: set[asyncio.Task[Any]] = set()
        from telo.journal.claims import Holder

        self._holder = Holder.for_this_process("api").to_text()  # run_due's claims: not the workflows' own

    @classmethod
    def load(cls, source: str | Path | None, *, env: Mapping[str, str] | None = None, journal: str | None = None,
             clock: Clock | None = None, recover: bool = False, journal_compat: str | None = None) -> AsyncApp:
        """Load a manifest file, or YAML text (a string containing a newline or ``kind:``; relative paths in
        it resolve against the current directory), or None — no YAML: add workflows with the builder, and
        name the journal (``journal=`` is required then, so runs never land in a file nobody chose). Raises
        :class:`telo.manifest.ManifestLoadError` listing every problem. ``env`` replaces ``os.environ`` for
        ``variables``/``secrets``. ``recover=True``: when the application starts (its first use), continue its
        workflows' due runs, as DBOS's ``launch()`` recovers pending workflows — opt-in, because another
        process (a worker) may be the one meant to. ``journal_compat="legacy"``: its journals write plain JSON
        values for a runtime that predates the codec (docs/compat.md; default: ``TELO_JOURNAL_COMPAT``)."""
        clock = clock or SYSTEM_CLOCK
        if source is None and journal is None:
            raise TeloError(Code.JOURNAL_REQUIRED, "an application without a manifest needs journal=",
                            hint="telo.load(None, journal='runs.db') (or memory:, postgresql://…)")
        manifest = load_source(source, env)
        # It starts runs, so it may create the journal it names (telo.operations.journals).
        store = None if journal is None else open_journal(journal, create=True, clock=clock)
        from telo.kinds.controllers import CONTROLLERS

        return cls(Application(manifest, controllers=CONTROLLERS, clock=clock), journal=store,
                   owns_journal=store is not None, recover=recover, journal_compat=journal_compat)

    def _use_journal(self, resource: Resource) -> None:
        if isinstance(resource, Journal) and self.journal_store is not None:
            resource.use_store(self.journal_store)

    def _use_compat(self, resource: Resource) -> None:
        if isinstance(resource, Journal):
            resource.journal_compat = self.journal_compat

    @property
    def manifest(self) -> Manifest:
        return self.application.manifest

    # --- Python-built resources ---------------------------------------------------------------------------

    def add(self, *documents: Mapping[str, Any]) -> list[str]:
        """Add resource documents built with :mod:`telo.builder` (``workflow(...)``, ``resource(...)``) as if
        they were written in the manifest; returns the names of the resources they declared (inline ones
        included). A workflow without ``journal`` gets the manifest's only journal."""
        docs = [with_journal(self.manifest, d) for d in documents]
        where = getattr(documents[0], POSITION, None) if documents else None
        added = add_documents(self.manifest, docs, where=where or Pos(self.manifest.source, 1, 1))
        self._pending.extend(added)
        return [d.name for d in added]

    def workflow(self, name: str, steps: Sequence[Mapping[str, Any]], *, journal: str | None = None,
                 run_id: Any = None, inputs: Any = None, on_conflict: str | None = None) -> str:
        """Add a durable workflow built in Python (``telo.builder`` steps); returns its name."""
        from telo.builder import workflow

        self.add(workflow(name, [dict(s) for s in steps], journal=journal, run_id=run_id, inputs=inputs,
                          on_conflict=on_conflict))
        return name

    # --- lifecycle ----------------------------------------------------------------------------------------

    async def _ready(self) -> None:
        if self._closed:
            raise TeloError(Code.APP_CLOSED, "this App is closed", hint="load the manifest again")
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if not self._started:
                self._pending.clear()  # start() creates every declared resource, the added ones too
                await self.application.start()
                self._started = True
                if self._recover:
                    await self._recover_due()
            elif self._pending:
                await self._create(self._pending)
                self._pending = []

    async def _create(self, decls: Sequence[ResourceDecl]) -> None:
        """Create and initialise resources added after the application started (as ``Application.start``)."""
        for resource in self.application.create(decls):
            await resource.init()

    async def close(self) -> None:
        """Let executing runs come to rest, stop waiting ones (a run waiting in-process for a durable sleep is
        continued by the next start, resume or worker: the wait is journaled), tear the resources down."""
        if self._closed:
            return
        self._closed = True
        await self._stop_serving()
        if self._started:
            for run, fut in list(self._inflight.items()):
                while not fut.done() and await self._executing(run):
                    await asyncio.wait({fut}, timeout=POLL_S)
            for fut in list(self.application.holds):
                fut.cancel()
            for fut in list(self.application.holds):
                with contextlib.suppress(BaseException):
                    await fut
            await self.application.close()
        if self._owns_journal and self.journal_store is not None:
            await asyncio.to_thread(self.journal_store.close)

    async def _stop_serving(self) -> None:
        """Cancel every :meth:`serve` still going and wait while the executions each started come to rest."""
        for task in list(self._serving):
            task.cancel()
            await asyncio.wait({task})

    async def _executing(self, run: str) -> bool:
        record = await asyncio.to_thread(self._store().read_run, run)
        return record is not None and record.status == "running"

    async def __aenter__(self) -> AsyncApp:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- internals ----------------------------------------------------------------------------------------

    @property
    def _fake_clock(self) -> bool:
        return not isinstance(self.clock, SystemClock)

    def _store(self) -> Store:
        if self.journal_store is not None:
            return self.journal_store
        return only_journal((r for r in self.application.every_resource() if isinstance(r, Journal)),
                            str(self.manifest.source), "name the journal with telo.load(..., journal=PATH-or-URL)"
                            ).store

    async def _read(self, run: str) -> RunRecord:
        return await asyncio.to_thread(runs.read_record, self._store(), run)

    def _workflow(self, name: str) -> Workflow:
        return find_workflow(self.application, name)

    def _track(self, run: str, fut: asyncio.Future[Any]) -> None:
        self._inflight[run] = fut
        fut.add_done_callback(lambda f: self._inflight.pop(run, None) if self._inflight.get(run) is f else None)

    async def _continue(self, run: str, *, background: bool) -> bool:
        """Continue ``run`` in this process if its workflow is here and nobody executes it: in the background
        under a hold (waiting through time parks, like a start), or now, to its next rest (``run_due``)."""
        fut = self._inflight.get(run)
        if background and fut is not None and not fut.done():
            return True
        record = await asyncio.to_thread(self._store().read_run, run)
        if record is None or record.terminal or record.workflow is None:
            return False
        try:
            wf = self._workflow(record.workflow)
        except TeloError:
            return False
        inputs = record.decoded_inputs()
        inputs = {} if inputs is NO_VALUE else inputs
        if run in wf.active:
            return True  # executing in this process already
        holder = wf.holder if background else self._holder
        fence = await wf.claim_run(run, holder)  # (a queued workflow's run: only if its queue has room)
        if fence is None:
            return False
        if background:
            self._track(run, self.application.hold(wf.run_to_rest(run, inputs, fence, queued=wf.queue)))
        else:
            try:
                await wf.execute(run, inputs, fence)
            finally:
                slot_done(wf.queue)
        return True

    async def _rest(self, run: str, deadline: float | None) -> RunResult:
        """Wait until ``run`` rests: it settles, parks waiting for a delivery or an operator, parks on time
        under a fake clock, or nothing in this process executes it; or until ``deadline`` (monotonic s)."""
        fut: asyncio.Future[Any] | None = None
        while True:
            fut = self._inflight.get(run) or fut  # kept once done: a crash of the execution is raised here
            if fut is not None and fut.done() and not fut.cancelled() and (crash := fut.exception()) is not None:
                raise crash
            record = await self._read(run)
            local = fut is not None and not fut.done()
            timed = record.status == "parked" and record.parked is not None and record.parked.token is None \
                and record.due_at is not None
            if record.terminal:
                return run_result(record)
            if local:
                # Executing here: wait for it (a park read now may be the one it is about to continue), except
                # through a time park under a fake clock still in the future, which only the test's clock can
                # end. A park already due is the one the execution is about to lift (a recovered run).
                if timed and self._fake_clock and record.due_at is not None and record.due_at > self.clock.now_ms():
                    return run_result(record)
            elif record.status == "parked":
                return run_result(record)
            else:
                from telo.journal.rules import claim_is_live

                if record.status != "running" or not claim_is_live(record.claim, self.clock.now_ms()):
                    return run_result(record)  # scheduled, or interrupted with nobody executing it
            if deadline is not None and SYSTEM_CLOCK.monotonic() >= deadline:
                return run_result(record)
            if local:
                assert fut is not None
                await asyncio.wait({fut}, timeout=POLL_S)
            else:
                await asyncio.sleep(POLL_S)

    # --- starting runs ------------------------------------------------------------------------------------

    async def start(self, workflow: str, inputs: Mapping[str, Any] | None = None) -> RunRef:
        """Start a run of ``workflow`` (a durable workflow resource) with ``inputs``, or attach to the run its
        ``runId`` names: admitted and claimed before anything executes, then executed in the background."""
        from telo.engine.dispatch import dispatch
        from telo.runtime.resource import as_invocable

        await self._ready()
        wf = self._workflow(workflow)
        call = dict(wf.checked_inputs(dict(inputs or {})))  # inputType before the runId rule reads them
        known = wf.run_id_for(call) if wf.run_id_ev is not None else None
        fut = self._inflight.get(known) if known else None
        if known and fut is not None and not fut.done():
            return RunRef(known, wf.name, False, "running")  # executing here already: never twice at once
        with self.application.capturing() as holds:
            try:
                out = await dispatch(as_invocable(wf), call, events=self.application.events)
            except TeloError as exc:
                run = known or exc.data.get("run")
                record = await asyncio.to_thread(self._store().read_run, run) if isinstance(run, str) else None
                if exc.code != Code.DURABLE_RUN_EXISTS and record is not None and record.status == "failed":
                    return RunRef(record.run, wf.name, False, "failed")  # attached to a failed run
                raise
        run = str(out["runId"])
        if holds:
            self._track(run, holds[-1])
        return RunRef(run, wf.name, bool(out.get("started", False)), str(out["status"]))

    async def run(self, workflow: str, inputs: Mapping[str, Any] | None = None, *, wait: Wait = None) -> RunResult:
        """Start (or attach to) a run and wait until it rests, as ``telo run`` does: it settles, or parks
        waiting for a delivery or an operator (durable sleeps are waited through; under a fake clock they are
        not: the run is returned parked). ``wait`` bounds the wait (seconds or ``"30s"``)."""
        bound = seconds(wait)
        ref = await self.start(workflow, inputs)
        if ref.status == "skipped":  # its queue's singleton admitted nothing (issue 16): ref names the live run
            return RunResult(ref.run_id, "skipped")
        return await self._rest(ref.run_id, None if bound is None else SYSTEM_CLOCK.monotonic() + bound)

    # --- addressing runs (telo.operations) ---------------------------------------------------------------

    async def status(self, run: RunLike) -> RunStatus:
        """The run's record (``telo status``), with every unconfirmed-effect resolution it recorded, settled
        or not; ``ERR_DURABLE_RUN_NOT_FOUND`` for an unknown run."""
        await self._ready()
        return run_status(await asyncio.to_thread(runs.status, self._store(), run_id(run)))

    async def result(self, run: RunLike, wait: Wait = None) -> RunResult:
        """The run's outcome (``telo result``); with ``wait`` (seconds or ``"30s"``), wait up to that long for
        it to settle first."""
        await self._ready()
        return run_result(await runs.wait_settled(self._store(), run_id(run), seconds(wait), poll_s=POLL_S))

    async def wait(self, run: RunLike, timeout: Wait = None) -> RunResult:
        """Wait until the run comes to rest — it settles, or parks waiting for a delivery or an operator (or on
        time, under a fake clock) — as :meth:`run` does after starting it; ``timeout`` bounds the wait."""
        await self._ready()
        bound = seconds(timeout)
        return await self._rest(run_id(run), None if bound is None else SYSTEM_CLOCK.monotonic() + bound)

    async def run_due(self, limit: int = 100) -> int:
        """Continue every due run of this application's workflows now, each to its next rest (what a worker's
        sweep does: a delivered, resumed or time-parked run whose time has come); returns how many ran."""
        await self._ready()
        due = await asyncio.to_thread(self._store().due_runs, self.clock.now_ms(), limit)
        count = 0
        for run in due:
            if await self._continue(run, background=False):
                count += 1
        return count

    async def recover(self, limit: int = 1000) -> int:
        """Continue, in the background, every run of this application's workflows that is due now — a time
        park whose hour has come, a delivered or resumed run, a scheduled run, a run whose executing process
        died or whose claim lapsed — as DBOS's ``launch()`` recovers pending workflows; returns how many.
        ``load(..., recover=True)`` does this when the application starts. Runs of other workflows in the
        journal are left for their own application or worker."""
        await self._ready()
        return await self._recover_due(limit)

    async def _recover_due(self, limit: int = 1000) -> int:
        due = await asyncio.to_thread(self._store().due_runs, self.clock.now_ms(), limit)
        count = 0
        for run in due:
            if await self._continue(run, background=True):
                count += 1
        return count

    async def schedule(self, workflow: str, inputs: Mapping[str, Any] | None = None, *, after: Wait = None,
                       at: Any = None, run_id: str | None = None) -> Scheduled:
        """Admit a ``scheduled`` run of ``workflow`` (``telo schedule``), due ``after`` a while (seconds,
        ``"15m"``, a ``timedelta``) or ``at`` a time (epoch ms, ``datetime``, ``Timestamp``, RFC 3339); exactly one.
        Nothing executes now: :meth:`serve`, a ``telo worker``, :meth:`run_due` or :meth:`recover` starts it
        when it is due. ``run_id`` defaults to the workflow's ``runId`` rule; a run id that exists already is
        answered ``scheduled=False`` with that run's status, and nothing is written."""
        await self._ready()
        due = starting.due_ms(after, at, self.clock.now_ms())
        out = await starting.schedule(self.application, workflow, dict(inputs or {}), run_id, due)
        return Scheduled(out.run, out.workflow, out.scheduled, out.status, out.due_at)

    async def serve(self, *, concurrency: int = DEFAULT_CONCURRENCY, interval: Wait = 1.0,
                    until_idle: bool = False) -> None:
        """Be a worker for this application's workflows until stopped: claim their due runs and continue them,
        at most ``concurrency`` at once, sweeping every ``interval`` (seconds or ``"1s"``) — ``telo worker``'s
        own loop (:func:`telo.operations.worker.serve`), so claims keep it safe beside other workers.

        Stop it by cancelling its task (``close()`` does), or pass ``until_idle=True`` to return once nothing
        is running or due (under a fake clock: due now — advance the clock first). When it stops, the
        executions it started come to rest first: a stop never cuts a step short."""
        await self._ready()
        task = asyncio.current_task()
        if task is not None:
            self._serving.add(task)
        try:
            bound = seconds(interval)
            await worker.serve(self.application, interval=max(1, int((bound or 1.0) * 1000)), until_idle=until_idle,
                               concurrency=concurrency,
                               idle_horizon_ms=0 if self._fake_clock else worker.IDLE_HORIZON_MS)
        finally:
            if task is not None:
                self._serving.discard(task)
