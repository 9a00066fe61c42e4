"""``telo runs list|show|journal|checkpoints`` on SQLite, file and PostgreSQL journals, human and ``--json``."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.support import Env

pytestmark = pytest.mark.timeout(240)


def three_runs(env: Env) -> None:
    """flow:a completes, flow:b parks at its approval, flow:c fails at its third step."""
    env.run("a")
    env.run("b", "gate=true")
    env.telo("run", "m.yaml", "--exit-on", "targets", "--input", "id=c", "--input", "fail=true", check=True)


def key_values(text: str) -> dict[str, str]:
    """The ``key: value`` lines of a human record (keys are right-aligned)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition(": ")
        assert sep, line
        out[key] = value
    return out


def ids(page: dict[str, object]) -> list[str]:
    runs = page["runs"]
    assert isinstance(runs, list)
    return [r["run"] for r in runs]


def test_list_filters_pages_and_renders(env: Env) -> None:
    three_runs(env)
    env.run("d")
    page = env.json("runs", "list")
    assert ids(page) == ["flow:d", "flow:c", "flow:b", "flow:a"] and page["next"] is None  # newest first
    by_id = {r["run"]: r for r in page["runs"]}
    assert by_id["flow:b"]["parked"] == {"path": "steps/approve", "token": "go:b"}
    assert by_id["flow:c"]["error"]["code"] == "ERR_EXECUTION_FAILED"
    assert by_id["flow:a"]["workflow"] == "flow" and by_id["flow:a"]["status"] == "completed"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", by_id["flow:a"]["createdAt"])  # plain timestamp

    assert ids(env.json("runs", "list", "--status", "parked")) == ["flow:b"]
    assert ids(env.json("runs", "list", "--status", "completed")) == ["flow:d", "flow:a"]
    assert ids(env.json("runs", "list", "--workflow", "flow", "--status", "failed")) == ["flow:c"]
    assert ids(env.json("runs", "list", "--workflow", "other")) == []
    assert len(ids(env.json("runs", "list", "--since", "1h"))) == 4
    assert ids(env.json("runs", "list", "--since", "2999-01-01T00:00:00Z")) == []

    first = env.json("runs", "list", "--limit", "3")
    assert ids(first) == ["flow:d", "flow:c", "flow:b"] and isinstance(first["next"], str)
    second = env.json("runs", "list", "--limit", "3", "--after", first["next"])
    assert ids(second) == ["flow:a"] and second["next"] is None

    human = env.j("runs", "list", "--limit", "3")
    assert human.returncode == 0
    lines = human.stdout.splitlines()
    assert lines[0].split() == ["RUN", "STATUS", "WORKFLOW", "CREATED", "UPDATED", "DETAIL"]
    assert [line.split()[:3] for line in lines[1:]] == [["flow:d", "completed", "flow"], ["flow:c", "failed", "flow"],
                                                        ["flow:b", "parked", "flow"]]
    assert lines[3].endswith("parked at steps/approve waiting for go:b")
    assert f"more: --after {first['next']}" in human.stderr

    bad = env.j("runs", "list", "--after", "not-a-cursor")
    assert bad.returncode == 3 and "error: ERR_INVALID_CURSOR" in bad.stderr and "hint:" in bad.stderr
    assert env.j("runs", "list", "--since", "yesterday-ish").returncode == 2
    assert env.j("runs", "list", "--status", "sleeping").returncode == 2


def test_show_reports_the_record(env: Env) -> None:
    three_runs(env)
    parked = env.json("runs", "show", "flow:b")
    assert parked["status"] == "parked" and parked["workflow"] == "flow" and parked["epoch"] == 0
    assert parked["parked"] == {"path": "steps/approve", "resource": "approval", "token": "go:b"}
    assert parked["inputs"] == {"id": "b", "gate": True, "fail": False, "sleep": 0}
    assert "claim" not in parked  # a park releases the claim
    assert parked["digest"]["manifestDigest"].startswith("sha256-") and parked["digest"]["digestScope"] == "reachable"
    assert "hold" not in parked["digest"]
    assert parked["journal"] == {"sqlite": "sqlite", "file": "file", "postgres": "postgres"}[env.kind]

    done = env.json("runs", "show", "flow:a")
    assert done["status"] == "completed" and done["replayedSteps"] == 0
    assert done["collapsedRegions"] == 0 and done["collapseReasons"] == []
    # values leave through the plain encoding: bytes as base64url, never Python's str()
    assert done["result"]["steps"]["first"]["result"] == {"n": 1, "raw": "AAEC-g"}

    failed = env.json("runs", "show", "flow:c")
    assert failed["status"] == "failed" and failed["error"]["code"] == "ERR_EXECUTION_FAILED"

    human = env.j("runs", "show", "flow:b")
    assert human.returncode == 0
    fields = key_values(human.stdout)
    assert fields["status"] == "parked" and fields["run"] == "flow:b"
    assert json.loads(fields["parked"])["token"] == "go:b"
    assert fields["manifestDigest"].startswith("sha256-") and fields["digestScope"] == "reachable"

    missing = env.j("runs", "show", "flow:nope")
    assert missing.returncode == 1
    assert "error: ERR_DURABLE_RUN_NOT_FOUND" in missing.stderr
    # The hinted command names the journal as this one did, so that it works as pasted (tests/cli/
    # test_journal_naming.py).
    assert f"hint: list the journal's runs with `telo runs list {' '.join(env.journal_args)}`" in missing.stderr


