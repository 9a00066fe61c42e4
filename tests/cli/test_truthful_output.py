"""Issue 15, "The CLI tells the truth": what human output prints of a run is what the run is.

- a run id (or token, path, message) with a newline or an escape sequence is printed escaped, so it can neither
  forge a row of a table nor drive the terminal; ``--json`` has it exactly;
- every time is RFC 3339 in UTC with three fractional digits, one width in every table — never epoch ms;
- a run id too long to name a file-journal file is refused up front, with the limit, not with an OSError.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.support import Env, make_env

pytestmark = pytest.mark.timeout(240)

FORGED = "x\nflow:forged  completed  flow"  # a newline, then what would read as a row of `telo runs list`
ANSI = "e\x1b[31mred\x1b[0m"  # an escape sequence: raw, it turns the rest of the terminal red
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def fields(text: str) -> dict[str, str]:
    """The ``key: value`` lines of a human record; every line must be one (no forged or broken line)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition(": ")
        assert sep and re.fullmatch(r"[A-Za-z]+", key), f"not a key: value line: {line!r}"
        out[key] = value
    return out


def test_run_ids_and_tokens_are_printed_escaped(env: Env) -> None:
    # parks on the token 'go:' + FORGED (`telo run` exits 0, or 4 — "not settled" — where it reports parks)
    assert env.telo("run", "m.yaml", "--input", f"id={FORGED}", "--input", "gate=true").returncode in (0, 4)
    env.run(ANSI)
    forged, ansi = f"flow:{FORGED}", f"flow:{ANSI}"
    shown_forged, shown_ansi = "flow:x\\nflow:forged  completed  flow", "flow:e\\x1b[31mred\\x1b[0m"

    listed = env.j("runs", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 3 and "\x1b" not in listed.stdout  # a header and one row per run, nothing forged
    assert lines[1].startswith(f"{shown_ansi}  ") and lines[2].startswith(f"{shown_forged}  parked ")
    assert lines[2].endswith("waiting for go:x\\nflow:forged  completed  flow")
    # --json keeps the exact text (JSON escapes it itself)
    assert [r["run"] for r in env.json("runs", "list")["runs"]] == [ansi, forged]

    status = env.j("status", forged)
    assert status.returncode == 0 and fields(status.stdout)["run"] == shown_forged
    assert json.loads(fields(status.stdout)["parked"])["token"] == f"go:{FORGED}"  # a JSON cell: JSON's escape
    assert env.json("status", forged)["run"] == forged

    for run, shown in ((forged, shown_forged), (ansi, shown_ansi)):
        show = env.j("runs", "show", run)
        assert show.returncode == 0 and "\x1b" not in show.stdout
        assert fields(show.stdout)["run"] == shown
        journal = env.j("runs", "journal", run)
        assert journal.returncode == 0 and "\x1b" not in journal.stdout
        rows = [line for line in journal.stdout.splitlines()[1:] if not line.startswith("interrupt:")]
        assert all(re.match(r"\d+ ", row) for row in rows), journal.stdout  # every row starts with its seq
        tree = env.j("runs", "journal", run, "--tree")
        assert tree.returncode == 0 and tree.stdout.splitlines()[0] == f"run {shown}"
        assert "\x1b" not in tree.stdout

    delivered = env.j("deliver", f"go:{FORGED}", "--payload", "{}")
    assert delivered.returncode == 0 and fields(delivered.stdout)["run"] == shown_forged

    missing = env.j("status", "nope\x1b[2J")
    assert missing.returncode == 1 and "\x1b" not in missing.stderr and "nope\\x1b[2J" in missing.stderr


def test_progress_lines_are_escaped(sqlite_env: Env) -> None:
    proc = sqlite_env.telo("run", "m.yaml", "--input", f"id={ANSI}", "--progress", "plain", check=True)
    assert "\x1b" not in proc.stderr
    assert "✓ run flow:e\\x1b[31mred\\x1b[0m completed" in proc.stderr.splitlines()


def seed_times(root: Path) -> None:
    """Runs whose times have fewer than three significant fractional digits (…:07.5 and …:00), written
    through the store with a fixed clock so every time is known."""
    from telo.clock import FakeClock
    from telo.journal.model import Admission, Parked
    from telo.journal.sqlite import SqliteStore

    clock = FakeClock(1_795_995_127_500)  # 2026-11-29T23:32:07.500Z
    store = SqliteStore(root / "journal.db", clock=clock)
    try:
        store.admit(Admission.of("t:due", status="scheduled", due_at=1_893_456_000_000, workflow="flow"))
        clock.advance(ms=123)
        store.admit(Admission.of("t:parked", workflow="flow"))
        store.park("t:parked", Parked("steps/wait", "nap", None, 1_893_456_000_000))
        store.admit(Admission.of("t:claimed", workflow="flow"))
        assert store.claim("t:claimed", "someone-else", 60_000, clock.now_ms()) is not None
    finally:
        store.close()


def test_times_are_rfc3339_with_milliseconds_and_aligned(sqlite_env: Env) -> None:
    seed_times(sqlite_env.root)
    due = "2030-01-01T00:00:00.000Z"

    listed = sqlite_env.j("runs", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    start = lines[0].index("CREATED")
    created = [line[start:].split()[0] for line in lines[1:]]
    assert created == ["2026-11-29T23:32:07.623Z"] * 2 + ["2026-11-29T23:32:07.500Z"]
    assert lines[-1].endswith(f"due {due}")
    assert len({line.index("  ", start + len(created[0])) for line in lines[1:]}) == 1  # aligned

    status = fields(sqlite_env.j("status", "t:due").stdout)
    assert status["dueAt"] == due  # was epoch ms
    # one JSON vocabulary across the CLI (and the dashboard's API): the same text, never epoch ms
    assert sqlite_env.json("status", "t:due")["dueAt"] == due
    assert sqlite_env.json("status", "t:parked")["parked"]["at"] == due
    assert sqlite_env.json("status", "t:claimed")["claim"]["until"] == "2026-11-29T23:33:07.623Z"
    listed_json = {r["run"]: r for r in sqlite_env.json("runs", "list")["runs"]}
    assert listed_json["t:due"]["dueAt"] == due and listed_json["t:due"]["createdAt"] == "2026-11-29T23:32:07.500Z"

    parked = fields(sqlite_env.j("status", "t:parked").stdout)
    assert json.loads(parked["parked"])["at"] == due and parked["dueAt"] == due
    claimed = fields(sqlite_env.j("status", "t:claimed").stdout)
    assert claimed["claim"].startswith("someone-else until 2026-11-29T23:33:07.623Z (")  # as `runs show` says it

    show = fields(sqlite_env.j("runs", "show", "t:due").stdout)
    assert show["createdAt"] == "2026-11-29T23:32:07.500Z" and show["dueAt"] == due
    assert TIME.fullmatch(show["updatedAt"])
    assert json.loads(fields(sqlite_env.j("runs", "show", "t:parked").stdout)["parked"])["at"] == due
    claim = fields(sqlite_env.j("runs", "show", "t:claimed").stdout)["claim"]
    assert claim.startswith("someone-else until 2026-11-29T23:33:07.623Z (")
    # JSON: the same text as everywhere (it was the plain encoding, fraction trimmed: …:00Z)
    assert sqlite_env.json("runs", "show", "t:due")["dueAt"] == due


def test_schedule_prints_its_due_time_with_milliseconds(sqlite_env: Env) -> None:
    scheduled = sqlite_env.telo("schedule", "m.yaml", "flow", "--at", "2030-01-01T00:00:00Z", "--input", "id=s",
                                check=True)
    assert fields(scheduled.stdout)["dueAt"] == "2030-01-01T00:00:00.000Z"


def test_a_run_id_too_long_for_a_file_name_is_refused_up_front(tmp_path: Path) -> None:
    env = make_env("file", tmp_path)
    longest = "x" * 241  # 'flow%3A' + 241 + '.ndjson' = 255 bytes: the longest file name
    env.run(longest)
    assert env.json("status", f"flow:{longest}")["status"] == "completed"

    too_long = "x" * 242
    for proc in (env.telo("run", "m.yaml", "--input", f"id={too_long}"),
                 env.telo("schedule", "m.yaml", "flow", "--after", "1h", "--run-id", f"flow:{too_long}"),
                 env.j("fork", f"flow:{longest}", "0", "--run-id", f"flow:{too_long}")):
        assert proc.returncode != 0
        assert "error: ERR_DURABLE_RUN_ID_INVALID" in proc.stderr and "Traceback" not in proc.stderr
        assert "at most 255" in proc.stderr and "hint: use a shorter run id" in proc.stderr
    assert sorted(p.name for p in (tmp_path / "journal").iterdir()) == [f"flow%3A{longest}.ndjson"]  # nothing new
    assert env.ledger() == [f"flow:{longest}/steps/{s}" for s in ("first", "second", "third")]

    status = env.j("status", f"flow:{too_long}")
    assert status.returncode == 3 and "error: ERR_DURABLE_RUN_ID_INVALID" in status.stderr
    assert "Traceback" not in status.stderr


def test_other_journals_keep_long_run_ids(sqlite_env: Env) -> None:
    long_id = "x" * 1000
    sqlite_env.run(long_id)
    assert sqlite_env.json("status", f"flow:{long_id}")["status"] == "completed"
