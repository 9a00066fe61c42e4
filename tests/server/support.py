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

from telo.journal.model import Admission, Entry, Outcome, Parked
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


def failed_run(store: Store, run: str, *, workflow: str = "batch", at_ms: int = 1_796_200_000_000) -> None:
    """A run as the engine leaves one that fanned out over three items, then failed a step after two retries
    (the entries engine/retry.py writes: verdicts at ``@retry[k]``, marks at ``@attempt[k]``, ``@failed``)."""
    store.admit(Admission.of(run, workflow=workflow, inputs={"order": "A-17", "items": ["a", "b", "c"]}))
    store.append(run, Entry.decided("inputs", "inputs", {"order": "A-17"}))
    store.append(run, Entry.decided("steps/each/inputs", "inputs", {"items": ["a", "b", "c"]}))
    store.append(run, Entry.decided("steps/each/collection", "collection", ["a", "b", "c"]))
    for i, item in enumerate("abc"):
        store.append(run, Entry.decided(f"steps/each[{i}]/w/inputs", "inputs", {"who": item}))
        store.append(run, Entry.step(f"steps/each[{i}]/w", GREET, f"hello {item}"))
    store.append(run, Entry.step("steps/each", {"kind": "Run.Iteration", "name": "each"}))
    store.append(run, Entry.decided("steps/charge/inputs", "inputs", {"amount": 5}))
    for k in (0, 1):
        verdict = {"attempt": k, "code": "ERR_CARD_DECLINED", "message": f"declined ({k})", "backoffMs": 100,
                   "dueAt": at_ms + 100 * (k + 1)}
        store.append(run, Entry.decided(f"steps/charge/@retry[{k}]", "retry", verdict))
        store.append(run, Entry.decided(f"steps/charge/@attempt[{k + 1}]", "attempt", {"attempt": k + 1}))
    store.append(run, Entry.decided("steps/charge/@failed", "failure",
                                    {"code": "ERR_CARD_DECLINED", "message": "declined for good"}))
    store.complete(run, Outcome.failed("ERR_CARD_DECLINED", "declined for good"))


def retrying_run(store: Store, run: str, *, due_ms: int) -> None:
    """A run parked on a long backoff (engine/retry.py): attempt 1 of its step failed, attempt 2 is due at
    ``due_ms``; the park's reason says how many retries the policy allows."""
    store.admit(Admission.of(run, workflow="pay", inputs={"id": run}))
    store.append(run, Entry.decided("steps/charge/inputs", "inputs", {"amount": 5}))
    store.append(run, Entry.decided("steps/charge/@retry[0]", "retry",
                                    {"attempt": 0, "code": "ERR_TIMEOUT", "message": "slow", "backoffMs": 60_000,
                                     "dueAt": due_ms}))
    store.append(run, Entry.decided("steps/charge/retry[0]", "value", due_ms))
    store.park(run, Parked("steps/charge/retry[0]", "charge", None, due_ms, "retry 1 of 5 after ERR_TIMEOUT"))


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
