"""Watching durable executions from outside them (docs/observability.md "How it is wired").

Two kinds of observer, both told things in the event loop's thread, never asked anything:

- a :class:`StepObserver`, registered on one run handle (``LocalRunHandle.observe``), hears when each journaled
  step starts, whether the journal answered it (replayed) or its effect is about to execute, and how it ended.
  ``step_started`` and ``step_ended`` are called in the step's own task, so an observer may make something
  current in between (a tracing span: what the step does happens inside it). ``telo run``'s progress view is
  one (telo.cli.progress);
- an :class:`ExecutionObserver`, registered for the whole process (:func:`add_execution_observer`), wraps every
  execution of every run (:func:`telo.durable.execute.execute_run`): it opens a context around the execution,
  watches its steps, and hears how it ended. telo.observability registers its OpenTelemetry tracer as one.

Nothing here knows of any observer: a handle with none pays one truthiness test per step, an execution with
none one more.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol


class StepObserver(Protocol):
    """Told about the journaled steps of one execution (spec §4: a step is one journaled effect)."""

    def step_started(self, path: str, target: Mapping[str, str] | None) -> None:
        """The step at ``path`` (invoking ``target``) begins: nothing is looked up yet."""

    def step_answered(self, path: str, target: Mapping[str, str] | None, *, replayed: bool) -> None:
        """Its recorded outcome answers it (``replayed``), or its effect is about to execute (not ``replayed``)."""

    def step_ended(self, path: str, target: Mapping[str, str] | None, error: BaseException | None) -> None:
        """It returned (``error`` None) or raised ``error`` — a ``Suspension`` when it parked the run."""


class EndedExecution(Protocol):
    """How an execution ended, as an observer sees it (:class:`telo.durable.execute.Execution`)."""

    @property
    def status(self) -> str: ...  # completed | failed | parked | cancelled | running

    @property
    def error(self) -> Mapping[str, Any] | None: ...

    @property
    def executed_steps(self) -> int: ...

    @property
    def replayed_steps(self) -> int: ...

    @property
    def collapsed_regions(self) -> int: ...


class ExecutionWatch(StepObserver, Protocol):
    """One execution of one run, watched: its steps, then how it ended."""

    def finish(self, execution: EndedExecution) -> None:
        """Called with how the execution ended, before its context closes."""


class ExecutionObserver(Protocol):
    """Watches every execution in the process."""

    def execution(self, run: str, workflow: str) -> AbstractContextManager[ExecutionWatch]:
        """The context the execution of ``run`` (of ``workflow``) runs in; what it yields watches it. An
        exception escaping the execution (a crash of telo itself) passes through it."""


_execution_observers: tuple[ExecutionObserver, ...] = ()


def add_execution_observer(observer: ExecutionObserver) -> None:
    """Watch every execution started from now on (in every thread and event loop of the process)."""
    global _execution_observers
    if observer not in _execution_observers:
        _execution_observers = (*_execution_observers, observer)


def remove_execution_observer(observer: ExecutionObserver) -> None:
    """Stop watching new executions (nothing if ``observer`` was not registered)."""
    global _execution_observers
    _execution_observers = tuple(o for o in _execution_observers if o is not observer)


def execution_observers() -> tuple[ExecutionObserver, ...]:
    return _execution_observers
