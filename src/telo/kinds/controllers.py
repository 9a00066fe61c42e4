"""Which class implements each canonical kind (the runtime creates resources through this table)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from telo.durable import addressing, durable_kinds, journals, workflow
from telo.kinds import assertions, console, python, run, sql, timer

if TYPE_CHECKING:
    from telo.runtime.app import Controller

_CLASSES: tuple[Any, ...] = (
    run.Sequence, run.Value, run.Iteration, run.Projection, run.Loop, run.ChoiceKind, run.Detach,
    console.WriteLine, timer.Delay, python.PythonFunction, assertions.Equals, assertions.Events,
    durable_kinds.Idempotent, durable_kinds.Sleep, durable_kinds.Await, durable_kinds.Value,
    workflow.Workflow, workflow.Resumer,
    addressing.Deliver, addressing.Status, addressing.Result, addressing.Cancel, addressing.Schedule,
    addressing.Resume,
    journals.SqliteJournal, journals.FileJournal, journals.PostgresJournal,
    sql.Connection, sql.Transaction, sql.Query, sql.Exec,
)

CONTROLLERS: Mapping[str, Controller] = {cls.kind: cls for cls in _CLASSES}


def register_controller(kind: str, controller: Controller) -> None:
    """Implement the canonical ``kind`` with ``controller`` (a kind made with ``@telo.kind``); the runtime reads
    this table when it creates resources, so a later registration of the same kind replaces the earlier one."""
    cast(dict[str, "Controller"], CONTROLLERS)[kind] = controller