def test_journal_lists_every_entry_and_draws_the_tree(env: Env) -> None:
    env.run("b", "gate=true")
    parked = env.json("runs", "journal", "flow:b")
    assert parked["interrupt"] == {"event": "interrupt", "path": "steps/approve"}
    assert env.j("deliver", "go:b", "--payload", '{"by": "ada"}').returncode == 0
    env.run("b", "gate=true")

    data = env.json("runs", "journal", "flow:b")
    entries = data["entries"]
    seqs = [e["seq"] for e in entries]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    by_path = {e["path"]: e for e in entries}
    assert [e["path"] for e in entries if e["kind"] == "step"] == \
        ["steps/first", "steps/second", "steps/approve", "steps/third"]
    first = by_path["steps/first"]
    assert first["event"] == "effect_receipt" and first["target"]["kind"] == "Python.Function"
    assert first["target"]["name"] == "effect" and first["value"] == {"n": 1, "raw": "AAEC-g"}
    assert first["idempotencyKey"] == "flow:b/steps/first" and first["epoch"] == 0
    intent = by_path["steps/first/inputs"]
    assert intent["event"] == "effect_intent" and intent["decision"] == "inputs"
    assert intent["value"] == {"n": 1, "sleep": 0}
    delivery = by_path["steps/approve"]
    assert "target" not in delivery and delivery["value"] == {"by": "ada"} and delivery["event"] == "transaction"
    assert by_path["steps/approve/token"]["value"] == "go:b"
    assert by_path["@digest"]["decision"] == "digest"
    assert "interrupt" not in data
    # each entry says when the store wrote it (RFC 3339, ms), in write order: the delivery came after the park
    times = [e["at"] for e in entries]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", t) for t in times)
    assert times == sorted(times) and delivery["at"] >= by_path["steps/approve/token"]["at"]

    flat = env.j("runs", "journal", "flow:b")
    lines = flat.stdout.splitlines()
    assert lines[0].split() == ["SEQ", "AT", "PATH", "KIND", "DECISION", "TARGET", "EVENT", "VALUE"]
    row = next(line for line in lines if line.split()[2] == "steps/first")
    assert row.split()[1] == first["at"]
    assert row.split()[3:8] == ["step", "—", "Python.Function", "effect", "effect_receipt"]
    assert row.endswith('{"n": 1, "raw": "AAEC-g"}')
    assert next(line for line in lines if line.split()[2] == "steps/approve").split()[3:6] == ["step", "—", "—"]

    tree = env.j("runs", "journal", "flow:b", "--tree").stdout
    assert tree.splitlines()[0] == "run flow:b"
    assert re.search(r"[├└]── steps$", tree, re.M)
    assert re.search(r"✓ first  Python\.Function effect = \{\"n\": 1, \"raw\": \"AAEC-g\"\}  #\d+ effect_receipt", tree)
    assert re.search(r"· inputs  \(inputs\) = \{\"n\": 1, \"sleep\": 0\}  #\d+ effect_intent", tree)
    assert re.search(r"✉ approve = \{\"by\": \"ada\"\}  #\d+ transaction", tree)
    assert re.search(r"· @digest  \(digest\) = ", tree)

    missing = env.j("runs", "journal", "flow:nope")
    assert missing.returncode == 1 and "ERR_DURABLE_RUN_NOT_FOUND" in missing.stderr


def test_checkpoints(env: Env) -> None:
    env.run("a")
    data = env.json("runs", "checkpoints", "flow:a")
    journal = {e["path"]: e["seq"] for e in env.json("runs", "journal", "flow:a")["entries"]}
    assert data["run"] == "flow:a"
    assert data["checkpoints"] == [
        {"seq": 0, "path": "(start)", "epoch": 0, "kind": "start"},
        {"seq": journal["steps/first"], "path": "steps/first", "epoch": 0, "kind": "step"},
        {"seq": journal["steps/second"], "path": "steps/second", "epoch": 0, "kind": "step"},
        {"seq": journal["steps/third"], "path": "steps/third", "epoch": 0, "kind": "step"},
    ]
    human = env.j("runs", "checkpoints", "flow:a").stdout.splitlines()
    assert human[0].split() == ["SEQ", "PATH", "EPOCH", "KIND"]
    assert human[2].split() == [str(journal["steps/first"]), "steps/first", "0", "step"]
    missing = env.j("runs", "checkpoints", "flow:nope")
    assert missing.returncode == 1 and "ERR_DURABLE_RUN_NOT_FOUND" in missing.stderr


