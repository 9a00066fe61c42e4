"""Commands that write to a SQLite journal the process may not write to — a read-only file — print the
catalogue's error and a hint, never a Python traceback (a user's walk-through, 2026-12-04: ``telo deliver``,
``telo cancel`` and ``telo send`` printed ``sqlite3.OperationalError: attempt to write a readonly database``
with its traceback, and ``telo run`` said ``ERR_EXECUTION_FAILED``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_run_outcome import app

# Root's rights override a file's mode; setpriv drops them for the command (CI runs as root).
_NO_OVERRIDE = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                "--bounding-set=-dac_override,-dac_read_search", "--"]


def _telo_unprivileged(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    prefix = _NO_OVERRIDE if os.geteuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-m", "telo", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None, reason="root without setpriv")
def test_writing_to_a_read_only_journal_is_a_clear_error(tmp_path: Path) -> None:
    manifest = app(tmp_path)
    parked = _telo_unprivileged("run", str(manifest), "--input", "id=a", "--input", "mode=park", "--progress",
                                "off", cwd=tmp_path)
    assert parked.returncode == 4, parked.stdout + parked.stderr
    (tmp_path / "runs.db").chmod(0o444)
    for args in (["cancel", "flow:a"], ["deliver", "gate:a", "--payload", "{}"],
                 ["send", "flow:a", "go", "--payload", "{}"]):
        out = _telo_unprivileged(*args, "--manifest", str(manifest), cwd=tmp_path)
        assert "Traceback" not in out.stderr, out.stderr
        assert "error: ERR_JOURNAL_WRITE_FAILED: the SQLite journal " in out.stderr, (args, out.stderr)
        assert "read-only" in out.stderr and out.returncode == 3, (args, out.returncode, out.stderr)
    started = _telo_unprivileged("run", str(manifest), "--input", "id=b", "--input", "mode=ok", "--progress", "off",
                                 cwd=tmp_path)
    assert "ERR_JOURNAL_WRITE_FAILED" in started.stderr and "Traceback" not in started.stderr, started.stderr
    assert started.returncode != 0
