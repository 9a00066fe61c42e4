"""What the fault suite's tests share: a payment workflow on one store, real ``telo`` processes, the ledger.

A :class:`Payments` is one store (tests/crash/support.py ``make_spec``: a SQLite file, a file-journal
directory, a PostgreSQL table prefix), a manifest written for it (``prepare`` → ``charge`` → ``notify``, the
charge a ``Python.Function`` with the default unconfirmed-effect policy, ``park``: it must never run twice), and a
ledger the effects write themselves (workflows/payments.py). Processes are started with the locations in
their environment and can be paused (SIGSTOP/SIGCONT), signalled and killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from telo.journal.model import RunRecord
from telo.journal.store import Store
from tests.crash.support import REPO_ROOT, StoreSpec, make_spec

WORKFLOWS = Path(__file__).resolve().parent / "workflows"
TELO = [sys.executable, "-m", "telo"]

JOURNALS = {  # a journal document per store kind, located through the environment (also test_queue_workers.py)
    "sqlite": ("durable-journal-sqlite", 'path: !cel "variables.journal"'),
    "file": ("durable-journal-file", 'directory: !cel "variables.journal"'),
    "postgres": ("durable-journal-postgres", 'url: !cel "variables.journal"\ntable: !cel "variables.table"'),
}

MANIFEST = """\
kind: Telo.Application
metadata: {{ name: Payments, version: 1.0.0 }}
imports:
  Py: python
  Local: durable-local
  Journal: {module}
variables:
  journal: {{ env: FAULT_JOURNAL, type: string }}
  table: {{ env: FAULT_TABLE, type: string }}
targets:
  - name: start
    invoke: !ref pay
    inputs: {{ id: !cel "inputs.id" }}
---
kind: Journal.Journal
metadata: {{ name: runs }}
{location}
claimTtl: {ttl}
---
kind: Py.Function
metadata: {{ name: prepare }}
function: payments:{prepare}
idempotent: true
---
kind: Py.Function
metadata: {{ name: charge }}
function: payments:charge
---
kind: Py.Function
metadata: {{ name: refund }}
function: payments:refund
keyConsuming: true
---
kind: Py.Function
metadata: {{ name: notify }}
function: payments:notify
keyConsuming: true
---
kind: Local.Workflow
metadata: {{ name: pay }}
journal: !ref runs
runId: !cel "inputs.id"
inputs: {{ id: !cel "inputs.id" }}
steps:
  - {{ name: prepare, invoke: !ref prepare, inputs: {{ id: !cel "inputs.id" }} }}
{body}
  - {{ name: notify, invoke: !ref notify, inputs: {{ id: !cel "inputs.id" }} }}