def test_a_missing_journal_path_is_not_created(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "telo", "runs", "list", "--journal", "typo.db"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and "error: ERR_JOURNAL_NOT_FOUND" in proc.stderr and "hint:" in proc.stderr
    assert not (tmp_path / "typo.db").exists()
    usage = subprocess.run([sys.executable, "-m", "telo", "runs", "list"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert usage.returncode == 2 and "--journal" in usage.stderr


def wait_for(predicate: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def test_show_claim_holder_unconfirmed_effects_and_digest_hold(sqlite_env: Env) -> None:
    env = sqlite_env
    # A process executing a slow first step holds the claim; `show` sees it alive, then dead after kill -9.
    # (5 s: long enough to look at the live claim; the redrive below runs the step again with these inputs)
    proc = subprocess.Popen([sys.executable, "-m", "telo", "run", "m.yaml", "--input", "id=k", "--input", "sleep=5"],
                            cwd=env.root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: "begin flow:k/steps/first" in env.ledger())
        live = env.json("runs", "show", "flow:k")
        assert live["status"] == "running"
        assert live["claim"]["alive"] is True and live["claim"]["live"] is True
        assert live["claim"]["pid"] == proc.pid and live["claim"]["holder"].startswith("workflow-flow@")
        assert live["claim"]["fence"] == 1  # the first grant of the run's claim
        status = env.j("status", "flow:k").stdout  # (a review: it said "lapsed" for every claim)
        assert re.search(r"claim: workflow-flow@\S+ until \S+ \(live; fencing token 1\)", status), status
    finally:
        proc.kill()
        proc.wait()
    dead = env.json("runs", "show", "flow:k")
    assert dead["status"] == "running" and dead["claim"]["alive"] is False and dead["claim"]["live"] is False
    human = env.j("runs", "show", "flow:k").stdout
    assert re.search(r"claim: workflow-flow@\S+ until \S+ \(lapsed; holder process dead; fencing token 1\)", human)
    status = env.j("status", "flow:k").stdout  # (it printed the claim's members only: a walk-through, 2026-12-04)
    assert re.search(r"claim: workflow-flow@\S+ until \S+ \(lapsed; fencing token 1\)", status), status

    # Resubmitted, the interrupted effect's outcome is unknown: the (non-idempotent) function parks for an
    # operator; the answer is recorded and listed as an unconfirmed effect.
    said = env.run("k", "sleep=0")
    held = env.json("runs", "show", "flow:k")
    assert held["status"] == "parked" and "unconfirmed effect" in held["parked"]["reason"]
    # `telo run` says how to decide, and the command works as pasted: it named the park's own path,
    # steps/first/@unconfirmed[0], which `telo resolve` refused (ERR_DURABLE_EFFECT_NOT_UNCONFIRMED), and then the
    # park's reason named `telo resolve RUN STEP` with no journal, which exited 2 (a user's walk-through), beside a
    # second, working form of the same command
    said_line = said.stdout + said.stderr
    decide = re.search(r"`telo (resolve [^`|]*?) --redrive \|", said_line)
    assert decide is not None and said_line.count("telo resolve") == 1, said_line
    shown = env.telo("status", "flow:k", *env.journal_args).stdout  # `telo status` shows the same, as pasted
    assert f"`telo resolve {env.journal_args[0]} " in shown, shown
    shown = env.telo("runs", "show", "flow:k", *env.journal_args).stdout  # and `telo runs show`
    assert f"`telo resolve {env.journal_args[0]} " in shown, shown
    resolved = env.telo(*shlex.split(decide.group(1)), "--redrive")
    assert resolved.returncode == 0, resolved.stderr
    # the park's path, as `telo status` shows it, names the step too
    assert "steps/first/@unconfirmed[0]" in held["parked"]["path"]
    env.run("k")
    done = env.json("runs", "show", "flow:k")
    assert done["status"] == "completed"
    assert [(u["step"], u["resolution"]["action"], u["resolution"]["by"]) for u in done["unconfirmedEffects"]] == \
        [("steps/first", "redrive", "operator")]

    # A run parked while its reachable manifest changes is held at @manifest[n]: `show` names the hold.
    env.run("h", "gate=true")
    env.manifest.write_text(env.manifest.read_text().replace("inputs: { n: 2 }", "inputs: { n: 20 }"))
    env.run("h", "gate=true")
    hold = env.json("runs", "show", "flow:h")["digest"]
    assert hold["hold"]["path"] == "@manifest[0]" and "ERR_DURABLE_MANIFEST_CHANGED" in hold["hold"]["reason"]
    human = env.j("runs", "show", "flow:h").stdout
    assert re.search(r"digestHold: held at @manifest\[0\]: ERR_DURABLE_MANIFEST_CHANGED", human)
