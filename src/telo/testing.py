"""Testing your own workflows with pytest: a temporary journal, a fake clock, delivery and replay helpers.

Installed as a pytest plugin (entry point ``telo``), so in a project that depends on telo-python these
fixtures are simply there:

* ``telo_journal`` — a fresh SQLite journal path in ``tmp_path``;
* ``telo_clock`` — a :class:`FakeClock` (time passes only when the test says so);
* ``telo_app`` — a factory ``telo_app(manifest_or_yaml, **load_kwargs) -> App`` loading with that journal and
  clock, :func:`track`-ed, and closed when the test ends.

And helpers to call from a test (or from any code holding an :class:`~telo.api.App`):

* :func:`advance` — move the fake clock, then continue every run that became due (``App.run_due``);
* :func:`settle` — fire a run's durable sleeps instantly: while it is parked on time, jump the clock to its
  due time and continue it; returns its :class:`~telo.api.RunResult` once it settles or waits for a delivery;
* :func:`deliver` — deliver a payload and wait for the run it continues to come to rest;
* :func:`wait_parked` — wait until a run (started elsewhere: another thread, a worker, ``App.start``) parks,
  optionally on a given token, and return its status — instead of a hand-written polling loop;
* :func:`assert_replayed` — the last execution of a resumed run replayed its finished steps instead of
  re-running them (from the run's ``replayedSteps`` and the dispatch events: a replayed step emits no
  ``<target>.Invoked``);
* :func:`assert_never_more_than` — around a block, sample a ``Local.Queue``'s held slots from the journal and
  fail if more than ``n`` were ever held at once (issue 16: the queue's limits, asserted in your own tests).

Importing this module is cheap: pytest loads it in every session of a project that installs telo.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from telo.clock import SYSTEM_CLOCK  # (real time: a test's timeouts are in real seconds whatever its fake clock says)

if TYPE_CHECKING:
    from telo.api import App, RunResult, RunStatus
    from telo.clock import FakeClock
    from telo.runtime.app import Application

__all__ = ["advance", "assert_never_more_than", "assert_replayed", "deliver", "settle", "track", "wait_parked"]

POLL_S = 0.02  # how often wait_parked reads the run's record again (real seconds)

_RUN_EVENTS = ("RunCompleted", "RunFailed", "RunParked", "RunCancelled", "RunRunning")


# --- fixtures ----------------------------------------------------------------------------------------------


@pytest.fixture
def telo_journal(tmp_path: Path) -> str:
    """A SQLite journal path of its own for this test (the file is created on first use)."""
    return str(tmp_path / "telo-journal.db")


@pytest.fixture
def telo_clock() -> FakeClock:
    """A fake clock starting at the real now (to the millisecond); :func:`advance` moves it.

    Not a fixed date: a run the test continues under it may have been admitted under the real clock (by a
    `telo run` the test drove, say), and a fake clock behind that would settle it before it was created
    (``updated_at < created_at``)."""
    from telo.clock import SYSTEM_CLOCK, FakeClock

    return FakeClock(start_ms=SYSTEM_CLOCK.now_ms())


@pytest.fixture
def telo_app(telo_journal: str, telo_clock: FakeClock) -> Iterator[Callable[..., App]]:
    """``telo_app(source, **kwargs)``: ``telo.load`` with this test's journal and clock (override either by
    keyword), tracked for :func:`assert_replayed`; every app it made is closed at the end of the test."""
    from telo.api import load

    made: list[App] = []

    def make(source: str | Path, **kwargs: Any) -> App:
        kwargs.setdefault("journal", telo_journal)
        kwargs.setdefault("clock", telo_clock)
        app = track(load(source, **kwargs))
        made.append(app)
        return app

    yield make
    for app in reversed(made):
        app.close()


# --- helpers -----------------------------------------------------------------------------------------------


def _fake(app: App) -> FakeClock:
    from telo.clock import FakeClock

    if not isinstance(app.clock, FakeClock):
        raise TypeError("this helper moves the app's clock: load the app with clock=FakeClock() (or telo_app)")
    return app.clock


def advance(app: App, *, seconds: float = 0.0, ms: int = 0) -> int:
    """Move the app's fake clock forward, then continue every run that became due; returns how many ran."""
    _fake(app).advance(seconds=seconds, ms=ms)
    return app.run_due()


def settle(app: App, run: Any, *, max_rounds: int = 1000, timeout: float = 30.0) -> RunResult:
    """Drive ``run`` through its durable sleeps (and long retry backoffs) at once: while it is parked on time,
    jump the fake clock to its due time and continue it. Returns the run's result once it settles, or parks
    waiting for a delivery or an operator. ``timeout`` bounds the real time spent waiting for executions."""
    clock = _fake(app)
    deadline = SYSTEM_CLOCK.monotonic() + timeout
    for _ in range(max_rounds):
        result = _rest(app, run, deadline)
        parked = result.parked
        if result.settled or parked is None or parked.token is not None or result.due_at is None:
            return result
        if result.due_at > clock.now_ms():
            clock.advance(ms=result.due_at - clock.now_ms())
        app.run_due()
    raise AssertionError(f"run {run} was still parked on time after {max_rounds} rounds")


def _rest(app: App, run: Any, deadline: float) -> RunResult:
    """The run's result once it rests (``App.wait``), or at ``deadline``."""
    return app.wait(run, timeout=max(0.0, deadline - SYSTEM_CLOCK.monotonic()))


def deliver(app: App, token: str, payload: Any = None, *, timeout: float = 30.0) -> RunResult:
    """Deliver ``payload`` to the run parked on ``token`` and wait until that run comes to rest again (under
    a fake clock its next durable sleep counts as rest: :func:`settle` it). Fails if nothing waits on it."""
    tracker = _TRACKERS.get(app.application)
    ended = {run: len(executions) for run, executions in tracker.done.items()} if tracker is not None else {}
    delivery = app.deliver(token, payload)
    if not delivery.delivered or delivery.run_id is None:
        raise AssertionError(f"no run is parked on token {token!r} (or it was delivered already)")
    deadline = SYSTEM_CLOCK.monotonic() + timeout
    result = _rest(app, delivery.run_id, deadline)
    if tracker is not None:  # the status may rest before the execution's end event reaches the tracker
        _tracked_end(tracker, delivery.run_id, ended.get(delivery.run_id, 0))
        result = _rest(app, delivery.run_id, deadline)  # (and what rested may be the run before it ran)
    return result


def _tracked_end(tracker: _Tracker, run: str, before: int, *, grace_s: float = 5.0) -> None:
    """Wait (briefly) until ``tracker`` has seen an execution of ``run`` end since it had seen ``before``: so
    :func:`assert_replayed` right after :func:`deliver` judges the execution the delivery caused, also when
    another executor of the app (its resumer) took the run (a CI run under load saw 'was not executed by this
    app'). A run another process executes never shows: the wait is bounded."""
    import time

    deadline = SYSTEM_CLOCK.monotonic() + grace_s
    while len(tracker.done.get(run, ())) <= before and SYSTEM_CLOCK.monotonic() < deadline:
        time.sleep(0.005)


def wait_parked(app: App, run: Any, *, token: str | None = None, timeout: float = 30.0) -> RunStatus:
    """Wait until ``run`` is parked — on ``token`` when given (a run that parks on another token first, e.g. an
    earlier approval, is waited through) — and return its :class:`~telo.api.RunStatus`. A run not admitted
    yet is waited for too (it may be starting on another thread). Fails with the run's last status if it
    settles first, or is not parked so within ``timeout`` real seconds."""
    import time

    from telo.errors import Code, TeloError

    deadline = SYSTEM_CLOCK.monotonic() + timeout
    seen: RunStatus | None = None
    while True:
        try:
            seen = app.status(run)
        except TeloError as exc:
            if exc.code != Code.DURABLE_RUN_NOT_FOUND:
                raise
        if seen is not None:
            parked = seen.parked
            if seen.status == "parked" and parked is not None and (token is None or parked.token == token):
                return seen
            if seen.settled:
                why = f" ({seen.error.code}: {seen.error.message})" if seen.error is not None else ""
                raise AssertionError(f"run {run} {seen.status} without parking{_on(token)}{why}")
        if SYSTEM_CLOCK.monotonic() >= deadline:
            where = "it does not exist" if seen is None else f"it is {seen.status}" + (
                f" at {seen.parked.path} (token {seen.parked.token})" if seen.parked is not None else "")
            raise AssertionError(f"run {run} was not parked{_on(token)} within {timeout:g} s: {where}")
        time.sleep(POLL_S)


