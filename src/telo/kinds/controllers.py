"""Which class implements each canonical kind: the table the runtime creates resources through.

The runtime is given this table (it knows no kind itself); :func:`load_application` is the one place that
puts the two together for the front ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from telo.clock import SYSTEM_CLOCK, Clock
from telo.runtime.app import Application
from telo.runtime.resource import Controller

from . import (
    addressing,
    assertions,
    console,
    consume,
    durable_kinds,
    journals,
    messaging,
    python,
    queue,
    resumer,
    run,
    schedule,
    sql,
    sql_connections,
    sql_statements,
    timer,
    workflow,
)

_CLASSES: tuple[Any, ...] = (
    run.Sequence, run.Value, run.Iteration, run.Projection, run.Loop, run.ChoiceKind, run.Detach,
    console.WriteLine, timer.Delay, python.PythonFunction, assertions.Equals, assertions.Events,
    durable_kinds.Idempotent, durable_kinds.Sleep, durable_kinds.Await, durable_kinds.Value, durable_kinds.Patched,
    workflow.Workflow, queue.Queue, resumer.Resumer,
    addressing.Deliver, addressing.Status, addressing.Result, addressing.Cancel, addressing.Schedule,
    addressing.Resume, messaging.Receive, messaging.Publish, messaging.Send, messaging.Event,
    messaging.StreamWrite, consume.Consume,
    journals.SqliteJournal, journals.FileJournal, journals.PostgresJournal,
    sql.Connection, sql.Transaction, sql_statements.Query, sql_statements.Command, sql_statements.Exec,
    sql_statements.Selection,
    sql_connections.PostgresConnection, sql_connections.SqliteConnection,
    schedule.Cron, schedule.Interval,
)

CONTROLLERS: Mapping[str, Controller] = {cls.kind: cls for cls in _CLASSES}


def register_controller(kind: str, controller: Controller) -> None:
    """Implement the canonical ``kind`` with ``controller`` (a kind made with ``@telo.kind``); the runtime reads
    this table when it creates resources, so a later registration of the same kind replaces the earlier one."""
    cast(dict[str, "Controller"], CONTROLLERS)[kind] = controller


def load_application(source: str | Path, *, text: str | None = None, env: Mapping[str, str] | None = None,
                     clock: Clock = SYSTEM_CLOCK, static_checks: bool = True) -> Application:
    """:meth:`Application.load` with every kind telo ships (and those registered with ``@telo.kind``)."""
    return Application.load(source, controllers=CONTROLLERS, text=text, env=env, clock=clock,
                            static_checks=static_checks)
