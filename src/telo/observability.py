"""OpenTelemetry for durable runs (docs/observability.md): a span per run execution, a span per step, and the
``telo.durable`` log records as OpenTelemetry log records.

Optional: needs the ``otel`` extra (``opentelemetry-api``, ``opentelemetry-sdk``). Nothing here imports
OpenTelemetry until tracing is enabled — by :func:`enable_tracing`, or by ``TELO_OTEL=1`` in the environment
(read by :func:`trace_from_environment` when a front end starts: the ``telo`` command, ``telo.load``/``App``) —
so telo runs without it installed.

What is emitted:

- ``telo.run`` — one span per execution of a run (:func:`telo.durable.execute.execute_run`: a start, a
  resubmission, a worker continuing it). Attributes ``durable.run``, ``durable.workflow``; when it ends,
  ``durable.status`` (completed, parked, failed, cancelled, running), ``durable.steps.executed``,
  ``durable.steps.replayed``, ``durable.collapsed_regions``, and ``error.type`` (the error code) with an
  ERROR status for a failed run.
- ``telo.step`` — one span per journaled step, a child of its run span (or of the step whose nested body it
  belongs to): ``durable.run``, ``durable.path``, ``durable.target.kind``, ``durable.target.name``
  (``durable.target.module`` when imported), ``durable.replayed`` (True when the journal answered it without
  executing). A step that parks its run carries ``durable.parked``; one that raised records the exception.
- the records of the ``telo.durable`` logger (``durable.zone.mode``, ``durable.park``, ...) become
  OpenTelemetry LOG records (``event_name`` = the record's name, its ``durable.*`` extras as attributes, in the
  current span's context) when a logs SDK provider is available — passed as ``logger_provider`` or set
  globally. Otherwise they become EVENTS on the current span, so they are never lost.

The hooks used (telo.durable.observers): the tracer is an execution observer, so ``execute_run`` runs each
execution inside its run span; the run span is that execution's step observer, told when each step starts
(a step span is made current, so nested steps nest), whether the journal answered it, and how it ended. A
:class:`logging.Handler` on ``telo.durable`` bridges the records.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from telo.durable.observers import EndedExecution, add_execution_observer, remove_execution_observer
from telo.engine.suspend import Suspension
from telo.errors import Code

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

ENV_VAR: Final = "TELO_OTEL"
INSTRUMENTATION: Final = "telo"
LOGGER: Final = "telo.durable"
RUN_SPAN: Final = "telo.run"
STEP_SPAN: Final = "telo.step"

log = logging.getLogger("telo.observability")

# LogRecord's own attributes: everything else on a record came from `extra=` and is an attribute to carry.
_RECORD_FIELDS: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


_tracer: OtelTracer | None = None
_env_checked = False


def run_tracer() -> OtelTracer | None:
    """The installed tracer, if any: what every execution runs inside (after :func:`trace_from_environment`)."""
    return trace_from_environment()


def trace_from_environment() -> OtelTracer | None:
    """Enable tracing when ``TELO_OTEL`` asks for it, once per process (unless :func:`enable_tracing` or
    :func:`disable_tracing` chose already); the installed tracer, if any. Called when a front end starts —
    the ``telo`` command, ``telo.load``/``App`` — before any run executes."""
    global _env_checked
    if _tracer is None and not _env_checked:
        _env_checked = True
        mode = os.environ.get(ENV_VAR, "").strip().lower()
        if mode and mode not in ("0", "false", "no", "off"):
            try:
                enable_tracing(console=mode == "console")
            except ImportError as exc:  # TELO_OTEL without the extra: say so once, run untraced
                log.warning("observability.unavailable", extra={"error.message": str(exc),
                                                                "telo.hint": "pip install 'telo-python[otel]'"})
    return _tracer


def enable_tracing(provider: TracerProvider | None = None, *, logger_provider: Any = None,
                   console: bool = False) -> OtelTracer:
    """Trace every run execution and step from now on, and bridge ``telo.durable`` log records.

    ``provider`` defaults to the global tracer provider (configure it as usual, e.g. with
    ``opentelemetry-instrument``); ``console=True`` (``TELO_OTEL=console``) installs an SDK provider that
    prints spans to stderr when no SDK provider is configured. ``logger_provider`` receives the log records
    (default: the global one, if it is an SDK provider; else they become span events). Calling it again
    replaces the previous setup. Raises ImportError when OpenTelemetry is not installed."""
    global _tracer
    from opentelemetry import trace

    disable_tracing()
    if provider is None and console:
        provider = _console_provider(trace.get_tracer_provider())
    tracer = (provider or trace.get_tracer_provider()).get_tracer(INSTRUMENTATION)
    otel = OtelTracer(tracer, _otel_logger(logger_provider))
    otel.install_log_bridge()
    add_execution_observer(otel)
    _tracer = otel
    return otel


def disable_tracing() -> None:
    """Stop tracing (and bridging log records); runs execute exactly as without OpenTelemetry."""
    global _tracer, _env_checked
    if _tracer is not None:
        remove_execution_observer(_tracer)
        _tracer.remove_log_bridge()
    _tracer = None
    _env_checked = True  # an explicit choice wins over the environment


def _console_provider(current: Any) -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider as SdkProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    if isinstance(current, SdkProvider):
        return current
    provider = SdkProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def _otel_logger(logger_provider: Any) -> Any:
    """An OpenTelemetry logger when a logs SDK provider is available, else None (records become span events).

    The logs API still lives in ``opentelemetry._logs`` (underscored, though public in the SDK's docs)."""
    try:
        from opentelemetry import _logs
        from opentelemetry.sdk._logs import LoggerProvider as SdkLoggerProvider
    except ImportError:
        return None
    provider = logger_provider if logger_provider is not None else _logs.get_logger_provider()
    if logger_provider is None and not isinstance(provider, SdkLoggerProvider):
        return None  # the API's no-op provider would drop them: keep them as span events instead
    return provider.get_logger(INSTRUMENTATION)


def _target_attrs(target: Mapping[str, str] | None) -> dict[str, str]:
    if not target:
        return {}
    out = {"durable.target.kind": target.get("kind", ""), "durable.target.name": target.get("name", "")}
    if target.get("module"):
        out["durable.target.module"] = target["module"]
    return out


class OtelTracer:
    """The OpenTelemetry execution observer (telo.durable.observers; see the module docstring for the spans and
    attributes)."""

    def __init__(self, tracer: Tracer, otel_logger: Any) -> None:
        self.tracer = tracer
        self.otel_logger = otel_logger
        self.bridge: LogBridge | None = None
        self.previous_level = logging.NOTSET

    @property
    def log_mode(self) -> str:
        """Where ``telo.durable`` records go: ``"logs"`` (OpenTelemetry log records) or ``"span-events"``."""
        return "logs" if self.otel_logger is not None else "span-events"

    @contextlib.contextmanager
    def execution(self, run: str, workflow: str) -> Iterator[_OtelRunSpan]:
        # The body's own outcome (parked, failed, ...) is reported by finish(); an exception escaping the
        # execution is a crash of telo itself, recorded as such by the context manager.
        with self.tracer.start_as_current_span(
            RUN_SPAN, attributes={"durable.run": run, "durable.workflow": workflow}
        ) as span:
            yield _OtelRunSpan(self, span, run)

    run_span = execution  # (its name before telo.durable.observers: docs/observability.md named it)

    def install_log_bridge(self) -> None:
        logger = logging.getLogger(LOGGER)
        self.bridge = LogBridge(self)
        logger.addHandler(self.bridge)
        # The zone and park records are INFO; a logger left at the default WARNING would drop them before
        # any handler sees them.
        self.previous_level = logger.level
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)

    def remove_log_bridge(self) -> None:
        if self.bridge is not None:
            logger = logging.getLogger(LOGGER)
            logger.removeHandler(self.bridge)
            logger.setLevel(self.previous_level)
            self.bridge = None


