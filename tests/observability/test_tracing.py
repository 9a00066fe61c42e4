"""OpenTelemetry: spans per run execution and per step (executed, then replayed), and the telo.durable records
(durable.zone.mode, durable.park) as log records or span events."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="tracing needs the `otel` extra")

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from telo import observability
from telo.durable.waits import deliver
from telo.journal import open_store
from telo.kinds.controllers import load_application
from tests.greeting_manifest import APPROVAL, manifest

# greet, then a Durable.Idempotent region (a collapsed zone: one durable.zone.mode record), then park on a
# delivery; the second execution replays all that and executes `last`.
MANIFEST = manifest("Traced", """\
kind: Durable.Idempotent
metadata: { name: bulk }
reason: upserts by natural key
steps:
  - { name: one, invoke: !ref greet, inputs: { who: one } }
""", APPROVAL, """\
kind: Local.Workflow
metadata: { name: flow }
journal: !ref runs
runId: !cel "'flow:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - { name: first, invoke: !ref greet, inputs: { who: ada } }
  - { name: region, invoke: !ref bulk }
  - { name: wait, invoke: !ref approval, inputs: { id: !cel "inputs.id" } }
  - { name: last, invoke: !ref greet, inputs: { who: !cel "steps.wait.result.by" } }
""")


@pytest.fixture(autouse=True)
def untraced() -> Iterator[None]:
    yield
    observability.disable_tracing()


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def provider_for(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def run_manifest(tmp_path: Path, run_id: str) -> None:
    app = load_application(tmp_path / "m.yaml")
    app.inputs = {"id": run_id}
    assert asyncio.run(app.main()) == 0


def execute_then_replay(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(MANIFEST)
    run_manifest(tmp_path, "t1")  # executes first and the region, parks at wait
    with open_store(str(tmp_path / "journal.db")) as store:
        assert deliver(store, "go:t1", {"by": "eve"})["delivered"]
    run_manifest(tmp_path, "t1")  # replays first, the region's step and wait; executes last
    with open_store(str(tmp_path / "journal.db")) as store:
        record = store.read_run("flow:t1")
        assert record is not None and record.status == "completed"


def by_name(exported: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in exported if s.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_spans_for_a_run_that_executes_then_replays(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracer = observability.enable_tracing(provider_for(spans), logger_provider=logger_provider)
    assert tracer.log_mode == "logs"
    execute_then_replay(tmp_path)
    exported = spans.get_finished_spans()

    runs = by_name(exported, "telo.run")
    assert [attrs(r)["durable.status"] for r in runs] == ["parked", "completed"]
    first_run, second_run = runs
    assert attrs(first_run) | {} == {**attrs(first_run), "durable.run": "flow:t1", "durable.workflow": "flow",
                                     "durable.steps.executed": 2, "durable.steps.replayed": 0,
                                     "durable.collapsed_regions": 1}
    assert attrs(second_run)["durable.steps.executed"] == 1 and attrs(second_run)["durable.steps.replayed"] == 3

    steps = by_name(exported, "telo.step")

    def step(path: str, run_span: ReadableSpan) -> ReadableSpan:
        found = [s for s in steps if attrs(s)["durable.path"] == path
                 and s.context.trace_id == run_span.context.trace_id]
        assert len(found) == 1, (path, [attrs(s) for s in steps])
        return found[0]

    executed = step("steps/first", first_run)
    assert attrs(executed) == {"durable.run": "flow:t1", "durable.path": "steps/first",
                               "durable.target.kind": "Run.Value", "durable.target.name": "greet",
                               "durable.target.module": attrs(executed)["durable.target.module"],
                               "durable.replayed": False}
    assert executed.parent is not None and executed.parent.span_id == first_run.context.span_id
    parked = step("steps/wait", first_run)
    assert attrs(parked)["durable.parked"] is True and attrs(parked)["durable.target.kind"] == "Durable.Await"
    assert parked.status.is_ok  # a park is not an error

    replayed = step("steps/first", second_run)
    assert attrs(replayed)["durable.replayed"] is True and attrs(replayed)["durable.target.name"] == "greet"
    assert attrs(step("steps/wait", second_run))["durable.replayed"] is True  # the delivery answers it
    last = step("steps/last", second_run)
    assert attrs(last)["durable.replayed"] is False and last.parent is not None
    assert last.parent.span_id == second_run.context.span_id
    # the region is a journaled step; its body collapsed, so the step inside it has no span of its own
    region = step("steps/region", first_run)
    assert attrs(region)["durable.target.kind"] == "Durable.Idempotent" and attrs(region)["durable.replayed"] is False
    assert attrs(step("steps/region", second_run))["durable.replayed"] is True
    assert not [s for s in steps if "region/" in attrs(s)["durable.path"]]

    records = [r.log_record for r in logs.get_finished_logs()]
    zone = [r for r in records if r.event_name == "durable.zone.mode"]
    assert len(zone) == 1  # once per region, when its body runs (the replay answers the region whole)
    assert dict(zone[0].attributes or {}) == {"durable.run": "flow:t1", "durable.zone": "Durable.Idempotent",
                                              "durable.zone.attribute": "idempotent",
                                              "durable.zone.mode": "collapsed"}
    assert zone[0].trace_id == first_run.context.trace_id  # correlated with the trace, inside the region's span
    assert zone[0].span_id == region.context.span_id
    park = [r for r in records if r.event_name == "durable.park"]
    assert len(park) == 1 and dict(park[0].attributes or {})["durable.path"] == "steps/wait"


def test_records_become_span_events_without_a_logs_provider(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    tracer = observability.enable_tracing(provider_for(spans))
    assert tracer.log_mode == "span-events"
    execute_then_replay(tmp_path)
    events = [(e.name, dict(e.attributes or {})) for s in spans.get_finished_spans() for e in s.events]
    zone = [a for name, a in events if name == "durable.zone.mode"]
    assert len(zone) == 1 and zone[0]["durable.zone.mode"] == "collapsed"
    assert zone[0]["durable.zone"] == "Durable.Idempotent" and zone[0]["log.severity"] == "INFO"
    assert any(name == "durable.park" for name, _ in events)


def test_a_failed_run_and_step_are_marked_as_errors(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    observability.enable_tracing(provider_for(spans))
    (tmp_path / "m.yaml").write_text(MANIFEST.replace("'hello ' + inputs.who", "'hello ' + inputs.nobody"))
    app = load_application(tmp_path / "m.yaml")
    app.inputs = {"id": "bad"}
    asyncio.run(app.main())
    run = by_name(spans.get_finished_spans(), "telo.run")[0]
    assert attrs(run)["durable.status"] == "failed" and not run.status.is_ok
    assert str(attrs(run)["error.type"]).startswith("ERR_")
    step = by_name(spans.get_finished_spans(), "telo.step")[0]
    assert not step.status.is_ok and step.events and step.events[0].name == "exception"


def test_disabled_tracing_costs_nothing(tmp_path: Path, spans: InMemorySpanExporter,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    observability.enable_tracing(provider_for(spans))
    observability.disable_tracing()
    assert observability.run_tracer() is None
    execute_then_replay(tmp_path)
    assert spans.get_finished_spans() == ()


def test_telo_otel_without_opentelemetry_installed_runs_untraced(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELO_OTEL", "1")
    monkeypatch.setattr(observability, "_env_checked", False)
    for name in ("opentelemetry", "opentelemetry.trace"):
        monkeypatch.setitem(sys.modules, name, None)  # `import opentelemetry` now raises ImportError
    assert observability.run_tracer() is None
    execute_then_replay(tmp_path)


def test_telo_otel_console_prints_spans(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(MANIFEST)
    env = {**os.environ, "TELO_OTEL": "console"}
    out = subprocess.run([sys.executable, "-m", "telo", "run", "m.yaml", "--input", "id=c1"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 4, out.stderr  # parked: not settled
    printed = out.stdout + out.stderr
    assert '"name": "telo.run"' in printed and '"name": "telo.step"' in printed
    assert '"durable.path": "steps/first"' in printed
    # and without the variable, nothing is traced
    env.pop("TELO_OTEL")
    quiet = subprocess.run([sys.executable, "-m", "telo", "run", "m.yaml", "--input", "id=c2"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert quiet.returncode == 4 and "telo.run" not in quiet.stdout + quiet.stderr