def _on(token: str | None) -> str:
    return "" if token is None else f" on token {token!r}"


# --- replay tracking ---------------------------------------------------------------------------------------


@dataclass
class _Execution:
    invoked: list[str] = field(default_factory=list)  # target names that emitted .Invoked, in order
    replayed_steps: int = 0
    status: str | None = None


@dataclass
class _Tracker:
    open: dict[str, _Execution] = field(default_factory=dict)
    done: dict[str, list[_Execution]] = field(default_factory=dict)

    def __call__(self, name: str, payload: Mapping[str, Any]) -> None:
        from telo.engine.context import current

        target, _, event = name.rpartition(".")
        if event == "Invoked":
            run = current().run_id  # dispatch emits in the invoking step's context: its run
            if run is not None:
                self.open.setdefault(run, _Execution()).invoked.append(target)
        elif event in _RUN_EVENTS and isinstance(payload.get("run"), str):
            run = payload["run"]  # a workflow's execution ended (Workflow.execute)
            execution = self.open.pop(run, _Execution())
            execution.replayed_steps = int(payload.get("replayedSteps") or 0)
            execution.status = event.removeprefix("Run").lower()
            self.done.setdefault(run, []).append(execution)


_TRACKERS: weakref.WeakKeyDictionary[Application, _Tracker] = weakref.WeakKeyDictionary()


def track(app: App) -> App:
    """Record which targets each execution of each run dispatched (for :func:`assert_replayed`); apps made by
    the ``telo_app`` fixture are tracked already. Returns ``app``."""
    application = app.application
    if application not in _TRACKERS:
        tracker = _Tracker()
        application.events.subscribe(tracker)
        _TRACKERS[application] = tracker
    return app


def assert_replayed(app: App, run: Any, *steps: str) -> None:
    """Assert that the last execution of ``run`` in ``app`` replayed the steps earlier executions had finished,
    rather than running them again.

    It must have replayed at least one step (``replayedSteps``); each target whose receipt it replayed (the
    first ``replayedSteps`` step entries of the journal, in log order) must not have been dispatched by it
    (a replayed step emits no ``<target>.Invoked``) — unless a step it executed afresh has the same target.
    ``steps`` names steps (or target resources) that must be among the replayed ones.
    """
    run_id = str(run)
    tracker = _TRACKERS.get(app.application)
    if tracker is None:
        raise AssertionError("assert_replayed needs a tracked app: make it with the telo_app fixture, or call "
                             "telo.testing.track(app) before it runs")
    executions = tracker.done.get(run_id)
    if not executions:
        raise AssertionError(f"run {run_id!r} was not executed by this app")
    last = executions[-1]
    receipts = [e for e in app.journal(run_id) if e.kind == "step" and not e.path.startswith("@")]
    replayed, fresh = receipts[: last.replayed_steps], receipts[last.replayed_steps:]
    if last.replayed_steps == 0:
        ran = ", ".join(sorted(set(last.invoked))) or "nothing"
        raise AssertionError(f"run {run_id!r} re-ran instead of replaying: its last execution replayed 0 steps "
                             f"and dispatched {ran}")
    fresh_targets = {(e.target or {}).get("name") for e in fresh}
    rerun = sorted({name for e in replayed if (name := (e.target or {}).get("name")) in last.invoked
                    and name not in fresh_targets})
    if rerun:
        raise AssertionError(f"run {run_id!r}: its last execution dispatched {', '.join(rerun)} again, although "
                             "their steps had finished before it")
    names = {_step_name(e.path) for e in replayed} | {(e.target or {}).get("name") for e in replayed}
    missing = [s for s in steps if s not in names]
    if missing:
        raise AssertionError(f"run {run_id!r}: {', '.join(missing)} not among the steps its last execution "
                             f"replayed ({', '.join(sorted(n for n in names if n)) or 'none'})")


