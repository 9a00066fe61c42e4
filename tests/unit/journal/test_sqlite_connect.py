"""Opening the SQLite journal (:mod:`telo.journal.sqlite_connect`): many processes opening one new file together."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from telo.journal.model import RunFilter
from telo.journal.sqlite import SqliteStore

PROCS = {"cwd": str(Path(__file__).resolve().parents[3])}


def test_processes_opening_one_new_journal_together_all_open_it(tmp_path: Path) -> None:
    """The CI run of the last stop lost a worker to "database is locked" from ``PRAGMA journal_mode = WAL``: racing
    openers of a fresh file. Before the fix this table of 8 processes × 12 fresh files failed ~1 file in 5."""
    openers, files = 8, 12
    code = textwrap.dedent("""
        import sys, time
        from telo.journal.sqlite import SqliteStore
        folder, start = sys.argv[1], float(sys.argv[2])
        for k in range(int(sys.argv[3])):
            while time.time() < start + 0.05 * k:
                pass  # (spin, not sleep: the openers must meet within microseconds)
            with SqliteStore(f"{folder}/j{k}.db"):
                pass
    """)
    start = str(time.time() + 1.5)  # every interpreter has imported telo by then
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path), start, str(files)], stderr=subprocess.PIPE, text=True, **PROCS
        )  # type: ignore[call-overload]
        for _ in range(openers)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * openers, "\n".join(e for e in errors if e)
    for k in range(files):
        with SqliteStore(str(tmp_path / f"j{k}.db")) as store:
            assert store.list_runs(RunFilter(limit=1)).runs == []  # (a journal, with its tables)
