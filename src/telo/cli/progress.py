"""Live progress for ``telo run`` (issue 7): each step as it executes or replays, parks, deliveries, and how
each run ends.

Two sources feed it, both in the event loop's thread:

- a step observer on each run handle (telo.durable.observers: told ``replayed`` when a step's recorded result
  is returned, or that its effect is about to execute); :func:`telo.durable.execute.observing_handles` hands
  us every handle a workflow opens while ``telo run`` executes;
- the ``<workflow>.Run<Status>`` events :meth:`Workflow.execute` emits on the application's event bus when an
  execution ends (parked, completed, failed, cancelled, or still running when the process stopped); and, on the
  same bus, ``<target>.InvokeRetrying`` (telo.engine.retry: an attempt failed and the step's retry policy tries
  again after a delay) and ``<target>.InvokeUnconfirmed`` (telo.durable.unconfirmed: a step whose outcome was
  unknown after a crash was settled by its ``lookup``, an operator, or its ``onUnconfirmed`` policy).

``--progress MODE`` (documented in docs/cli.md): ``auto`` — the live view when stderr is a terminal, nothing
otherwise, so scripts, CI and captured output (``scripts/run-example.sh``) read exactly as before; ``live`` —
the live view even off a terminal; ``plain`` — one line per event on stderr; ``off``. Progress always goes
to stderr: stdout stays the command's result (``--json``) and what the steps themselves print.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from telo.clock import SYSTEM_CLOCK

if TYPE_CHECKING:
    from telo.durable.handle import LocalRunHandle
    from telo.runtime.app import Application

MODES = ("auto", "live", "plain", "off")
RUN_EVENT = ".Run"  # `<workflow>.Run<Status>`
ENDINGS = {"Parked": "parked", "Completed": "completed", "Failed": "failed", "Cancelled": "cancelled",
           "Running": "running"}


RETRYING, UNCONFIRMED = "InvokeRetrying", "InvokeUnconfirmed"
POLICY_VERBS = {"redrive": "redriven", "skip": "skipped", "fail": "failed", "park": "parked for an operator"}


def ms_text(ms: float) -> str:
    """A delay for people: ``50 ms``, ``1.2 s``, ``2 min 5 s``."""
    if ms < 1000:
        return f"{max(ms, 0):.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{int(ms // 60_000)} min {int(ms % 60_000 // 1000)} s"


def describe_unconfirmed(payload: Mapping[str, Any]) -> str:
    """How an effect whose outcome was unknown was settled (telo.durable.unconfirmed's decision)."""
    action, by = str(payload.get("action")), payload.get("by")
    if by == "lookup":
        return "asked lookup → found (receipt recorded)" if payload.get("found") else \
            "asked lookup → not found (redriven)"
    if by == "operator":
        verb = "skipped with the operator's value (receipt recorded)" if action == "skip" else \
            POLICY_VERBS.get(action, action)
        return f"the operator answered → {verb}"
    return f"{POLICY_VERBS.get(action, action)} (policy: {action})"


def describe_target(target: Mapping[str, str] | None) -> str:
    return f"{target.get('kind', '?')} {target.get('name', '?')}" if target else ""


def describe_park(handle: LocalRunHandle | None) -> tuple[str, str]:
    """``(path, why)`` of the park the handle's last execution recorded: waiting for a token, until a time,
    or the operator-facing reason (a manifest hold, an unconfirmed effect)."""
    signal = handle.latched if handle is not None else None
    if signal is None:
        return "", ""
    if signal.where.reason:
        return signal.where.path, signal.where.reason
    if signal.until.token is not None:
        return signal.where.path, f"waiting for {signal.until.token}"
    if signal.until.at is not None:
        from telo.cli.common import time_text

        return signal.where.path, f"until {time_text(signal.until.at)}"
    return signal.where.path, ""


@dataclass
class Row:
    """One step of one run in the live view; ``state`` is what was last seen happen to it."""

    run: str
    path: str
    target: str
    state: str  # executing | replayed | delivered | parked
    detail: str = ""
    retry: tuple[int, int, float] | None = None  # the last failed attempt, of how many, next one due (monotonic)
    note: str = ""  # how an unknown outcome was settled


class Progress:
    """Collects step and run events; :meth:`step`, :meth:`parked` and :meth:`ended` are the renderers' hooks."""

    def __init__(self, app: Application) -> None:
        self.app = app
        self.handles: dict[str, LocalRunHandle] = {}

    # --- sources ------------------------------------------------------------------------------------------

    def observe(self, handle: LocalRunHandle) -> None:
        """Watch one execution's steps."""
        self.handles[handle.run_id] = handle
        handle.observe(_StepEvents(self, handle))

    def on_event(self, name: str, payload: Mapping[str, Any]) -> None:
        event = name.rpartition(".")[2]
        if event in (RETRYING, UNCONFIRMED):
            run, path = payload.get("run"), payload.get("path")
            if isinstance(run, str) and run in self.handles and isinstance(path, str):  # a run watched here
                if event == RETRYING:
                    self.retrying(run, path, int(payload.get("attempt") or 0), int(payload.get("attempts") or 0),
                                  f"{payload.get('code')}: {payload.get('message')}",
                                  int(payload.get("delayMs") or 0))
                else:
                    self.unconfirmed(run, path, payload.get("ref"), describe_unconfirmed(payload))
            return
        workflow, sep, tail = name.rpartition(RUN_EVENT)
        status = ENDINGS.get(tail) if sep else None
        run = payload.get("run")
        if status is None or not isinstance(run, str):
            return
        if status == "parked":
            path, why = describe_park(self.handles.get(run))
            self.parked(run, path, why)
            return
        self.ended(run, status, self._error(workflow, run) if status == "failed" else "")

    def _error(self, workflow: str, run: str) -> str:
        """The failed execution's ``CODE: message`` (the event carries only the status)."""
        executions = getattr(self.app.resources.get(workflow), "executions", None) or {}
        error = getattr(executions.get(run), "error", None) or {}
        return f"{error.get('code', '?')}: {error.get('message', '')}" if error else ""

    # --- rendering hooks ----------------------------------------------------------------------------------

    def step(self, run: str, event: str, path: str, target: Mapping[str, str] | None) -> None:
        raise NotImplementedError

    def retrying(self, run: str, path: str, attempt: int, attempts: int, error: str, delay_ms: int) -> None:
        """Attempt ``attempt`` of ``attempts`` failed with ``error``; the next one starts in ``delay_ms``."""
        raise NotImplementedError

    def unconfirmed(self, run: str, path: str, target: Mapping[str, str] | None, how: str) -> None:
        """The step's outcome was unknown after a crash: ``how`` says how it was settled."""
        raise NotImplementedError

    def parked(self, run: str, path: str, why: str) -> None:
        raise NotImplementedError

    def ended(self, run: str, status: str, error: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop rendering (the final state stays on screen)."""



class _StepEvents:
    """The step observer (telo.durable.observers) feeding one execution's steps to a :class:`Progress`."""

    def __init__(self, progress: Progress, handle: LocalRunHandle) -> None:
        self.progress, self.handle = progress, handle

    def step_started(self, path: str, target: Mapping[str, str] | None) -> None:
        pass

    def step_answered(self, path: str, target: Mapping[str, str] | None, *, replayed: bool) -> None:
        recorded = self.handle.recorded(path)
        # A delivery is a step entry without a target at the park path: replaying it IS the delivery reaching
        # the body (telo.durable.waits.deliver).
        event = "executing" if not replayed else \
            "delivered" if recorded is not None and recorded.target is None else "replayed"
        self.progress.step(self.handle.run_id, event, path, target)

    def step_ended(self, path: str, target: Mapping[str, str] | None, error: BaseException | None) -> None:
        pass


class PlainProgress(Progress):
    """One line per event, e.g. ``▶ steps/charge (Python.Function chargeCard)``."""

    def __init__(self, app: Application, out: TextIO) -> None:
        super().__init__(app)
        self.out = out

    def line(self, text: str) -> None:
        from telo.cli.common import printable

        self.out.write(printable(text) + "\n")  # a run id or path with a newline must not forge a line
        self.out.flush()

    def step(self, run: str, event: str, path: str, target: Mapping[str, str] | None) -> None:
        if event == "executing":
            what = describe_target(target)
            self.line(f"▶ {path} ({what})" if what else f"▶ {path}")
        elif event == "delivered":
            self.line(f"✉ {path} delivered")
        else:
            self.line(f"↺ {path} replayed")

    def retrying(self, run: str, path: str, attempt: int, attempts: int, error: str, delay_ms: int) -> None:
        self.line(f"↻ {path} attempt {attempt}/{attempts} failed: {error}; next in {ms_text(delay_ms)}")

    def unconfirmed(self, run: str, path: str, target: Mapping[str, str] | None, how: str) -> None:
        self.line(f"? {path} outcome unknown after a crash: {how}")

    def parked(self, run: str, path: str, why: str) -> None:
        if not path:
            self.line(f"⏸ run {run} parked")
        elif why.startswith(("waiting for", "until")):
            self.line(f"⏸ parked at {path} {why}")
        else:
            self.line(f"⏸ parked at {path}" + (f": {why}" if why else ""))

    def ended(self, run: str, status: str, error: str) -> None:
        if status == "completed":
            self.line(f"✓ run {run} completed")
        elif status == "failed":
            self.line(f"✗ run {run} failed" + (f": {error}" if error else ""))
        elif status == "cancelled":
            self.line(f"✗ run {run} cancelled")
        else:
            self.line(f"… run {run} stopped while running; `telo run` again or `telo worker` continues it")


ICONS = {"executing": ("▶", "yellow"), "done": ("✓", "green"), "replayed": ("↺", "dim"),
         "delivered": ("✉", "cyan"), "parked": ("⏸", "magenta"), "failed": ("✗", "red")}
RUN_STYLE = {"running": "yellow", "parked": "magenta", "completed": "green", "failed": "red", "cancelled": "red"}


class LiveProgress(Progress):
    """A rich live view on stderr: per run, one row per step, updated in place.

    Whether an executing step has finished is read from the handle at each refresh (its entry exists once the
    step completed), so a step needs no completion event."""

    def __init__(self, app: Application, *, force: bool = False) -> None:
        from rich.console import Console
        from rich.live import Live

        super().__init__(app)
        self.lock = threading.Lock()  # rows change in the loop thread and render in rich's refresh thread
        self.rows: dict[tuple[str, str], Row] = {}
        self.runs: dict[str, tuple[str, str]] = {}  # run -> (status, detail)
        self.console = Console(stderr=True, force_terminal=force or None, highlight=False)
        # Redirect what steps print only when stdout shares the terminal: a redirected stdout (> file) must
        # keep the steps' output, not lose it into the progress view.
        self.live = Live(get_renderable=self.render, console=self.console, refresh_per_second=8,
                         redirect_stdout=sys.stdout.isatty(), redirect_stderr=False)
        self.started = False

    def start(self) -> None:
        """Start drawing at the first event, so a manifest without durable runs prints nothing at all."""
        if self.started:
            return
        self.started = True
        self.live.start()
        # Keep the cursor visible: a `kill -9` (the example does one) gives rich no chance to show it again.
        self.console.show_cursor(True)

    def step(self, run: str, event: str, path: str, target: Mapping[str, str] | None) -> None:
        self.start()
        with self.lock:
            self.runs[run] = ("running", "")
            row = self.rows.get((run, path))
            if row is not None and event == "replayed" and row.state in ("executing", "delivered"):
                return  # executed (or delivered) earlier in this process; a later pass replays it
            note = row.note if row is not None and event == "executing" else ""  # (a redrive after its note)
            self.rows[(run, path)] = Row(run, path, describe_target(target), event, note=note)

    def retrying(self, run: str, path: str, attempt: int, attempts: int, error: str, delay_ms: int) -> None:
        self.start()
        with self.lock:
            row = self.rows.get((run, path))
            if row is not None:
                row.retry = (attempt, attempts, SYSTEM_CLOCK.monotonic() + delay_ms / 1000)

    def unconfirmed(self, run: str, path: str, target: Mapping[str, str] | None, how: str) -> None:
        self.start()
        with self.lock:
            self.runs[run] = ("running", "")
            row = self.rows.get((run, path))
            if row is None:  # (settled before it executes: a found receipt is recorded without executing)
                row = self.rows[(run, path)] = Row(run, path, describe_target(target), "executing")
            row.note = f"outcome unknown: {how}"

    def parked(self, run: str, path: str, why: str) -> None:
        self.start()
        with self.lock:
            self.runs[run] = ("parked", f"at {path} {why}".strip() if path else why)
            row = self.rows.get((run, path))
            if row is not None:
                row.state, row.detail = "parked", why

    def ended(self, run: str, status: str, error: str) -> None:
        self.start()
        with self.lock:
            self.runs[run] = (status, error)

    def state_of(self, row: Row) -> str:
        if row.state != "executing":
            return row.state
        handle = self.handles.get(row.run)
        if handle is not None and handle.recorded(row.path) is not None:
            return "done"
        return "failed" if self.runs.get(row.run, ("",))[0] in ("failed", "cancelled") else "executing"

    @staticmethod
    def text_of(row: Row, state: str) -> str:
        """What the row's last column says: a park's reason, a retry's wait, or the state (and a note)."""
        if row.detail:
            return row.detail
        text = state
        if state == "executing" and row.retry is not None:
            attempt, attempts, due = row.retry
            left = due - SYSTEM_CLOCK.monotonic()
            text = f"attempt {attempt}/{attempts} failed, next in {ms_text(left * 1000)}" if left > 0 else \
                f"attempt {attempt + 1}/{attempts}"
        return f"{text}; {row.note}" if row.note else text

    def render(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        from telo.cli.common import printable

        parts: list[Any] = []
        with self.lock:
            for run, (status, detail) in self.runs.items():
                head = Text.assemble(("run ", "bold"), (printable(run), "bold"), " ",
                                     (status, RUN_STYLE.get(status, "")))
                if detail:
                    head.append(f"  {printable(detail)}", style="dim" if status != "failed" else "red")
                parts.append(head)
                grid = Table.grid(padding=(0, 1))
                for row in [r for (r_run, _), r in self.rows.items() if r_run == run]:
                    state = self.state_of(row)
                    icon, style = ICONS.get(state, ("?", ""))
                    grid.add_row(Text(f" {icon}", style=style), Text(printable(row.path)),
                                 Text(printable(row.target), style="dim"),
                                 Text(printable(self.text_of(row, state)), style=style))
                parts.append(grid)
        # The cursor rests on an empty last line: when the process is killed mid-run (the view is never
        # stopped), whatever the terminal prints next starts on a line of its own.
        parts.append(Text(""))
        return Group(*parts)

    def close(self) -> None:
        if self.started:
            self.live.stop()


def choose(app: Application, mode: str) -> Progress | None:
    """The progress renderer for ``--progress MODE`` (see the module docstring), or None for none."""
    if mode == "auto":
        mode = "live" if sys.stderr.isatty() else "off"
    if mode == "live":
        return LiveProgress(app, force=not sys.stderr.isatty())
    if mode == "plain":
        return PlainProgress(app, sys.stderr)
    return None


@contextmanager
def watching(app: Application, mode: str) -> Iterator[Progress | None]:
    """Report the durable runs ``app`` executes inside this block (``asyncio.run`` included)."""
    from telo.durable.execute import observing_handles

    progress = choose(app, mode)
    if progress is None:
        yield None
        return
    unsubscribe: Callable[[], None] = app.events.subscribe(progress.on_event)
    try:
        with observing_handles(progress.observe):
            yield progress
    finally:
        unsubscribe()
        progress.close()

