"""The asynchronous Python API, :class:`AsyncApp`: load a manifest, start and address durable runs with
coroutines, on the event loop you await them from (``AsyncApp.load(...)``; ``async with`` closes it). Async
``@telo.kind`` functions then run on your loop. :class:`telo.api.sync.App` offers the same methods blocking.

Addressing goes through :mod:`telo.operations` (the rules the CLI and the dashboard use too); what is this
class's own is running the application in-process: starting runs, and continuing the ones it made ready.

Runs are addressed as in the CLI: by run id (a ``str`` or the :class:`RunRef` :meth:`AsyncApp.start`
returned) in the application's journal. ``journal=`` names a journal the way ``--journal`` does (a SQLite
file, a file-journal directory, ``postgresql://…``, ``memory:``) and replaces the journal of every journal
resource of the manifest: runs are written there and every addressing method reads it.

Results are the frozen dataclasses of :mod:`telo.api.results`.

Operations that make a run ready to continue — :meth:`~AsyncApp.deliver`, :meth:`~AsyncApp.resume`,
:meth:`~AsyncApp.fork`, :meth:`~AsyncApp.restore` — also continue it in this process, in the background,
when the run's workflow is one of this application's (pass ``continue_run=False`` to only record, like the
CLI). With a clock other than the system clock (``clock=FakeClock()`` in tests) time does not pass by itself,
so :meth:`~AsyncApp.run` returns as soon as a run parks on time; advance the clock and call
:meth:`~AsyncApp.run_due` (see :mod:`telo.testing`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from telo.api.documents import POSITION, add_documents, load_source, with_journal
from telo.api.results import (
    Delivery,
    JournalEntry,
    RunLike,
    RunRef,
    RunResult,
    RunStatus,
    Wait,
    journal_entries,
    run_id,
    run_result,
    run_status,
    seconds,
)
from telo.clock import SYSTEM_CLOCK, Clock, SystemClock
from telo.errors import Code, TeloError
from telo.journal.eventlog import Checkpoint
from telo.journal.model import NO_VALUE, RunRecord
from telo.journal.store import Store
from telo.kinds.journals import Journal
from telo.kinds.workflow import Workflow
from telo.manifest import Manifest, Pos, ResourceDecl
from telo.operations import actions, runs
from telo.operations.journals import only_journal, open_journal
from telo.operations.starting import find_workflow
from telo.runtime.app import Application
from telo.runtime.resource import Resource

__all__ = ["AsyncApp"]

POLL_S = 0.02  # how often a wait re-reads a run record


# --- AsyncApp ----------------------------------------------------------------------------------------------


class AsyncApp:
    """A loaded manifest whose durable runs you start and address with coroutines (see the module docstring).

    Resources are created and initialised on first use (any coroutine method), in the running event loop.
    """

    def __init__(self, application: Application, *, journal: Store | None = None, owns_journal: bool = False) -> None:
        from telo import observability

        observability.trace_from_environment()  # TELO_OTEL, read once per process (docs/observability.md)
        self.application = application
        self.journal_store = journal  # replaces every journal resource's own store
        if journal is not None:
            application.on_create.append(self._use_journal)
        self.clock: Clock = application.clock
        self._owns_journal = owns_journal
        self._started = False
        self._closed = False
        self._pending: list[ResourceDecl] = []
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self._start_lock: asyncio.Lock | None = None
        from telo.journal.claims import Holder

        self._holder = Holder.for_this_process("api").to_text()  # run_due's claims: not the workflows' own

    @classmethod
    def load(cls, source: str | Path, *, env: Mapping[str, str] | None = None, journal: str | None = None,
             clock: Clock | None = None) -> AsyncApp:
        """Load a manifest file, or YAML text (a string containing a newline or ``kind:``; relative paths in
        it resolve against the current directory). Raises :class:`telo.manifest.ManifestLoadError` listing
        every problem. ``env`` replaces ``os.environ`` for ``variables``/``secrets``."""
        clock = clock or SYSTEM_CLOCK
        manifest = load_source(source, env)
        # It starts runs, so it may create the journal it names (telo.operations.journals).
        store = None if journal is None else open_journal(journal, create=True, clock=clock)
        from telo.kinds.controllers import CONTROLLERS

        return cls(Application(manifest, controllers=CONTROLLERS, clock=clock), journal=store,
                   owns_journal=store is not None)

    def _use_journal(self, resource: Resource) -> None:
        if isinstance(resource, Journal) and self.journal_store is not None:
            resource.use_store(self.journal_store)

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
        return only_journal((r for r in self.application.resources.values() if isinstance(r, Journal)),
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
        fence = await wf.store.claim(run, holder, self.clock.now_ms())
        if fence is None:
            return False
        if background:
            self._track(run, self.application.hold(wf.run_to_rest(run, inputs, fence)))
        else:
            await wf.execute(run, inputs, fence)
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
                # through a time park under a fake clock, which only the test's clock can end.
                if timed and self._fake_clock:
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
        call = dict(inputs or {})
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

    async def deliver(self, token: str, payload: Any = None, *, continue_run: bool = True) -> Delivery:
        """Deliver ``payload`` to the run parked on ``token`` (validated against the schema its Await recorded
        first, ``ERR_DURABLE_PAYLOAD_INVALID``); the run then continues in this process (``continue_run``)."""
        await self._ready()
        out = await asyncio.to_thread(actions.deliver, self._store(), token, payload)
        if not out.delivered or out.run is None:
            return Delivery(False)
        continued = continue_run and await self._continue(out.run, background=True)
        return Delivery(True, out.run, continued)

    async def cancel(self, run: RunLike, reason: str = "cancelled") -> bool:
        """Cancel the run (a body executing now stops at its next step); false if it had already settled."""
        await self._ready()
        return (await asyncio.to_thread(actions.cancel, self._store(), run_id(run), reason)).cancelled

    async def resume(self, run: RunLike, *, force: bool = False, reason: str = "resumed by operator",
                     continue_run: bool = True) -> bool:
        """Continue a parked run now, an operator override recorded in the journal (``telo resume``); a run
        held because its manifest changed continues only with ``force``. False, with nothing written, for a run a
        resume would not move: settled, not parked, or waiting for ``resolve`` or ``deliver`` (``telo resume``'s
        rule, :func:`telo.operations.actions.resume`; :meth:`status` shows where it waits)."""
        await self._ready()
        target = run_id(run)
        out = await asyncio.to_thread(lambda: actions.resume(self._store(), target, reason, self.clock.now_ms(),
                                                             force=force))
        if not out.resumed:
            return False
        if continue_run:
            await self._continue(target, background=True)
        return True

    async def fork(self, run: RunLike, checkpoint: int | Checkpoint, new_run: str | None = None, *,
                   continue_run: bool = True) -> RunRef:
        """Copy the run's state at ``checkpoint`` into a new run (``new_run``, default ``<run>:fork:<8 hex>``),
        leaving the original untouched; the copy continues from there."""
        await self._ready()
        out = await asyncio.to_thread(actions.fork, self._store(), run_id(run), checkpoint, new_run)
        if continue_run:
            await self._continue(out.run, background=True)
        return RunRef(out.run, out.workflow, True, out.status)

    async def restore(self, run: RunLike, checkpoint: int | Checkpoint, *, reason: str = "restored by operator",
                      continue_run: bool = True) -> RunStatus:
        """Roll the run back to ``checkpoint`` as a new journal epoch: the steps after it execute again."""
        await self._ready()
        target = run_id(run)
        await asyncio.to_thread(lambda: actions.restore(self._store(), target, checkpoint, reason=reason,
                                                        clock=self.clock))
        if continue_run:
            await self._continue(target, background=True)
        return await self.status(target)

    async def checkpoints(self, run: RunLike) -> list[Checkpoint]:
        """The states the run can be restored to or forked from (its start, each step, each snapshot)."""
        await self._ready()
        return await asyncio.to_thread(runs.checkpoints, self._store(), run_id(run))

    async def journal(self, run: RunLike) -> list[JournalEntry]:
        """The run's journal entries in log order, values decoded."""
        await self._ready()
        target = run_id(run)
        await self._read(target)
        return journal_entries(target, await asyncio.to_thread(self._store().read_entries, target))

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