class _OtelRunSpan:
    """One execution's run span, and the observer of its steps: a step span each, current while it runs."""

    def __init__(self, owner: OtelTracer, span: Span, run: str) -> None:
        self.owner = owner
        self.span = span
        self.run = run
        self.open: dict[str, tuple[Span, Token[Context]]] = {}  # path -> its step span, and the context token to detach

    def step_started(self, path: str, target: Mapping[str, str] | None) -> None:
        from opentelemetry import context, trace

        attrs: dict[str, Any] = {"durable.run": self.run, "durable.path": path, **_target_attrs(target)}
        span = self.owner.tracer.start_span(STEP_SPAN, attributes=attrs)  # (a child of the current span)
        self.open[path] = (span, context.attach(trace.set_span_in_context(span)))

    def step_answered(self, path: str, target: Mapping[str, str] | None, *, replayed: bool) -> None:
        opened = self.open.get(path)
        if opened is not None:
            opened[0].set_attribute("durable.replayed", replayed)

    def step_ended(self, path: str, target: Mapping[str, str] | None, error: BaseException | None) -> None:
        from opentelemetry import context
        from opentelemetry.trace import Status, StatusCode

        opened = self.open.pop(path, None)
        if opened is None:
            return
        span, token = opened
        context.detach(token)
        if isinstance(error, Suspension):
            span.set_attribute("durable.parked", True)  # a park is how a wait works, not an error
        elif isinstance(error, Exception):
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, getattr(error, "code", type(error).__name__)))
        span.end()

    def finish(self, execution: EndedExecution) -> None:
        from opentelemetry.trace import Status, StatusCode

        span = self.span
        span.set_attribute("durable.status", execution.status)
        span.set_attribute("durable.steps.executed", execution.executed_steps)
        span.set_attribute("durable.steps.replayed", execution.replayed_steps)
        span.set_attribute("durable.collapsed_regions", execution.collapsed_regions)
        if execution.status == "failed":
            code = str((execution.error or {}).get("code") or Code.DURABLE_RUN_FAILED)
            span.set_attribute("error.type", code)
            span.set_status(Status(StatusCode.ERROR, code))