def _step_name(path: str) -> str:
    from telo import paths

    last = paths.parse(path)[-1]
    return last.name


# --- queue limits ------------------------------------------------------------------------------------------


@dataclass
class QueueSamples:
    """What :func:`assert_never_more_than` saw: how many ``samples`` it read, the most slots held at once
    (``peak``), and the first sample over the limit (``violation``, what it fails with)."""

    queue: str
    limit: int
    samples: int = 0
    peak: int = 0
    violation: str | None = None
    error: BaseException | None = None


@contextmanager
def assert_never_more_than(app: App, queue: str, n: int, *, key: str | None = None, per_key: bool = False,
                           interval: float = 0.005) -> Iterator[QueueSamples]:
    """Around the ``with`` block, sample from the journal how many slots of the ``Local.Queue`` ``queue`` are
    held — runs ``running`` under a live claim, and parked ones if it says ``holdSlotWhileParked``, as the
    journal grants by — every ``interval`` seconds on a thread of its own (and once before and after the
    block); when the block ends, fail if any sample saw more than ``n``. ``key``: count only that
    ``concurrencyKey`` value's runs; ``per_key``: every key's, each against ``n``. Yields a
    :class:`QueueSamples`, so a test can also check the limit was reached (``samples.peak == n``).

    It sees what the journal holds, whoever executes the runs — this app, other threads, ``telo worker``
    processes on the same journal. A sample is an instant: an excess shorter than ``interval`` between two
    samples can pass unseen (the runs of a test whose steps take a few milliseconds are seen)."""
    import threading

    from telo.operations import queues as queue_ops

    resource = _queue(app, queue)
    config = queue_ops.config_of(resource)
    store = resource.journal.store
    seen = QueueSamples(queue, n)
    what = f"key {key!r} of queue {queue!r}" if key is not None else f"queue {queue!r}"

    def sample() -> None:
        state = queue_ops.read(store, queue, config)
        if per_key:
            held, where = max(((state.holding(k, any_key=False), f"key {k!r} of queue {queue!r}")
                               for k in state.keys), default=(0, what))
        else:
            held, where = state.holding(key, any_key=key is None), what
        seen.samples += 1
        seen.peak = max(seen.peak, held)
        if held > n and seen.violation is None:
            holders = sorted(r.run for r in store.runs_of_queue(queue) if key is None or r.queue_key == key)
            seen.violation = (f"{where} held {held} slots at once, more than {n} (sample {seen.samples}); its "
                              f"running and parked runs then: {', '.join(holders) or 'none'}")

    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval):
            try:
                sample()
            except BaseException as exc:  # (reported when the block ends: a thread cannot fail the test)
                seen.error = exc
                return

    sample()
    thread = threading.Thread(target=loop, name=f"telo-sample-{queue}", daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(timeout=max(10 * interval, 5.0))
    sample()
    if seen.error is not None:
        raise seen.error
    if seen.violation is not None:
        raise AssertionError(seen.violation)


def _queue(app: App, name: str) -> Any:
    """The started app's ``Local.Queue`` ``name`` (``ERR_QUEUE_NOT_FOUND`` naming the ones it has)."""
    from telo.errors import Code, TeloError
    from telo.kinds.queue import Queue

    app.runs(limit=1)  # (starts the app if it has not started: its queues' limits are compiled at start)
    resource = app.application.resources.get(name)
    if isinstance(resource, Queue):
        return resource
    names = sorted(n for n, r in app.application.resources.items() if isinstance(r, Queue))
    raise TeloError(Code.QUEUE_NOT_FOUND, f"{name!r} is not a Local.Queue of this app",
                    hint=f"its queues: {', '.join(names) or 'none'}", data={"queue": name})
