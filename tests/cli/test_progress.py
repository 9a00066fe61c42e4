"""``telo run --progress``: plain lines, the live view (forced, and auto on a terminal), and silence by default
off a terminal so scripts and captured output read as before."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.support import Env

pytestmark = pytest.mark.timeout(180)


def unstyled(text: str) -> str:
    """The text without terminal control sequences (colours, cursor moves)."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def progress_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line[:1] in "▶↺✉⏸✓✗…"]


def test_plain_lines_follow_steps_parks_deliveries_and_the_end(sqlite_env: Env) -> None:
    env = sqlite_env
    first = env.telo("run", "m.yaml", "--input", "id=p", "--input", "gate=true", "--progress", "plain")
    assert first.returncode == 4, first.stderr  # parked: not settled
    assert progress_lines(first.stderr) == [
        "▶ steps/first (Python.Function effect)",
        "▶ steps/second (Python.Function effect)",
        "▶ steps/approve (Durable.Await approval)",
        "⏸ parked at steps/approve waiting for go:p",
    ]
    assert first.stdout.startswith("run 'flow:p': parked")  # progress never goes to stdout: the outcome does
    assert env.j("deliver", "go:p", "--payload", '{"by": "ada"}').returncode == 0
    second = env.telo("run", "m.yaml", "--input", "id=p", "--input", "gate=true", "--progress", "plain",
                      "--json", check=True)
    assert progress_lines(second.stderr) == [
        "↺ steps/first replayed",
        "↺ steps/second replayed",
        "✉ steps/approve delivered",
        "▶ steps/third (Python.Function effect)",
        "✓ run flow:p completed",
    ]
    assert second.stdout.startswith("{")  # --json output is untouched

    failed = env.telo("run", "m.yaml", "--input", "id=x", "--input", "fail=true", "--progress", "plain")
    assert progress_lines(failed.stderr)[-1].startswith("✗ run flow:x failed: ERR_EXECUTION_FAILED: ")


def test_no_progress_by_default_off_a_terminal(sqlite_env: Env) -> None:
    quiet = sqlite_env.telo("run", "m.yaml", "--input", "id=q", check=True)
    assert quiet.stderr == "" and quiet.stdout.startswith("run 'flow:q': completed; result: ")
    off = sqlite_env.telo("run", "m.yaml", "--input", "id=o", "--progress", "off", check=True)
    assert off.stderr == ""


def test_live_view_can_be_forced_off_a_terminal(sqlite_env: Env) -> None:
    live = sqlite_env.telo("run", "m.yaml", "--input", "id=l", "--progress", "live", check=True)
    assert "\x1b[" in live.stderr  # drawn with terminal control sequences
    text = unstyled(live.stderr)
    assert "run flow:l completed" in text
    assert re.search(r"✓ steps/third +Python\.Function effect +done", text)
    assert live.stdout.startswith("run 'flow:l': completed")


def test_live_view_is_the_default_on_a_terminal(sqlite_env: Env) -> None:
    """Auto mode under a pseudo-terminal: the live view draws each step and the run's end."""
    env = sqlite_env
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "telo", "run", "m.yaml", "--input", "id=t", "--input", "gate=true"],
                            cwd=env.root, stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary,
                            env={**os.environ, "TERM": "xterm", "COLUMNS": "120"})
    os.close(secondary)
    screen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            screen += chunk
        elif proc.poll() is not None:
            break
    os.close(primary)
    assert proc.wait(timeout=30) == 4  # parked: not settled
    raw = screen.decode("utf-8", "replace")
    assert "\x1b[?25l" not in raw.split("\x1b[?25h")[-1]  # the cursor is left visible
    text = unstyled(raw)
    assert "run flow:t parked" in text
    assert re.search(r"✓ steps/first +Python\.Function effect +done", text)
    assert re.search(r"⏸ steps/approve +Durable\.Await approval +waiting for go:t", text)


RETRY_MANIFEST = """\
kind: Telo.Application
metadata: { name: Retried }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Py: python }
targets:
  - name: start
    invoke: !ref flow
    inputs: { id: !cel "inputs.id" }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./journal.db
---
kind: Py.Function
metadata: { name: %(name)s }
function: %(function)s
---
kind: Local.Workflow
metadata: { name: flow }
journal: !ref runs
runId: !cel "'flow:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - name: %(name)s
    invoke: !ref %(name)s
    inputs: { id: !cel "inputs.id" }
%(retry)s"""

RETRY_MODULE = '''\
"""charge fails its first two attempts; pay crashes its process the first time, and lookup finds the receipt
of a crashed payment unless the run id says it is missing."""

import os
from pathlib import Path

from telo import NOT_FOUND
from telo.errors import TeloError


def charge(inputs, ctx):
    if ctx.attempt <= 2:
        raise TeloError("ERR_CARD_BUSY", f"busy on attempt {ctx.attempt}")
    return {"charged": inputs["id"]}


def pay(inputs, ctx):
    mark = Path(__file__).with_name("crashed-" + inputs["id"])
    if not mark.exists():
        mark.write_text(ctx.idempotency_key)
        os._exit(9)  # a crash inside the effect: its intent is durable, its receipt never written
    return {"paid": "again"}


def lookup(key):
    return NOT_FOUND if "missing" in key else {"paid": "found", "key": key}
'''


def retry_progress_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line[:1] in "▶↺↻?✉⏸✓✗…"]


