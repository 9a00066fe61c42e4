"""A small durable manifest on each journal (SQLite, file, PostgreSQL) and the real ``telo`` command to drive it.

Every effect of the workflow appends its idempotency key (``<run>/<step path>``) to ``ledger.txt`` next to the
manifest, so a test reads off exactly which steps of which run executed, and how often.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = """\
kind: Telo.Application
metadata: {{ name: CliFlow }}
imports: {{ Local: durable-local, Durable: durable, Journal: {journal_module}, Py: python }}
targets:
  - name: start
    invoke: !ref flow
    inputs: !cel "inputs"  # passed through: `--input gate=true` is typed by the workflow's inputType
---
{journal}
---
kind: Py.Function
metadata: {{ name: effect }}
function: cli_ledger:effect
---
kind: Durable.Await
metadata: {{ name: approval }}
token: !cel "'go:' + inputs.id"
---
kind: Local.Workflow
metadata: {{ name: flow }}
journal: !ref runs
runId: !cel "'flow:' + inputs.id"
inputType:
  kind: Telo.JsonSchema
  schema:
    type: object
    properties:
      id: {{ type: string }}
      gate: {{ type: boolean, default: false }}
      fail: {{ type: boolean, default: false }}
      sleep: {{ type: number, default: 0 }}
inputs:  # defaults here too: a scheduled run's inputs come from `telo schedule --input`, not the target
  id: !cel "inputs.id"
  gate: !cel "has(inputs.gate) ? inputs.gate : false"
  fail: !cel "has(inputs.fail) ? inputs.fail : false"
  sleep: !cel "has(inputs.sleep) ? inputs.sleep : 0"
steps:
  - name: first
    invoke: !ref effect
    inputs: {{ n: 1, sleep: !cel "inputs.sleep" }}
  - name: second
    invoke: !ref effect
    inputs: {{ n: 2 }}
  - name: approve
    invoke: !ref approval
    when: !cel "inputs.gate"
    inputs: {{ id: !cel "inputs.id" }}
  - name: third
    invoke: !ref effect
    inputs: {{ n: 3, fail: !cel "inputs.fail" }}
"""

LEDGER_MODULE = '''\
"""Test effects: each appends its idempotency key to ledger.txt (fsynced), so tests see what ran."""

import os
import time
from pathlib import Path

LEDGER = Path(__file__).with_name("ledger.txt")


def _write(line):
    with open(LEDGER, "a", encoding="utf-8") as f:
        f.write(line + "\\n")
        f.flush()
        os.fsync(f.fileno())


def effect(inputs, ctx):
    if inputs.get("sleep"):
        _write("begin " + ctx.idempotency_key)
        time.sleep(inputs["sleep"])
    if inputs.get("fail"):
        raise RuntimeError("the third step fails on request")
    _write(ctx.idempotency_key)
    # bytes are plain-encoded as base64url: output that used str() would show b'...' instead
    return {"n": inputs["n"], "raw": bytes([0, 1, 2, 250])}
'''


@dataclass
class Env:
    """One journal flavour in a temporary directory: ``telo(...)`` runs the real command there."""

    kind: str
    root: Path
    journal_args: list[str] = field(default_factory=list)

    @property
    def manifest(self) -> Path:
        return self.root / "m.yaml"

    def telo(self, *args: str, check: bool = False, timeout: float = 90, cwd: Path | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """``telo ARGS`` in the env's directory (or ``cwd``), with the caller's environment minus what would
        name a journal on its own (TELO_JOURNAL, TELO_MANIFEST), plus ``env``."""
        named = ("COLUMNS", "TELO_JOURNAL", "TELO_MANIFEST")
        environ = {k: v for k, v in os.environ.items() if k not in named} | (env or {})
        proc = subprocess.run([sys.executable, "-m", "telo", *args], cwd=cwd or self.root, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=environ)
        if check:
            assert proc.returncode == 0, f"telo {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
        return proc

    def j(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A command that addresses the journal (``--journal`` or ``--manifest``)."""
        return self.telo(*args, *self.journal_args)

    def json(self, *args: str) -> Any:
        proc = self.j(*args, "--json")
        assert proc.returncode == 0, f"telo {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
        return json.loads(proc.stdout)

    def run(self, run_id: str, *inputs: str) -> subprocess.CompletedProcess[str]:
        """Bring a run to where its inputs lead (failed and parked runs included): exit 0 unless a target failed
        (``--exit-on targets``; tests/cli/test_run_outcome.py checks the exit codes of run outcomes)."""
        args = ["run", "m.yaml", "--exit-on", "targets", "--input", f"id={run_id}"]
        for pair in inputs:
            args += ["--input", pair]
        return self.telo(*args, check=True)

    def ledger(self) -> list[str]:
        path = self.root / "ledger.txt"
        return path.read_text().splitlines() if path.exists() else []


def make_env(kind: str, root: Path, pg_url: str | None = None, table: str | None = None) -> Env:
    if kind == "sqlite":
        module, journal, args = "durable-journal-sqlite", "kind: Journal.Journal\nmetadata: { name: runs }\n" \
            "path: ./journal.db", ["--journal", "journal.db"]
    elif kind == "file":
        module, journal, args = "durable-journal-file", "kind: Journal.Journal\nmetadata: { name: runs }\n" \
            "directory: ./journal", ["--journal", "journal"]
    else:
        assert pg_url is not None and table is not None
        # The table is private to the test, so the journal is named by the manifest (which knows the table).
        module = "durable-journal-postgres"
        journal = f"kind: Journal.Journal\nmetadata: {{ name: runs }}\nurl: {json.dumps(pg_url)}\ntable: {table}"
        args = ["--manifest", "m.yaml"]
    (root / "m.yaml").write_text(MANIFEST.format(journal_module=module, journal=journal))
    (root / "cli_ledger.py").write_text(LEDGER_MODULE)
    return Env(kind, root, args)
