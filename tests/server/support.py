"""Shared by the dashboard tests: a manifest that parks on a delivery, journals built entry by entry, and the
`telo` command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

import pytest

from telo.journal.model import Admission, Entry, Parked
from telo.journal.store import Store
from tests.greeting_manifest import APPROVAL, GREET_AND_WAIT, manifest

# A workflow that greets, parks on an approval token, then greets whoever approved (tests/greeting_manifest).
MANIFEST = manifest("Dashboard", APPROVAL, GREET_AND_WAIT)

GREET = {"kind": "Run.Value", "name": "greet"}


def parked_run(store: Store, run: str, token: str, *, workflow: str = "flow") -> None:
    """A run as the manifest above leaves it after its first execution: greeted, parked on ``token``."""
    store.admit(Admission.of(run, workflow=workflow, inputs={"id": run}))
    store.append(run, Entry.decided("inputs", "inputs", {"id": run}))
    store.append(run, Entry.decided("steps/first/inputs", "inputs", {"who": "ada"}))
    store.append(run, Entry.step("steps/first", GREET, "hello ada"))
    store.append(run, Entry.decided("steps/wait/inputs", "inputs", {"id": run}))
    store.append(run, Entry.decided("steps/wait/token", "value", token))
    store.park(run, Parked("steps/wait", "approval", token))


def start_ui(journal: Path | str, cwd: Path, *extra: str,
             env: Mapping[str, str] | None = None) -> tuple[subprocess.Popen[str], str, str]:
    """`telo ui --port 0` in the background (``env`` added to this process's environment): the process, the URL
    its first line names, and that line."""
    proc = subprocess.Popen([sys.executable, "-m", "telo", "ui", "--journal", str(journal), "--port", "0", *extra],
                            cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    assert proc.stderr is not None
    line = proc.stderr.readline()
    match = re.search(r"at (http://\S+/)", line)
    if match is None:
        proc.kill()
        pytest.fail(f"telo ui did not start: {line}{proc.stderr.read()}")
    url = match.group(1)
    deadline = time.monotonic() + 20
    while True:  # the line is printed once the socket listens; wait for uvicorn to answer on it
        try:
            with urllib.request.urlopen(url + "api/runs", timeout=2):
                return proc, url, line
        except urllib.error.HTTPError:  # refused (a token is required), but answering
            return proc, url, line
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("telo ui never answered")
            time.sleep(0.1)


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
