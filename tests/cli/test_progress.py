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