"""
CHARGE = '  - { name: charge, invoke: !ref charge, inputs: { id: !cel "inputs.id" } }'
# The saga: a failed charge is compensated by a refund that is told the error (and returns it).
SAGA = """\
  - name: pay
    try:
      - { name: charge, invoke: !ref charge, inputs: { id: !cel "inputs.id" } }
    catch:
      - { name: refund, invoke: !ref refund, inputs: { id: !cel "inputs.id", error: !cel "error" } }"""


@dataclass(frozen=True, slots=True)
class Line:
    key: str
    step: str
    pid: int
    ns: int


@dataclass
class Proc:
    label: str
    popen: subprocess.Popen[bytes]
    out: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            os.kill(self.pid, sig)

    def wait(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
            raise AssertionError(f"{self.label} (pid {self.pid}) did not exit within {timeout} s:\n"
                                 f"{self.output()}") from None

    def output(self) -> str:
        return self.out.read_text("utf-8", "replace")[-6000:]


@dataclass
class Payments:
    kind: str
    tmp: Path
    ttl: str = "1s"
    prepare: str = "prepare"
    journal_dir: Path | None = None  # where the journal goes (default: ``tmp``), e.g. a small filesystem
    saga: bool = False  # the charge inside a try whose catch refunds (SAGA)
    body: str | None = None  # the steps between prepare and notify (default: CHARGE, or SAGA)
    procs: list[Proc] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.spec: StoreSpec = make_spec(self.kind, self.journal_dir or self.tmp)
        module, location = JOURNALS[self.kind]
        self.manifest = self.tmp / "payments.yaml"
        self.manifest.write_text(MANIFEST.format(module=module, location=location, ttl=self.ttl,
                                                 prepare=self.prepare,
                                                 body=self.body or (SAGA if self.saga else CHARGE)))
        self.ledger = self.tmp / "ledger.txt"
        self.ledger.touch()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("TELO_FAULT", "FAULT_"))}
        self.env.update({"FAULT_JOURNAL": self.spec.location, "FAULT_TABLE": self.spec.table or "unused",
                         "FAULT_LEDGER": str(self.ledger), "PYTHONUNBUFFERED": "1",
                         "PYTHONPATH": os.pathsep.join(p for p in (str(WORKFLOWS), os.environ.get("PYTHONPATH", ""))
                                                       if p)})

    def open(self) -> Store:
        return self.spec.open()

    def start(self, *args: str, label: str, env: Mapping[str, str] | None = None) -> Proc:
        out = self.tmp / f"{label}.out"
        with open(out, "wb") as f:
            popen = subprocess.Popen([*TELO, *args], cwd=REPO_ROOT, env={**self.env, **(env or {})},
                                     stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        proc = Proc(label, popen, out)
        self.procs.append(proc)
        return proc

    def run(self, run: str, *, label: str, env: Mapping[str, str] | None = None) -> Proc:
        return self.start("run", str(self.manifest), "--input", f"id={run}", "--progress", "off", label=label,
                          env=env)

    def worker(self, *, label: str, env: Mapping[str, str] | None = None, until_idle: bool = True) -> Proc:
        return self.start("worker", str(self.manifest), "--interval", "100ms",
                          *(["--until-idle"] if until_idle else []), label=label, env=env)

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A ``telo`` command to its end, with this flow's environment, its output captured."""
        return subprocess.run([*TELO, *args], cwd=REPO_ROOT, env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def lines(self) -> list[Line]:
        out = []
        for raw in self.ledger.read_text().splitlines():
            key, step, pid, ns = raw.split(" ")
            out.append(Line(key, step, int(pid), int(ns)))
        return out

    def wait_for_line(self, step: str, pid: int, timeout: float = 30.0) -> Line:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines():
                if line.step == step and line.pid == pid:
                    return line
            time.sleep(0.01)
        raise AssertionError(f"no {step!r} line from pid {pid} within {timeout} s; ledger: {self.lines()}")

    def pause(self, proc: Proc, attempts: int = 50) -> None:
        """SIGSTOP ``proc`` at a moment it holds no SQLite write transaction.

        SQLite has one writer per file: a process stopped inside its write transaction (a claim renewal, a batch
        commit) keeps every other process from writing the journal until it continues — B would wait out the
        pause ("database is locked") however long it lasts, as any SQLite application would. What these tests
        pause is a holder between writes, so a stop that lands inside one is undone and tried again.
        """
        for _ in range(attempts):
            proc.signal(signal.SIGSTOP)
            if self.kind != "sqlite" or self._sqlite_writable():
                return
            proc.signal(signal.SIGCONT)
            time.sleep(0.02)
        raise AssertionError(f"{proc.label} held the SQLite write lock at each of {attempts} pauses")

    def _sqlite_writable(self) -> bool:
        import sqlite3

        conn = sqlite3.connect(self.spec.location, timeout=0.3, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            conn.close()

    def record(self, run: str) -> RunRecord:
        with self.open() as store:
            record = store.read_run(run)
        assert record is not None, f"run {run!r} is not in the journal"
        return record

    def close(self) -> None:
        for proc in self.procs:
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)
                proc.popen.kill()
                proc.popen.wait()

