"""The Python API: load a manifest, start and address durable runs, from sync or async code (issue 7).

Two classes, one vocabulary:

* :class:`App` — synchronous. ``telo.load(...)`` returns one. It runs the application on a private event loop
  in a background thread, so a run it starts keeps executing while your code does other things, exactly as
  under ``telo run``; every method blocks until its answer is ready.
* :class:`AsyncApp` — the same methods as coroutines, on the event loop you await them from
  (``AsyncApp.load(...)``; ``async with`` closes it). Async ``@telo.kind`` functions then run on your loop.

Runs are addressed as in the CLI: by run id (a ``str`` or the :class:`RunRef` :meth:`AsyncApp.start`
returned) in the application's journal. ``journal=`` names a journal the way ``--journal`` does (a SQLite
file, a file-journal directory, ``postgresql://…``, ``memory:``) and replaces the journal of every journal
resource of the manifest: runs are written there and every addressing method reads it.

Results are frozen dataclasses whose values are domain values (``int``, ``float``, ``str``, ``dict``,
:class:`telo.values.Timestamp` …), as CEL and the journal see them.

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
import contextvars
import threading
import time
from collections.abc import Awaitable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from telo.clock import SYSTEM_CLOCK, Clock, SystemClock
from telo.errors import Code, TeloError
from telo.journal.eventlog import Checkpoint
from telo.journal.model import NO_VALUE, Parked, RunRecord
from telo.manifest import Manifest, Pos, ResourceDecl, load_manifest
from telo.runtime.app import Application

if TYPE_CHECKING:
    from telo.durable.workflow import Workflow
    from telo.journal.store import Store

__all__ = [
    "App",
    "AsyncApp",
    "Checkpoint",
    "Delivery",
    "JournalEntry",
    "Parked",
    "RunError",
    "RunRef",
    "RunResult",
    "RunStatus",
    "load",
]

T = TypeVar("T")
Wait = float | int | str | None

INLINE_SOURCE = "inline-manifest.yaml"  # the source name (in the cwd) of a manifest given as YAML text
POLL_S = 0.02  # how often a wait re-reads a run record


# --- results -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunRef:
    """A run :meth:`AsyncApp.start` started (``started``) or attached to; ``status`` as it was then."""

    run_id: str
    workflow: str | None
    started: bool
    status: str

    def __str__(self) -> str:
        return self.run_id


RunLike: TypeAlias = str | RunRef


@dataclass(frozen=True, slots=True)
class RunError:
    """How a run failed: the error code and message its record keeps."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class RunStatus:
    """A run's record (``telo status``): where it is, where it waits, who executes it."""

    run_id: str
    status: str  # scheduled | running | parked | completed | failed | cancelled
    workflow: str | None = None
    due_at: int | None = None  # epoch ms it becomes due (a time park, a scheduled run)
    parked: Parked | None = None  # where a parked run waits (path, resource, token, reason)
    error: RunError | None = None
    claim_holder: str | None = None  # the process executing it right now (while its claim is live)
    claim_until: int | None = None
    unconfirmed_effects: tuple[Mapping[str, Any], ...] = ()  # {step, resolution} of each unknown outcome
    created_at: int | None = None
    updated_at: int | None = None

    @property
    def settled(self) -> bool:
        """Completed, failed or cancelled: nothing will change it (short of a restore)."""
        return self.status in ("completed", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class RunResult:
    """A run's outcome so far (``telo result``): ``value`` is its result once completed, ``{"steps": …}``."""

    run_id: str
    status: str
    value: Any = None
    error: RunError | None = None
    replayed_steps: int = 0  # steps the settling execution returned from the journal instead of running
    collapsed_regions: int = 0
    collapse_reasons: tuple[str, ...] = ()
    parked: Parked | None = None
    due_at: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def settled(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")

    @property
    def steps(self) -> Mapping[str, Any]:
        """The completed run's ``steps`` map (``{name: {"result": …}}``); empty before completion."""
        steps = self.value.get("steps") if isinstance(self.value, Mapping) else None
        return steps if isinstance(steps, Mapping) else {}

    def step(self, name: str) -> Any:
        """The result of top-level step ``name`` (``KeyError`` if it produced none)."""
        return self.steps[name]["result"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """What :meth:`AsyncApp.deliver` did: ``delivered`` is false for a spent or unknown token."""

    delivered: bool
    run_id: str | None = None
    continued: bool = False  # the run was continued in this process


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journal entry, its value decoded (``has_value`` false for an entry that carries none)."""

    seq: int | None
    path: str
    kind: str  # step | decision
    decision: str | None = None
    target: Mapping[str, str] | None = None
    value: Any = None
    has_value: bool = False


def _error(raw: Mapping[str, Any] | None) -> RunError | None:
    if not raw:
        return None
    return RunError(str(raw.get("code") or Code.DURABLE_RUN_FAILED), str(raw.get("message") or ""))


def _result(record: RunRecord) -> RunResult:
    value = record.decoded_result() if record.result is not None else NO_VALUE
    return RunResult(record.run, record.status, None if value is NO_VALUE else value, _error(record.error),
                     record.replayed_steps or 0, record.collapsed_regions or 0, tuple(record.collapse_reasons or ()),
                     record.parked, record.due_at)


def _seconds(wait: Wait) -> float | None:
    if wait is None:
        return None
    if isinstance(wait, str):
        from telo.durable.addressing import duration_ms

        return duration_ms(wait, "wait") / 1000
    return float(wait)


def _run_id(run: RunLike) -> str:
    return run.run_id if isinstance(run, RunRef) else str(run)


def _seq(checkpoint: int | Checkpoint) -> int:
    return checkpoint.seq if isinstance(checkpoint, Checkpoint) else int(checkpoint)


def _not_found(run: str) -> TeloError:
    return TeloError(Code.DURABLE_RUN_NOT_FOUND, f"no run {run!r} in this journal",
                     hint="list the journal's runs with `telo runs list`", data={"run": run})


# --- the hosted application --------------------------------------------------------------------------------

_CAPTURE: contextvars.ContextVar[list[asyncio.Future[Any]] | None] = contextvars.ContextVar("telo_api_capture",
                                                                                          default=None)


class _Host(Application):
    """The runtime application, with two additions the API needs: the holds a call creates can be captured
    (to await the run it started), and a ``journal=`` store replaces every journal resource's own."""

    def __init__(self, manifest: Manifest, *, clock: Clock, journal: Store | None) -> None:
        super().__init__(manifest, clock=clock)
        self.journal_store = journal
        self.holds: set[asyncio.Future[Any]] = set()

    def hold(self, awaitable: Awaitable[Any]) -> asyncio.Future[Any]:
        fut = super().hold(awaitable)
        self.holds.add(fut)
        fut.add_done_callback(self.holds.discard)
        captured = _CAPTURE.get()
        if captured is not None:  # only the capturing task's context sees its list
            captured.append(fut)
        return fut

    @contextlib.contextmanager
    def capturing(self) -> Iterator[list[asyncio.Future[Any]]]:
        found: list[asyncio.Future[Any]] = []
        token = _CAPTURE.set(found)
        try:
            yield found
        finally:
            _CAPTURE.reset(token)

    def create_resources(self) -> None:
        super().create_resources()
        self.use_journal(self.resources.values())

    def use_journal(self, resources: Any) -> None:
        from telo.durable.journals import Journal

        if self.journal_store is not None:
            for resource in resources:
                if isinstance(resource, Journal):
                    resource.use_store(self.journal_store)


# --- AsyncApp ----------------------------------------------------------------------------------------------


class AsyncApp:
    """A loaded manifest whose durable runs you start and address with coroutines (see the module docstring).

    Resources are created and initialised on first use (any coroutine method), in the running event loop.
    """

    def __init__(self, application: _Host, *, owns_journal: bool = False) -> None:
        self.application = application
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
        from telo.analysis import cel_checker

        text: str | None = None
        if isinstance(source, str) and ("\n" in source or "kind:" in source):
            text, path = source, Path.cwd() / INLINE_SOURCE
        else:
            path = Path(source)
        clock = clock or SYSTEM_CLOCK
        manifest = load_manifest(path, text=text, env=env, cel_checker=cel_checker)
        store = None
        if journal is not None:
            from telo.journal import open_store

            store = open_store(journal, clock=clock)
        return cls(_Host(manifest, clock=clock, journal=store), owns_journal=store is not None)

    @property
    def manifest(self) -> Manifest:
        return self.application.manifest

    # --- Python-built resources ---------------------------------------------------------------------------

    def add(self, *documents: Mapping[str, Any]) -> list[str]:
        """Add resource documents built with :mod:`telo.builder` (``workflow(...)``, ``resource(...)``) as if
        they were written in the manifest; returns the names of the resources they declared (inline ones
        included). A workflow without ``journal`` gets the manifest's only journal."""
        from telo.api_manifest import POSITION, add_documents

        docs = [self._with_journal(d) for d in documents]
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

    def _with_journal(self, doc: Mapping[str, Any]) -> Mapping[str, Any]:
        if "journal" in doc or not isinstance(doc.get("kind"), str):
            return doc
        try:
            spec = self.manifest.kind(doc["kind"])
        except KeyError:
            return doc  # reported by the loader's own checks
        if spec.canonical != "DurableLocal.Workflow":
            return doc
        from telo.builder import Document
        from telo.kinds import conforms
        from telo.manifest import Ref

        journals = [d for d in self.manifest.resources.values()
                    if conforms(d.spec, "DurableLocal.Journal", self.manifest.canonical_kinds)]
        if len(journals) != 1:
            raise TeloError(Code.JOURNAL_AMBIGUOUS, f"workflow {doc.get('metadata')}: the manifest declares "
                            f"{len(journals)} journals", hint="name one with journal=")
        out = Document({**doc, "journal": Ref(journals[0].name, None, journals[0].pos)})
        out.__telo_pos__ = getattr(doc, "__telo_pos__", None)
        return out

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
        from telo.runtime.app import controllers

        app, table, created = self.application, controllers(), []
        for decl in decls:
            factory = table.get(decl.kind)
            if factory is None:
                if decl.spec.capability in ("type", "abstract"):
                    continue
                raise TeloError(Code.KIND_NOT_IMPLEMENTED, f"{decl.pos}: kind {decl.kind} is not implemented")
            app.decls[decl.name] = decl
            app.resources[decl.name] = resource = factory(app, decl.name, decl.config, decl.module)
            created.append(resource)
        app.use_journal(created)
        for resource in created:
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
        if self._owns_journal and self.application.journal_store is not None:
            await asyncio.to_thread(self.application.journal_store.close)

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
        if self.application.journal_store is not None:
            return self.application.journal_store
        from telo.durable.journals import Journal

        journals = [r for r in self.application.resources.values() if isinstance(r, Journal)]
        if len(journals) != 1:
            raise TeloError(Code.JOURNAL_AMBIGUOUS, f"{self.manifest.source} declares {len(journals)} journals",
                            hint="name the journal with telo.load(..., journal=PATH-or-URL)")
        return journals[0].store

    async def _read(self, run: str) -> RunRecord:
        record = await asyncio.to_thread(self._store().read_run, run)
        if record is None:
            raise _not_found(run)
        return record

    def _workflow(self, name: str) -> Workflow:
        from telo.durable.workflow import Workflow

        resource = self.application.resources.get(name)
        if not isinstance(resource, Workflow):
            names = sorted(n for n, r in self.application.resources.items() if isinstance(r, Workflow))
            raise TeloError(Code.RESOURCE_NOT_FOUND, f"{name!r} is not a durable workflow of this manifest",
                            hint=f"its workflows: {', '.join(names) or 'none'}", data={"resource": name})
        return resource

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
                return _result(record)
            if local:
                # Executing here: wait for it (a park read now may be the one it is about to continue), except
                # through a time park under a fake clock, which only the test's clock can end.
                if timed and self._fake_clock:
                    return _result(record)
            elif record.status == "parked":
                return _result(record)
            else:
                from telo.journal.rules import claim_is_live

                if record.status != "running" or not claim_is_live(record.claim, self.clock.now_ms()):
                    return _result(record)  # scheduled, or interrupted with nobody executing it
            if deadline is not None and time.monotonic() >= deadline:
                return _result(record)
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
        seconds = _seconds(wait)
        ref = await self.start(workflow, inputs)
        return await self._rest(ref.run_id, None if seconds is None else time.monotonic() + seconds)

    # --- addressing runs ----------------------------------------------------------------------------------

    async def status(self, run: RunLike) -> RunStatus:
        """The run's record (``telo status``); ``ERR_DURABLE_RUN_NOT_FOUND`` for an unknown run."""
        await self._ready()
        run_id = _run_id(run)
        record = await self._read(run_id)
        unconfirmed: tuple[Mapping[str, Any], ...] = ()
        if not record.terminal:
            unconfirmed = tuple(await asyncio.to_thread(_unconfirmed, self._store(), run_id))
        claim = record.claim
        return RunStatus(record.run, record.status, record.workflow, record.due_at, record.parked,
                         _error(record.error), claim.holder if claim else None, claim.until if claim else None,
                         unconfirmed, record.created_at, record.updated_at)

    async def result(self, run: RunLike, wait: Wait = None) -> RunResult:
        """The run's outcome (``telo result``); with ``wait`` (seconds or ``"30s"``), wait up to that long for
        it to settle first."""
        await self._ready()
        run_id = _run_id(run)
        seconds = _seconds(wait)
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            record = await self._read(run_id)
            if record.terminal or deadline is None or time.monotonic() >= deadline:
                return _result(record)
            await asyncio.sleep(POLL_S)

    async def wait(self, run: RunLike, timeout: Wait = None) -> RunResult:
        """Wait until the run comes to rest — it settles, or parks waiting for a delivery or an operator (or on
        time, under a fake clock) — as :meth:`run` does after starting it; ``timeout`` bounds the wait."""
        await self._ready()
        seconds = _seconds(timeout)
        return await self._rest(_run_id(run), None if seconds is None else time.monotonic() + seconds)

    async def deliver(self, token: str, payload: Any = None, *, continue_run: bool = True) -> Delivery:
        """Deliver ``payload`` to the run parked on ``token`` (validated against the awaiting resource's
        ``outputType`` first); the run then continues in this process (``continue_run``)."""
        from telo.durable.waits import deliver

        await self._ready()
        store = self._store()
        parked = await asyncio.to_thread(store.run_parked_on, token)
        if parked is not None and parked.parked is not None and parked.parked.resource:
            self._validate_payload(parked.parked.resource, token, payload)
        out = await asyncio.to_thread(deliver, store, token, payload)
        if not out.get("delivered"):
            return Delivery(False)
        run = str(out["run"])
        continued = continue_run and await self._continue(run, background=True)
        return Delivery(True, run, continued)

    def _validate_payload(self, resource: str, token: str, payload: Any) -> None:
        from telo.runtime.contracts import SchemaValidator, schema_of

        target = self.application.resources.get(resource)
        if target is None or target.kind != "Durable.Await":
            return
        schema = schema_of(self.application, target.config.get("outputType"))
        if schema is not None:
            SchemaValidator(schema, Code.DURABLE_PAYLOAD_INVALID).validate(
                payload, where=f"the payload delivered to {token!r}")

    async def cancel(self, run: RunLike, reason: str = "cancelled") -> bool:
        """Cancel the run (a body executing now stops at its next step); false if it had already settled."""
        from telo.journal.model import Outcome

        await self._ready()
        run_id = _run_id(run)
        record = await self._read(run_id)
        if record.terminal:
            return False
        await asyncio.to_thread(self._store().complete, run_id, Outcome.cancelled(reason))
        return True

    async def resume(self, run: RunLike, *, force: bool = False, reason: str = "resumed by operator",
                     continue_run: bool = True) -> bool:
        """Continue a parked run now, an operator override recorded in the journal (``telo resume``); a run
        held because its manifest changed continues only with ``force``. False if it had settled."""
        from telo.durable.addressing import resume_run

        await self._ready()
        run_id = _run_id(run)
        out = await asyncio.to_thread(resume_run, self._store(), run_id, reason, self.clock.now_ms(), force=force)
        if not out.get("resumed"):
            return False
        if continue_run:
            await self._continue(run_id, background=True)
        return True

    async def fork(self, run: RunLike, checkpoint: int | Checkpoint, new_run: str | None = None, *,
                   continue_run: bool = True) -> RunRef:
        """Copy the run's state at ``checkpoint`` into a new run (``new_run``, default ``<run>~fork-<id>``),
        leaving the original untouched; the copy continues from there."""
        from telo.clock import uuid4
        from telo.journal import eventlog

        await self._ready()
        run_id = _run_id(run)
        target = new_run or f"{run_id}~fork-{uuid4()[:8]}"
        state = await asyncio.to_thread(eventlog.fork, self._store(), run_id, _seq(checkpoint), target)
        record = state.record
        if continue_run:
            await self._continue(target, background=True)
        return RunRef(target, record.workflow if record else None, True, record.status if record else "running")

    async def restore(self, run: RunLike, checkpoint: int | Checkpoint, *, reason: str = "restored by operator",
                      continue_run: bool = True) -> RunStatus:
        """Roll the run back to ``checkpoint`` as a new journal epoch: the steps after it execute again."""
        from telo.journal import eventlog

        await self._ready()
        run_id = _run_id(run)
        await asyncio.to_thread(lambda: eventlog.restore(self._store(), run_id, _seq(checkpoint), reason=reason,
                                                         clock=self.clock))
        if continue_run:
            await self._continue(run_id, background=True)
        return await self.status(run_id)

    async def checkpoints(self, run: RunLike) -> list[Checkpoint]:
        """The states the run can be restored to or forked from (its start, each step, each snapshot)."""
        from telo.journal import eventlog

        await self._ready()
        return await asyncio.to_thread(eventlog.checkpoints, self._store(), _run_id(run))

    async def journal(self, run: RunLike) -> list[JournalEntry]:
        """The run's journal entries in log order, values decoded."""
        await self._ready()
        run_id = _run_id(run)
        await self._read(run_id)
        entries = await asyncio.to_thread(self._store().read_entries, run_id)
        out = []
        for e in entries:
            decoded = e.decode(run_id)
            out.append(JournalEntry(e.seq, e.path, e.kind, e.decision, dict(e.target) if e.target else None,
                                    None if decoded is NO_VALUE else decoded, decoded is not NO_VALUE))
        return out

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


def _unconfirmed(store: Store, run: str) -> list[dict[str, Any]]:
    """Every recorded resolution of an effect whose outcome was unknown (``<step>/@unconfirmed[n]``)."""
    from telo import paths
    from telo.journal import eventlog

    out = []
    for path, entry in eventlog.recover(store, run).entries.items():
        if paths.parse(path)[-1].name == paths.UNCONFIRMED:
            out.append({"step": paths.parent(path), "resolution": entry.decode(run)})
    return out


# --- App (sync) --------------------------------------------------------------------------------------------


class App:
    """The synchronous API: :class:`AsyncApp`'s methods, blocking, on a private event loop in a background
    thread (so runs it starts keep executing between calls). Close it (``with telo.load(...) as app:``)."""

    def __init__(self, inner: AsyncApp) -> None:
        self.aio = inner  # the same application, for code that wants to await
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="telo-app", daemon=True)
        self._thread.start()
        self._closed = False

    @classmethod
    def load(cls, source: str | Path, *, env: Mapping[str, str] | None = None, journal: str | None = None,
             clock: Clock | None = None) -> App:
        """See :meth:`AsyncApp.load`."""
        return cls(AsyncApp.load(source, env=env, journal=journal, clock=clock))

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a sync telo.App method was called from its own event loop; use app.aio")
        if self._closed:
            coro.close()
            raise TeloError(Code.APP_CLOSED, "this App is closed", hint="load the manifest again")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _sync(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        async def call() -> Any:  # on the loop: the application is only ever touched from its own thread
            return fn(*args, **kwargs)

        return self._call(call())

    @property
    def manifest(self) -> Manifest:
        return self.aio.manifest

    @property
    def application(self) -> Application:
        return self.aio.application

    @property
    def clock(self) -> Clock:
        return self.aio.clock

    def add(self, *documents: Mapping[str, Any]) -> list[str]:
        """See :meth:`AsyncApp.add`."""
        return list(self._sync(self.aio.add, *documents))

    def workflow(self, name: str, steps: Sequence[Mapping[str, Any]], *, journal: str | None = None,
                 run_id: Any = None, inputs: Any = None, on_conflict: str | None = None) -> str:
        """See :meth:`AsyncApp.workflow`."""
        return str(self._sync(self.aio.workflow, name, steps, journal=journal, run_id=run_id, inputs=inputs,
                              on_conflict=on_conflict))

    def start(self, workflow: str, inputs: Mapping[str, Any] | None = None) -> RunRef:
        """See :meth:`AsyncApp.start`."""
        return self._call(self.aio.start(workflow, inputs))

    def run(self, workflow: str, inputs: Mapping[str, Any] | None = None, *, wait: Wait = None) -> RunResult:
        """See :meth:`AsyncApp.run`."""
        return self._call(self.aio.run(workflow, inputs, wait=wait))

    def status(self, run: RunLike) -> RunStatus:
        """See :meth:`AsyncApp.status`."""
        return self._call(self.aio.status(run))

    def result(self, run: RunLike, wait: Wait = None) -> RunResult:
        """See :meth:`AsyncApp.result`."""
        return self._call(self.aio.result(run, wait))

    def wait(self, run: RunLike, timeout: Wait = None) -> RunResult:
        """See :meth:`AsyncApp.wait`."""
        return self._call(self.aio.wait(run, timeout))

    def deliver(self, token: str, payload: Any = None, *, continue_run: bool = True) -> Delivery:
        """See :meth:`AsyncApp.deliver`."""
        return self._call(self.aio.deliver(token, payload, continue_run=continue_run))

    def cancel(self, run: RunLike, reason: str = "cancelled") -> bool:
        """See :meth:`AsyncApp.cancel`."""
        return self._call(self.aio.cancel(run, reason))

    def resume(self, run: RunLike, *, force: bool = False, reason: str = "resumed by operator",
               continue_run: bool = True) -> bool:
        """See :meth:`AsyncApp.resume`."""
        return self._call(self.aio.resume(run, force=force, reason=reason, continue_run=continue_run))

    def fork(self, run: RunLike, checkpoint: int | Checkpoint, new_run: str | None = None, *,
             continue_run: bool = True) -> RunRef:
        """See :meth:`AsyncApp.fork`."""
        return self._call(self.aio.fork(run, checkpoint, new_run, continue_run=continue_run))

    def restore(self, run: RunLike, checkpoint: int | Checkpoint, *, reason: str = "restored by operator",
                continue_run: bool = True) -> RunStatus:
        """See :meth:`AsyncApp.restore`."""
        return self._call(self.aio.restore(run, checkpoint, reason=reason, continue_run=continue_run))

    def checkpoints(self, run: RunLike) -> list[Checkpoint]:
        """See :meth:`AsyncApp.checkpoints`."""
        return self._call(self.aio.checkpoints(run))

    def journal(self, run: RunLike) -> list[JournalEntry]:
        """See :meth:`AsyncApp.journal`."""
        return self._call(self.aio.journal(run))

    def run_due(self, limit: int = 100) -> int:
        """See :meth:`AsyncApp.run_due`."""
        return self._call(self.aio.run_due(limit))

    def close(self) -> None:
        """See :meth:`AsyncApp.close`; then stops the background loop. Idempotent."""
        if self._closed:
            return
        try:
            self._call(self.aio.close())
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load(source: str | Path, *, env: Mapping[str, str] | None = None, journal: str | None = None,
         clock: Clock | None = None) -> App:
    """Load a manifest (a path, or YAML text) as a synchronous :class:`App`; see :meth:`AsyncApp.load`."""
    return App.load(source, env=env, journal=journal, clock=clock)

