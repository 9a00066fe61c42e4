"""``--journal-compat legacy`` (and TELO_JOURNAL_COMPAT) on the commands that write a journal: a run started,
delivered to and continued by the real ``telo`` command writes plain JSON values with no codec version, which the
upstream runtime that predates the codec reads as they stand (docs/compat.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.compat.approval_flow import approval_flow
from tests.compat.upstream_reader import read_run

MANIFEST = approval_flow("CompatCli", "durable-journal-file", "directory: ./journal",
                         targets="targets:\n  - name: start\n    invoke: !ref flow\n"
                                 "    inputs: { id: !cel \"inputs.id\" }\n",
                         greet="!cel \"{'greeting': 'hello ' + inputs.who}\"")


def telo(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("TELO_JOURNAL", "TELO_MANIFEST",
                                                                "TELO_JOURNAL_COMPAT")} | (env or {})
    return subprocess.run([sys.executable, "-m", "telo", *args], cwd=root, capture_output=True, text=True,
                          timeout=90, stdin=subprocess.DEVNULL, env=environ)


def test_run_deliver_and_worker_write_a_journal_the_upstream_reader_reads(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(MANIFEST)
    started = telo(tmp_path, "run", "m.yaml", "--input", "id=x", "--exit-on", "targets", "--journal-compat", "legacy")
    assert started.returncode == 0, started.stderr
    delivered = telo(tmp_path, "deliver", "go:x", "--payload", '{"by": "bob"}', "--journal", "journal",
                     env={"TELO_JOURNAL_COMPAT": "legacy"})
    assert delivered.returncode == 0, delivered.stderr
    worked = telo(tmp_path, "worker", "m.yaml", "--until-idle", "--journal-compat", "legacy")
    assert worked.returncode == 0, worked.stderr
    read = read_run(tmp_path / "journal", "flow:x")
    assert read.record is not None and read.record["status"] == "completed"
    assert read.record["inputs"] == {"id": "x"} and "inputsCodecVersion" not in read.record
    assert read.value("inputs") == {"id": "x"} and read.value("steps/wait") == {"by": "bob"}
    assert read.value("steps/last") == {"greeting": "hello bob"}
    for path, entry in read.entries.items():
        assert ("v" in entry) == path.split("/")[-1].startswith("@"), path  # only telo's own records are typed


def test_a_mode_that_is_not_one_is_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(MANIFEST)
    refused = telo(tmp_path, "run", "m.yaml", "--input", "id=x", env={"TELO_JOURNAL_COMPAT": "plain"})
    assert refused.returncode == 2 and "--journal-compat" in refused.stderr and "plain" in refused.stderr
    assert not (tmp_path / "journal").exists() or not list((tmp_path / "journal").iterdir())


def test_a_bad_mode_is_refused_by_every_command_even_one_without_the_option(tmp_path: Path) -> None:
    """`telo cancel` (no --journal-compat) went through with TELO_JOURNAL_COMPAT=bogus and cancelled the run; a
    command refuses it before it does anything now (from review)."""
    (tmp_path / "m.yaml").write_text(MANIFEST)
    telo(tmp_path, "run", "m.yaml", "--input", "id=c", "--exit-on", "targets")
    assert '"status": "parked"' in telo(tmp_path, "status", "flow:c", "--journal", "journal", "--json").stdout
    refused = telo(tmp_path, "cancel", "flow:c", "--journal", "journal", env={"TELO_JOURNAL_COMPAT": "bogus"})
    assert refused.returncode == 2 and "TELO_JOURNAL_COMPAT is 'bogus'" in refused.stderr, refused.stderr
    status = telo(tmp_path, "status", "flow:c", "--journal", "journal", "--json")
    assert '"status": "parked"' in status.stdout, status.stdout


def test_schedules_trigger_and_backfill_take_the_option(tmp_path: Path) -> None:
    """Both admit runs, yet had no --journal-compat ("No such option")."""
    for command in ("trigger", "backfill"):
        shown = telo(tmp_path, "schedules", command, "--help")
        assert shown.returncode == 0 and "--journal-compat" in shown.stdout, shown.stdout + shown.stderr