def write_retry_env(root: Path, name: str, function: str, retry: str = "") -> None:
    (root / "m.yaml").write_text(RETRY_MANIFEST % {"name": name, "function": function, "retry": retry})
    (root / "crashy.py").write_text(RETRY_MODULE)


def telo(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TELO_JOURNAL", "TELO_MANIFEST")}
    return subprocess.run([sys.executable, "-m", "telo", *args], cwd=root, capture_output=True, text=True,
                          timeout=90, stdin=subprocess.DEVNULL, env=environ)


def test_plain_lines_show_each_retried_attempt_and_its_delay(tmp_path: Path) -> None:
    write_retry_env(tmp_path, "charge", "crashy:charge",
                    "    retry: { attempts: 3, initialDelay: 50, jitter: none }\n")
    done = telo(tmp_path, "run", "m.yaml", "--input", "id=r", "--progress", "plain")
    assert done.returncode == 0, done.stderr
    assert retry_progress_lines(done.stderr) == [
        "▶ steps/charge (Python.Function charge)",
        "↻ steps/charge attempt 1/4 failed: ERR_CARD_BUSY: busy on attempt 1; next in 50 ms",
        "↻ steps/charge attempt 2/4 failed: ERR_CARD_BUSY: busy on attempt 2; next in 100 ms",
        "✓ run flow:r completed",
    ]


def test_live_view_shows_a_retry_wait_then_the_next_attempt() -> None:
    """The live row of a retried step: the failed attempt and the countdown while it waits, then the next one."""
    from types import SimpleNamespace

    from rich.console import Console

    from telo.cli.progress import LiveProgress

    progress = LiveProgress(SimpleNamespace(resources={}))  # type: ignore[arg-type]
    progress.start = lambda: None  # type: ignore[method-assign]  # (render by hand, not on a terminal)
    handle = SimpleNamespace(run_id="flow:v", recorded=lambda path: None)
    progress.handles["flow:v"] = handle  # type: ignore[assignment]
    progress.step("flow:v", "executing", "steps/charge", {"kind": "Python.Function", "name": "charge"})

    def screen() -> str:
        console = Console(width=120, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
        console.print(progress.render())
        return console.export_text()

    base = {"ref": {"kind": "Python.Function", "name": "charge"}, "run": "flow:v", "path": "steps/charge",
            "attempts": 4, "code": "ERR_X", "message": "no"}
    progress.on_event("charge.InvokeRetrying", {**base, "attempt": 2, "delayMs": 60_000})
    assert re.search(r"▶ steps/charge +Python\.Function charge +attempt 2/4 failed, next in (59\.\d|60\.0) s", screen())
    progress.on_event("charge.InvokeRetrying", {**base, "attempt": 3, "delayMs": 0})
    assert re.search(r"▶ steps/charge +Python\.Function charge +attempt 4/4$", screen(), re.M)
    progress.on_event("other.InvokeRetrying", {**base, "run": "elsewhere", "attempt": 1, "delayMs": 5})  # ignored
    assert "elsewhere" not in screen()


def test_plain_lines_show_how_a_lookup_settled_an_unknown_outcome(tmp_path: Path) -> None:
    """A run killed inside a step with a `lookup`: run again, the lookup settles the unknown outcome."""
    write_retry_env(tmp_path, "pay", "crashy:pay")
    (tmp_path / "m.yaml").write_text((tmp_path / "m.yaml").read_text().replace(
        "function: crashy:pay", "function: crashy:pay\nlookup: crashy:lookup"))
    for run, how, after in [("found", "asked lookup → found (receipt recorded)", []),
                            ("missing", "asked lookup → not found (redriven)", ["▶ steps/pay (Python.Function pay)"])]:
        crashed = telo(tmp_path, "run", "m.yaml", "--input", f"id={run}", "--progress", "plain")
        assert crashed.returncode == 9, crashed.stderr
        assert retry_progress_lines(crashed.stderr) == ["▶ steps/pay (Python.Function pay)"]
        again = telo(tmp_path, "run", "m.yaml", "--input", f"id={run}", "--progress", "plain")
        assert again.returncode == 0, again.stderr
        assert retry_progress_lines(again.stderr) == [
            f"? steps/pay outcome unknown after a crash: {how}", *after, f"✓ run flow:{run} completed"]


def test_plain_lines_show_an_operators_answer_and_a_policy_park(tmp_path: Path) -> None:
    """Without a lookup, a non-idempotent function's unknown outcome parks for an operator; the answer is shown
    when the run goes on."""
    write_retry_env(tmp_path, "pay", "crashy:pay")
    assert telo(tmp_path, "run", "m.yaml", "--input", "id=o", "--progress", "plain").returncode == 9
    held = telo(tmp_path, "run", "m.yaml", "--input", "id=o", "--progress", "plain")
    lines = retry_progress_lines(held.stderr)
    assert lines[0] == "? steps/pay outcome unknown after a crash: parked for an operator (policy: park)"
    assert lines[1].startswith("⏸ parked at steps/pay/@unconfirmed[0]: unconfirmed effect: ")
    resolved = telo(tmp_path, "resolve", "flow:o", "steps/pay", "--redrive", "--journal", "journal.db")
    assert resolved.returncode == 0, resolved.stderr
    done = telo(tmp_path, "run", "m.yaml", "--input", "id=o", "--progress", "plain")
    assert retry_progress_lines(done.stderr) == [
        "? steps/pay outcome unknown after a crash: the operator answered → redriven",
        "▶ steps/pay (Python.Function pay)",
        "✓ run flow:o completed",
    ]
