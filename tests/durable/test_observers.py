"""Observers of durable executions (telo.durable.observers): an execution observer wraps each execution and
watches its steps — told when each starts, whether the journal answered it, how it ended — with nothing
patched onto the run handle, and nothing in telo.durable knowing who observes."""

from __future__ import annotations

import ast
import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import telo
from telo.durable import observers
from telo.durable.waits import deliver
from telo.engine.suspend import Suspension
from telo.journal import open_store
from telo.kinds.controllers import load_application
from tests.greeting_manifest import APPROVAL, GREET_AND_WAIT, manifest


class Watch:
    def __init__(self, events: list[tuple[Any, ...]]) -> None:
        self.events = events

    def step_started(self, path: str, target: Mapping[str, str] | None) -> None:
        self.events.append(("started", path))

    def step_answered(self, path: str, target: Mapping[str, str] | None, *, replayed: bool) -> None:
        self.events.append(("replayed" if replayed else "executing", path))

    def step_ended(self, path: str, target: Mapping[str, str] | None, error: BaseException | None) -> None:
        self.events.append(("ended", path, "parked" if isinstance(error, Suspension) else error))

    def finish(self, execution: observers.EndedExecution) -> None:
        self.events.append(("finished", execution.status, execution.executed_steps, execution.replayed_steps))


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    @contextlib.contextmanager
    def execution(self, run: str, workflow: str) -> Iterator[Watch]:
        self.events.append(("execution", run, workflow))
        yield Watch(self.events)
        self.events.append(("closed", run))


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    watcher = Recorder()
    observers.add_execution_observer(watcher)
    try:
        yield watcher
    finally:
        observers.remove_execution_observer(watcher)
    assert watcher not in observers.execution_observers()


def run_manifest(tmp_path: Path, run_id: str) -> None:
    app = load_application(tmp_path / "m.yaml")
    app.inputs = {"id": run_id}
    assert asyncio.run(app.main()) == 0


def test_an_execution_observer_sees_each_execution_and_its_steps(tmp_path: Path, recorder: Recorder) -> None:
    (tmp_path / "m.yaml").write_text(manifest("Observed", APPROVAL, GREET_AND_WAIT))
    run_manifest(tmp_path, "o1")  # executes first, parks at wait
    assert recorder.events == [
        ("execution", "flow:o1", "flow"),
        ("started", "steps/first"), ("executing", "steps/first"), ("ended", "steps/first", None),
        ("started", "steps/wait"), ("executing", "steps/wait"), ("ended", "steps/wait", "parked"),
        ("finished", "parked", 1, 0),
        ("closed", "flow:o1"),
    ]
    recorder.events.clear()
    with open_store(str(tmp_path / "journal.db")) as store:
        assert deliver(store, "go:o1", {"by": "eve"})["delivered"]
    run_manifest(tmp_path, "o1")  # replays first and the delivery, executes last
    assert recorder.events == [
        ("execution", "flow:o1", "flow"),
        ("started", "steps/first"), ("replayed", "steps/first"), ("ended", "steps/first", None),
        ("started", "steps/wait"), ("replayed", "steps/wait"), ("ended", "steps/wait", None),
        ("started", "steps/last"), ("executing", "steps/last"), ("ended", "steps/last", None),
        ("finished", "completed", 1, 2),
        ("closed", "flow:o1"),
    ]


def test_an_observer_registered_twice_watches_once(recorder: Recorder) -> None:
    observers.add_execution_observer(recorder)
    assert observers.execution_observers().count(recorder) == 1


def test_nothing_in_telo_durable_imports_observability() -> None:
    """The layers point down (telo.observability observes telo.durable, never the reverse), even inside a
    function or under TYPE_CHECKING."""
    durable = Path(telo.__file__).resolve().parent / "durable"
    offenders = []
    for path in sorted(durable.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names] \
                if isinstance(node, ast.ImportFrom) else []
            if any(n == "telo.observability" or n.startswith("telo.observability.") for n in names):
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders
