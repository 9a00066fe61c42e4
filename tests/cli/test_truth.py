"""Issue 15, "The CLI tells the truth": `telo resume` says when it cannot move a run and exits non-zero, an
error's code is printed once, and a bad journal or a dashboard that cannot listen is one clear error (the
real `telo` command, as a subprocess)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from telo.journal.model import Admission, Parked
from telo.journal.sqlite import SqliteStore
from tests.cli.support import Env

pytestmark = pytest.mark.timeout(240)


def telo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "telo", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def json_any(env: Env, *args: str) -> dict[str, object]:
    """``--json`` output whatever the exit code (a refusal prints its answer too)."""
    proc = env.j(*args, "--json")
    out = json.loads(proc.stdout)
    assert isinstance(out, dict)
    return out



def parked(env: Env, run: str, where: Parked) -> None:
    store = SqliteStore(str(env.root / "journal.db"))
    try:
        store.admit(Admission.of(run, workflow="flow"))
        store.park(run, where)
    finally:
        store.close()


def test_resume_refuses_a_run_it_cannot_move_and_says_what_would(sqlite_env: Env) -> None:
    env = sqlite_env
    env.run("a")  # completes
    env.run("b", "gate=true")  # parks on its Await, token go:b, nothing delivered

    waiting = env.j("resume", "flow:b")
    assert waiting.returncode == 1, waiting.stderr
    assert "resumed: false" in waiting.stdout
    assert "hint: deliver to it: `telo deliver --journal journal.db go:b --payload JSON`" in waiting.stderr
    as_json = json_any(env, "resume", "flow:b")
    assert as_json["resumed"] is False and as_json["status"] == "parked" and "go:b" in as_json["reason"]
    assert env.json("status", "flow:b")["status"] == "parked"  # nothing moved, nothing was written
    assert not any("override/resume" in line for line in env.j("runs", "journal", "flow:b").stdout.splitlines())

    parked(env, "flow:u", Parked("steps/first/@unconfirmed[0]", "effect", None, None, "unconfirmed effect: …"))
    unconfirmed = env.j("resume", "flow:u")
    assert unconfirmed.returncode == 1 and "resumed: false" in unconfirmed.stdout
    assert "`telo resolve --journal journal.db flow:u steps/first --redrive | --skip-with JSON | --fail`" \
        in unconfirmed.stderr

    settled = env.j("resume", "flow:a")
    assert settled.returncode == 1 and "resumed: false" in settled.stdout and "completed" in settled.stdout

    unknown = env.j("resume", "flow:nope")
    assert unknown.returncode == 1 and "error: ERR_DURABLE_RUN_NOT_FOUND" in unknown.stderr

    # What a resume does move still moves: a run deliverable no more (its Await's deadline passed) continues.
    parked(env, "flow:t", Parked("steps/approve", "approval", "go:t", 1, None))
    moved = env.j("resume", "flow:t")
    assert moved.returncode == 0 and "resumed: true" in moved.stdout, moved.stderr


def test_an_error_code_is_printed_once(sqlite_env: Env) -> None:
    env = sqlite_env
    env.run("a")  # creates the journal
    # A manifest hold's park reason starts with its code; the refusal used to repeat it.
    parked(env, "flow:h", Parked("@manifest[0]", "flow", None, None,
                                 "ERR_DURABLE_MANIFEST_CHANGED: the manifest changed (changed: effect)"))
    held = env.j("resume", "flow:h")
    assert held.returncode == 3 and held.stderr.count("ERR_DURABLE_MANIFEST_CHANGED") == 1, held.stderr
    assert held.stderr.startswith("error: ERR_DURABLE_MANIFEST_CHANGED: the manifest changed")


READ_AND_OPERATE = [
    ["status", "r"], ["result", "r"], ["deliver", "tok"], ["cancel", "r"], ["resume", "r"],
    ["resolve", "r", "steps/x", "--redrive"], ["runs", "list"], ["runs", "show", "r"], ["runs", "journal", "r"],
    ["runs", "checkpoints", "r"], ["restore", "r", "0"], ["fork", "r", "0"],
]


def bad_journals(root: Path) -> dict[str, tuple[str, str]]:
    """name -> (the --journal argument, the code it must be refused with)."""
    (root / "dir").mkdir()
    (root / "notes.db").write_text("not a database\n")
    good = root / "good.db"
    SqliteStore(str(good)).close()
    (root / "cut.db").write_bytes(good.read_bytes()[:3000])  # a journal cut short inside its first page
    return {"directory": (f"sqlite://{root / 'dir'}", "ERR_JOURNAL_CONFIG_INVALID"),
            "text file": ("notes.db", "ERR_DURABLE_JOURNAL_CORRUPT"),
            "truncated": ("cut.db", "ERR_DURABLE_JOURNAL_CORRUPT")}


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


def test_a_bad_journal_is_one_clear_error_for_every_command(tmp_path: Path) -> None:
    cases = bad_journals(tmp_path)
    before = snapshot(tmp_path)
    for name, (journal, code) in cases.items():
        for command in [*READ_AND_OPERATE, ["ui", "--port", "0"]]:
            out = telo(tmp_path, *command, "--journal", journal)
            what = f"{name}: telo {' '.join(command)}"
            assert out.returncode == 3, f"{what} exited {out.returncode}:\n{out.stderr}"
            lines = out.stderr.splitlines()
            assert len(lines) == 2 and lines[0].startswith(f"error: {code}: "), f"{what}:\n{out.stderr}"
            assert journal.removeprefix("sqlite://") in lines[0] and lines[1].startswith("hint: "), what
    assert snapshot(tmp_path) == before  # not one byte written, no -wal or -shm left beside them


def test_a_manifests_sqlite_journal_that_is_a_directory_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "journal.db").mkdir()
    (tmp_path / "m.yaml").write_text("kind: Telo.Application\nmetadata: { name: M }\n"
                                     "imports: { Journal: durable-journal-sqlite }\n---\n"
                                     "kind: Journal.Journal\nmetadata: { name: runs }\npath: ./journal.db\n")
    out = telo(tmp_path, "runs", "list", "--manifest", "m.yaml")
    assert out.returncode == 3 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("error: ERR_JOURNAL_CONFIG_INVALID: the SQLite journal") and "is a directory" \
        in out.stderr and "hint: " in out.stderr
    assert list((tmp_path / "journal.db").iterdir()) == []


def test_an_empty_file_is_not_made_a_journal(tmp_path: Path) -> None:
    (tmp_path / "empty.db").touch()
    out = telo(tmp_path, "runs", "list", "--journal", "empty.db")
    assert out.returncode == 1 and out.stderr.startswith("error: ERR_JOURNAL_NOT_FOUND:"), out.stderr
    assert (tmp_path / "empty.db").stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_ui_on_a_busy_port_or_an_unknown_host_is_one_clear_error(tmp_path: Path) -> None:
    SqliteStore(str(tmp_path / "j.db")).close()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = telo(tmp_path, "ui", "--journal", "j.db", "--port", str(port))
    assert out.returncode == 3 and out.stderr.splitlines() == [
        f"error: ERR_UI_BIND_FAILED: cannot listen on 127.0.0.1:{port}: the port is in use",
        "hint: pick another --port (0: any free port), or stop what listens there"], out.stderr
    nowhere = telo(tmp_path, "ui", "--journal", "j.db", "--host", "no-such-host.invalid", "--token", "t")
    assert nowhere.returncode == 3, nowhere.stderr
    lines = nowhere.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ERR_UI_BIND_FAILED: cannot listen on no-such-host.invalid")