class LogBridge(logging.Handler):
    """Carries ``telo.durable`` records to OpenTelemetry: a log record (logs SDK) or a span event."""

    def __init__(self, owner: OtelTracer) -> None:
        super().__init__(logging.INFO)
        self.owner = owner

    def emit(self, record: logging.LogRecord) -> None:
        try:
            attrs = _attributes(record)
            name = record.msg if isinstance(record.msg, str) else record.getMessage()
            otel_logger = self.owner.otel_logger
            if otel_logger is not None:
                from opentelemetry._logs import SeverityNumber

                otel_logger.emit(event_name=name, body=record.getMessage(), attributes=attrs,
                                 severity_text=record.levelname,
                                 severity_number=SeverityNumber(_severity(record.levelno)))
                return
            from opentelemetry import trace

            span = trace.get_current_span()
            if span.is_recording():
                span.add_event(name, attributes={**attrs, "log.severity": record.levelname})
        except Exception:  # a tracing problem must never break a run
            self.handleError(record)


def _attributes(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in vars(record).items():
        if key in _RECORD_FIELDS or key.startswith("_"):
            continue
        out[key] = value if isinstance(value, str | bool | int | float) else str(value)
    return out


def _severity(levelno: int) -> int:
    """The OpenTelemetry severity number of a logging level (DEBUG 5, INFO 9, WARNING 13, ERROR 17, CRITICAL 21)."""
    if levelno >= logging.CRITICAL:
        return 21
    if levelno >= logging.ERROR:
        return 17
    if levelno >= logging.WARNING:
        return 13
    if levelno >= logging.INFO:
        return 9
    return 5
