"""``DurableLocal.Resumer``: the service that sweeps a workflow's due runs and continues them (reference §6).

A sweep lists due runs (time parks whose hour has come, runs whose claim lapsed), claims each, and continues
it with :meth:`Workflow.run_to_rest`; a run this process cannot read (a newer codec, a damaged entry) is
reported once and skipped, never failed (issue 12: corruption is isolated).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from telo.durable import shutdown
from telo.durable.aio import AsyncStore
from telo.durable.halting import halts
from telo.errors import ERR_DURABLE_JOURNAL_CORRUPT, TeloError
from telo.journal.claims import Fence, Holder
from telo.journal.model import NO_VALUE
from telo.runtime.resource import Resource

from .workflow import UNREADABLE, Workflow

if TYPE_CHECKING:
    from telo.runtime.resource import Host

log = logging.getLogger("telo.durable")


class Resumer(Resource):
    """A service that sweeps due runs of one workflow, claims each, and continues it (reference §6)."""

    kind = "DurableLocal.Resumer"
    batch = 100  # due runs continued concurrently per sweep

    def __init__(self, app: Host, name: str, config: Mapping[str, Any], module: str | None) -> None:
        super().__init__(app, name, config, module)
        self.holder = Holder.for_this_process(f"resumer-{name}").to_text()
        self.unreadable: set[str] = set()
        self._wake = asyncio.Event()
        self._stopped = False
        self.resumed = 0

    @property
    def workflow(self) -> Workflow:
        resource = self.app.resource_for(self.config["workflow"])
        assert isinstance(resource, Workflow)
        return resource

    def interval_s(self) -> float:
        from telo.values.plain import parse_cel_duration

        raw = self.config.get("interval", "5s")
        if isinstance(raw, int | float):
            return float(raw) / 1000
        return parse_cel_duration(str(raw)).total_nanos() / 1e9

    async def run(self) -> None:
        self.app.hold(self.loop())

    async def loop(self) -> None:
        loop = asyncio.get_running_loop()
        def woken(run: str) -> None:
            loop.call_soon_threadsafe(self._wake.set)

        unsubscribe = self.workflow.journal.store.subscribe_wake(woken)
        undrain = shutdown.on_drain(self.stop)
        try:
            while not self._stopped and not shutdown.draining():
                await self.sweep()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.interval_s())
        finally:
            undrain()
            if unsubscribe is not None:
                unsubscribe()

    async def sweep(self) -> int:
        """One pass: claim and continue every due run; returns how many were continued.

        The due runs of one pass are continued concurrently (at most ``batch``): each is claimed on its own,
        so this is as safe as one at a time, and their journal writes share group commits instead of each
        run paying its fsyncs in turn (100 interrupted runs: ~1,300 commits one after another otherwise)."""
        wf = self.workflow
        store = wf.store
        if shutdown.draining():
            return 0
        try:
            due = await store.due_runs(self.app.clock.now_ms(), self.batch + len(self.unreadable))
        except TeloError:
            log.warning("durable.resumer.sweep_failed", extra={"durable.workflow": wf.name}, exc_info=True)
            return 0
        due = [run for run in due if run not in self.unreadable][: self.batch]
        outcomes = await asyncio.gather(*(self._continue(wf, store, run) for run in due), return_exceptions=True)
        for outcome in outcomes:  # as one at a time: an unexpected error ends the pass (after the others settled)
            if isinstance(outcome, BaseException):
                raise outcome
        return sum(outcomes)  # type: ignore[arg-type]

    async def _continue(self, wf: Workflow, store: AsyncStore, run: str) -> int:
        """Claim and continue one due run: 1 if it was continued, 0 if skipped (also when the journal failed
        on the way: the next sweep tries again, and the claim lapses if it could not be released)."""
        if self._stopped:
            return 0
        fence = None
        try:
            fence = await store.claim(run, self.holder, self.app.clock.now_ms())
            if fence is None:
                return 0
            return await self._continue_claimed(wf, store, run, fence)
        except TeloError as exc:
            if not halts(exc):
                raise
            log.warning("durable.resumer.journal_failed", extra={"durable.run": run, "error.code": exc.code,
                                                                 "error.message": exc.message})
            if fence is not None:
                with contextlib.suppress(TeloError):
                    await store.release(run, fence)
            return 0

    async def _continue_claimed(self, wf: Workflow, store: AsyncStore, run: str, fence: Fence) -> int:
        record = await store.read_run(run)
        if record is None or record.terminal or (record.workflow is not None and record.workflow != wf.name):
            await store.release(run, fence)  # settled after due_runs listed it: nothing to continue
            return 0
        if record.corrupt is not None:  # damaged: listed and shown, never executed (RunRecord.corrupt)
            await store.release(run, fence)
            self._skip(run, ERR_DURABLE_JOURNAL_CORRUPT, record.corrupt)
            return 0
        try:
            inputs = record.decoded_inputs()
            execution = await wf.execute(run, {} if inputs is NO_VALUE else inputs, fence)
        except TeloError as exc:
            if exc.code in UNREADABLE:
                with contextlib.suppress(TeloError):
                    await store.release(run, fence)
                self._skip(run, exc.code, exc.message)
            elif halts(exc):
                raise  # the journal failed: _continue reports it and lets go
            else:
                log.warning("durable.resumer.run_failed", extra={"durable.run": run}, exc_info=True)
            return 0
        if execution.status == "running" and execution.error is not None \
                and execution.error.get("code") in UNREADABLE:
            self._skip(run, str(execution.error["code"]), str(execution.error.get("message")))
            return 0
        self.resumed += 1
        log.info("durable.resumer.resumed", extra={"durable.run": run, "durable.status": execution.status})
        return 1

    def _skip(self, run: str, code: str, message: str) -> None:
        """A run this process cannot read (damaged, or written by a newer telo): skipped from now on, said once;
        it stays as it is for an operator (`telo status`, cancel, restore) or a newer worker."""
        if run not in self.unreadable:
            self.unreadable.add(run)
            log.error("durable.resumer.unreadable", extra={"durable.run": run, "error.code": str(code),
                                                            "error.message": message})

    def stop(self) -> None:
        """Sweep no more (teardown, or the process is draining: telo.durable.shutdown)."""
        self._stopped = True
        self._wake.set()

    async def teardown(self) -> None:
        self.stop()
