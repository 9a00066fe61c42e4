"""The synchronous Python API: :class:`App` runs an :class:`~telo.api.aio.AsyncApp` on a private event loop in
a background thread, so a run it starts keeps executing while your code does other things, exactly as under
``telo run``; every method blocks until its answer is ready (docs/python-api.md)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from telo.api.aio import AsyncApp
from telo.api.results import (
    Delivery,
    JournalEntry,
    Resolution,
    RunLike,
    RunList,
    RunRef,
    RunResult,
    RunStatus,
    Scheduled,
    Wait,
)
from telo.clock import Clock
from telo.durable.messages import Event, Sent
from telo.durable.slots import DEFAULT_CONCURRENCY
from telo.durable.streams import StreamPage, StreamSummary
from telo.errors import Code, TeloError
from telo.journal.eventlog import Checkpoint
from telo.journal.model import NO_VALUE
from telo.manifest import Manifest
from telo.operations.queue_limits import UNSET, Limit, Rate
from telo.operations.schedules import ScheduleView
from telo.runtime.app import Application

T = TypeVar("T")


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
    def load(cls, source: str | Path | None, *, env: Mapping[str, str] | None = None, journal: str | None = None,
             clock: Clock | None = None, recover: bool = False, journal_compat: str | None = None) -> App:
        """See :meth:`AsyncApp.load`; with ``recover=True`` the application starts, and its due runs are
        continued, before this returns."""
        app = cls(AsyncApp.load(source, env=env, journal=journal, clock=clock, recover=recover,
                                journal_compat=journal_compat))
        if recover:
            try:
                app._call(app.aio._ready())
            except BaseException:
                app.close()
                raise
        return app

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a sync telo.App method was called from its own event loop; use app.aio")
        if self._closed:
            coro.close()
            raise TeloError(Code.APP_CLOSED, "this App is closed", hint="load the manifest again")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._submit(coro).result()

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

    def runs(self, status: str | None = None, workflow: str | None = None, since: Any = None, limit: int = 100, *,
             after: str | None = None) -> RunList:
        """See :meth:`AsyncApp.runs`."""
        return self._call(self.aio.runs(status, workflow, since, limit, after=after))

    def schedule(self, workflow: str, inputs: Mapping[str, Any] | None = None, *, after: Wait = None,
                 at: Any = None, run_id: str | None = None) -> Scheduled:
        """See :meth:`AsyncApp.schedule`."""
        return self._call(self.aio.schedule(workflow, inputs, after=after, at=at, run_id=run_id))

    def resolve(self, run: RunLike, path: str, *, redrive: bool = False, skip_with: Any = NO_VALUE,
                fail: bool = False, continue_run: bool = True) -> Resolution:
        """See :meth:`AsyncApp.resolve`."""
        return self._call(self.aio.resolve(run, path, redrive=redrive, skip_with=skip_with, fail=fail,
                                           continue_run=continue_run))

    def deliver(self, token: str, payload: Any = None, *, continue_run: bool = True) -> Delivery:
        """See :meth:`AsyncApp.deliver`."""
        return self._call(self.aio.deliver(token, payload, continue_run=continue_run))

    def send(self, run: RunLike, topic: str, payload: Any = None, *, key: str | None = None,
             continue_run: bool = True) -> Sent:
        """See :meth:`AsyncApp.send`."""
        return self._call(self.aio.send(run, topic, payload, key=key, continue_run=continue_run))

    def event(self, run: RunLike, name: str, *, wait: Wait = None) -> Event | None:
        """See :meth:`AsyncApp.event`."""
        return self._call(self.aio.event(run, name, wait=wait))

    def events(self, run: RunLike, name: str | None = None) -> list[Event]:
        """See :meth:`AsyncApp.events`."""
        return self._call(self.aio.events(run, name))

    def read_stream(self, run: RunLike, stream: str, offset: int = 0) -> StreamPage:
        """See :meth:`AsyncApp.read_stream`."""
        return self._call(self.aio.read_stream(run, stream, offset))

    def list_streams(self, run: RunLike) -> list[StreamSummary]:
        """See :meth:`AsyncApp.list_streams`."""
        return self._call(self.aio.list_streams(run))

    def stream(self, run: RunLike, stream: str, offset: int = 0, *, wait: Wait = None
               ) -> Iterator[tuple[int, Any]]:
        """See :meth:`AsyncApp.stream`: a generator that blocks for each next value."""
        values = self.aio.stream(run, stream, offset, wait=wait)

        async def next_value() -> tuple[int, Any]:
            return await anext(values)

        while True:
            try:
                yield self._call(next_value())
            except StopAsyncIteration:
                return

    def cancel(self, run: RunLike, reason: str = "cancelled") -> bool:
        """See :meth:`AsyncApp.cancel`."""
        return self._call(self.aio.cancel(run, reason))

    def resume(self, run: RunLike, *, force: bool = False, reason: str = "resumed by operator",
               continue_run: bool = True) -> bool:
        """See :meth:`AsyncApp.resume`."""
        return self._call(self.aio.resume(run, force=force, reason=reason, continue_run=continue_run))

    def fork(self, run: RunLike, checkpoint: int | Checkpoint, new_run: str | None = None, *,
             keep_keys: bool = False, continue_run: bool = True) -> RunRef:
        """See :meth:`AsyncApp.fork`."""
        return self._call(self.aio.fork(run, checkpoint, new_run, keep_keys=keep_keys, continue_run=continue_run))

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

    def queue(self, name: str, *, oldest: int = 10) -> dict[str, Any]:
        """See :meth:`AsyncApp.queue`."""
        return self._call(self.aio.queue(name, oldest=oldest))

    def set_queue_limits(self, name: str, *, concurrency: Limit = UNSET, worker_concurrency: Limit = UNSET,
                         key_limit: Limit = UNSET, rate_limit: Rate = UNSET, reset: bool = False,
                         by: str | None = None) -> dict[str, Any]:
        """See :meth:`AsyncApp.set_queue_limits`."""
        return self._call(self.aio.set_queue_limits(name, concurrency=concurrency,
                                                    worker_concurrency=worker_concurrency, key_limit=key_limit,
                                                    rate_limit=rate_limit, reset=reset, by=by))

    def schedules(self) -> list[ScheduleView]:
        """See :meth:`AsyncApp.schedules`."""
        return self._call(self.aio.schedules())

    def schedule_view(self, name: str) -> ScheduleView:
        """See :meth:`AsyncApp.schedule_view`."""
        return self._call(self.aio.schedule_view(name))

    def pause_schedule(self, name: str, reason: str | None = None, *, by: str | None = None) -> ScheduleView:
        """See :meth:`AsyncApp.pause_schedule`."""
        return self._call(self.aio.pause_schedule(name, reason, by=by))

    def resume_schedule(self, name: str, reason: str | None = None, *, by: str | None = None) -> ScheduleView:
        """See :meth:`AsyncApp.resume_schedule`."""
        return self._call(self.aio.resume_schedule(name, reason, by=by))

    def trigger_schedule(self, name: str, reason: str | None = None, *, by: str | None = None) -> str:
        """See :meth:`AsyncApp.trigger_schedule`."""
        return self._call(self.aio.trigger_schedule(name, reason, by=by))

    def backfill_schedule(self, name: str, start: Any, end: Any, reason: str | None = None, *,
                          by: str | None = None) -> list[str]:
        """See :meth:`AsyncApp.backfill_schedule`."""
        return self._call(self.aio.backfill_schedule(name, start, end, reason, by=by))

    def run_due(self, limit: int = 100) -> int:
        """See :meth:`AsyncApp.run_due`."""
        return self._call(self.aio.run_due(limit))

    def recover(self, limit: int = 1000) -> int:
        """See :meth:`AsyncApp.recover`."""
        return self._call(self.aio.recover(limit))

    def serve(self, *, concurrency: int = DEFAULT_CONCURRENCY, interval: Wait = 1.0, until_idle: bool = False) -> None:
        """:meth:`AsyncApp.serve`, blocking until it stops: with ``until_idle``, once nothing is running or due;
        otherwise on Ctrl-C (``KeyboardInterrupt``), which stops it gracefully — the executions it started come
        to rest first — and returns, or when another thread calls :meth:`close`."""
        fut = self._submit(self.aio.serve(concurrency=concurrency, interval=interval, until_idle=until_idle))
        try:
            while True:  # a short wait at a time: a blocked result() would not see Ctrl-C until it returned
                try:
                    return fut.result(timeout=0.1)
                except concurrent.futures.TimeoutError:
                    continue
        except KeyboardInterrupt:
            self._call(self.aio._stop_serving())  # waits while its executions come to rest (a 2nd Ctrl-C: at once)
            with contextlib.suppress(concurrent.futures.CancelledError):
                fut.result()
        except concurrent.futures.CancelledError:
            return  # close() stopped it

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


def load(source: str | Path | None, *, env: Mapping[str, str] | None = None, journal: str | None = None,
         clock: Clock | None = None, recover: bool = False, journal_compat: str | None = None) -> App:
    """Load a manifest (a path, or YAML text) as a synchronous :class:`App`; see :meth:`AsyncApp.load`
    (``journal_compat="legacy"``: journals a runtime that predates the codec reads, docs/compat.md)."""
    return App.load(source, env=env, journal=journal, clock=clock, recover=recover, journal_compat=journal_compat)

