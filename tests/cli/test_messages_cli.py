"""``telo send`` and ``telo events get|list`` (issue 18) against a real journal, with the real command: a run parked
at a receive is sent two messages (one twice, by key), continued by ``telo worker``, and its events read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

MANIFEST = """\
kind: Telo.Application
metadata: { name: CliMsgs }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Durable: durable }
targets:
  - name: start
    invoke: !ref inbox
    inputs: { id: "1" }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Durable.Receive
metadata: { name: nextCmd }
topic: cmds
---
kind: Durable.StreamWrite
metadata: { name: emit }
stream: out
value: !cel "inputs.v"
---
kind: Durable.Publish
metadata: { name: progress }
name: progress
value: !cel "inputs.v"
---
kind: Local.Workflow
metadata: { name: inbox }
journal: !ref runs
runId: !cel "'inbox:' + inputs.id"
steps:
  - name: a
    invoke: !ref nextCmd
  - name: p1
    invoke: !ref progress
    inputs: { v: !cel "steps.a.result.payload" }
  - name: b
    invoke: !ref nextCmd
  - name: p2
    invoke: !ref progress
    inputs: { v: !cel "steps.b.result.payload" }
  - name: s
    invoke: !ref emit
    inputs: { v: !cel "steps.b.result.payload" }
"""


def telo(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-m", "telo", *args], cwd=root, capture_output=True, text=True,
                          timeout=90, stdin=subprocess.DEVNULL, env=env)


def test_send_then_worker_then_events(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(MANIFEST)
    parked = telo(tmp_path, "run", "app.yaml")  # parks at `a`: the outcome says what moves it
    said = parked.stdout + parked.stderr
    assert "waiting for a message on topic 'cmds'" in said and "telo send inbox:1 cmds" in said, said
    assert "telo deliver" not in said
    journal = ("--journal", "runs.db")
    missing = telo(tmp_path, "events", "get", "inbox:1", "progress", *journal)
    assert missing.returncode == 1 and "ERR_DURABLE_EVENT_NOT_SET" in missing.stderr  # "not there" (it said 3)
    pasted = missing.stderr.split("`")[1]  # the hint's command works as pasted (it lacked the run and --journal)
    assert pasted == "telo events list --journal runs.db inbox:1", missing.stderr
    assert telo(tmp_path, *pasted.split()[1:]).returncode == 0
    none = telo(tmp_path, "events", "list", "inbox:1", *journal)  # an empty list is not a failure
    assert none.returncode == 0 and "has published no events" in none.stderr, none
    negative = telo(tmp_path, "events", "get", "inbox:1", "progress", "--wait", "-5s", *journal)
    assert negative.returncode != 0 and "ERR_INVALID_VALUE" in negative.stderr and "negative" in negative.stderr
    first = telo(tmp_path, "send", "inbox:1", "cmds", "--payload", '{"n": 1}', "--key", "k1", "--json", *journal)
    again = telo(tmp_path, "send", "inbox:1", "cmds", "--payload", '{"n": 2}', "--key", "k1", "--json", *journal)
    second = telo(tmp_path, "send", "inbox:1", "cmds", "--payload", '"two"', "--json", *journal)
    assert first.returncode == again.returncode == second.returncode == 0, (first.stderr, again.stderr)
    sent = [json.loads(p.stdout) for p in (first, again, second)]
    assert [s["duplicate"] for s in sent] == [False, True, False] and sent[0]["woke"] is True
    assert sent[0]["seq"] == sent[1]["seq"] < sent[2]["seq"]
    woken = telo(tmp_path, "status", "inbox:1", *journal).stdout  # said `running` and nothing of who runs it
    assert "status: running" in woken and "no process holds it: a `telo worker`" in woken, woken
    worked = telo(tmp_path, "worker", "app.yaml", "--until-idle")
    assert worked.returncode == 0, worked.stderr
    got = telo(tmp_path, "events", "get", "inbox:1", "progress", "--json", *journal)
    assert got.returncode == 0 and json.loads(got.stdout)["value"] == "two"  # the latest wins
    listed = telo(tmp_path, "events", "list", "inbox:1", "--json", *journal)
    assert [e["value"] for e in json.loads(listed.stdout)] == [{"n": 1}, "two"]
    plain = telo(tmp_path, "events", "list", "inbox:1", *journal).stdout.splitlines()
    assert plain[0].split() == ["SEQ", "AT", "NAME", "VALUE"] and len(plain) == 3, plain  # one header line
    streamed = telo(tmp_path, "stream", "read", "inbox:1", "out", "--follow", "--json", *journal)
    assert streamed.returncode == 0 and [json.loads(line) for line in streamed.stdout.splitlines()] == [
        {"offset": 0, "value": "two"}]  # the run settled: --follow ends
    listed_streams = telo(tmp_path, "stream", "list", "inbox:1", "--json", *journal)
    assert json.loads(listed_streams.stdout) == {"run": "inbox:1", "settled": True,
                                                 "streams": [{"stream": "out", "values": 1, "closed": False}]}
    past = telo(tmp_path, "stream", "read", "inbox:1", "out", "--from", "100", *journal)  # was silent
    assert past.returncode == 0 and "--from 100 is past its end (its values are at offsets 0..0)" in past.stderr
    typo = telo(tmp_path, "stream", "read", "inbox:1", "outt", *journal)  # not an empty stream: none at all
    assert typo.returncode != 0 and "wrote no stream 'outt'" in typo.stderr
    assert "`telo stream list --journal runs.db inbox:1`" in typo.stderr, typo.stderr
    never = telo(tmp_path, "events", "get", "inbox:1", "nope", "--wait", "10s", *journal)  # said "within 10s"
    assert never.returncode == 1 and "has settled (completed): it never will" in never.stderr, never.stderr
    assert "--wait" not in never.stderr
    settled = telo(tmp_path, "send", "inbox:1", "cmds", *journal)
    assert settled.returncode != 0 and "ERR_DURABLE_RUN_SETTLED" in settled.stderr
    assert "Traceback" not in settled.stderr + missing.stderr + negative.stderr + typo.stderr
