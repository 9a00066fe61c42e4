"""A transient fault is not terminal (issue 12, case 6).

Observed before: a disk filling up mid-run settled the run ``failed`` for good (SQLite:
``ERR_JOURNAL_WRITE_FAILED``; the file journal: a traceback and ``INTERNAL_ERROR: OSError``), although
docs/guarantees.md promised that a failed write leaves the run ``running`` for whoever takes its claim.

Here the journal lives on a small tmpfs (CI runs as root; elsewhere the test needs root too). Process A runs
the payment workflow; while its ``prepare`` runs, the test fills the filesystem. A's next journal write fails:
A stops (``ERR_JOURNAL_WRITE_FAILED`` on stderr, no traceback), the run stays ``running``, and nothing after the
failed write — no charge — happened. The test frees the space; a worker completes the run, charging once.

The PostgreSQL counterpart restarts the test cluster (``pg_ctl restart``) while A is inside ``prepare``
(``TELO_TEST_PG_DIR``, which scripts/postgres.sh exports with the throwaway cluster).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.faults.support import Payments

PREPARE_MS = "1500"


@contextlib.contextmanager
def small_filesystem(where: Path, size: str = "16m") -> Iterator[Path]:
    where.mkdir(parents=True)
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("the disk-full test needs root to mount a tmpfs (CI runs as root)")
        pytest.skip("mounting a tmpfs needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(directory: Path) -> Path:
    """Fill the filesystem of ``directory`` to the last byte; the filler file, to remove afterwards."""
    filler = directory / "filler.bin"
    block = b"\0" * 65536
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(block)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        try:  # the last partial block
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass
    return filler


@pytest.mark.parametrize("kind", ["sqlite", "file"])
def test_a_full_disk_stops_the_execution_and_leaves_the_run_for_later(
        kind: str, tmp_path: Path, payments: Callable[..., Payments]) -> None:
    with small_filesystem(tmp_path / "disk") as disk:
        flow = payments(kind, journal_dir=disk)
        run = "pay:full"
        a = flow.run(run, label="a", env={"FAULT_PREPARE_MS": PREPARE_MS, "FAULT_PREPARE_BYTES": "65536"})
        flow.wait_for_line("prepare", a.pid)
        filler = fill(disk)
        code = a.wait(60)
        ctx = f"[{kind}]"
        out = a.output()
        assert "ERR_JOURNAL_WRITE_FAILED" in out and "Traceback" not in out, f"{ctx} exit {code}:\n{out}"
        assert [line.step for line in flow.lines()] == ["prepare"], f"{ctx} {flow.lines()}"
        filler.unlink()
        assert flow.record(run).status == "running", f"{ctx} {flow.record(run)!r}"
        b = flow.worker(label="b")
        assert b.wait(60) == 0, b.output()
        final = flow.record(run)
        assert final.status == "completed" and final.error is None, f"{ctx} {final!r}"
        assert [line.step for line in flow.lines()].count("charge") == 1


def _pg_ctl(action: str) -> None:
    data = os.environ.get("TELO_TEST_PG_DIR")
    if not data:  # (scripts/postgres.sh exports it with the throwaway cluster it starts, in CI as elsewhere)
        pytest.skip("the PostgreSQL server was not started by scripts/postgres.sh (TELO_TEST_PG_DIR unset): "
                    "a server telo did not start is not restarted by its tests")
    bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    runas = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*runas, str(bindir / "pg_ctl"), "-D", f"{data}/data", "-m", "fast", "-w", "-t", "60",
                    action], check=True, stdout=subprocess.DEVNULL)


def test_a_postgres_restart_mid_run_never_fails_the_run_nor_charges_twice(payments: Callable[..., Payments]) -> None:
    """The server restarts while A is inside ``prepare``: A's next write either reconnects (the pool replaces
    the dropped connection) and the run goes on, or fails (``ERR_JOURNAL_UNAVAILABLE``) and A stops, leaving the
    run ``running``. Either way nothing settles the run ``failed``, and a worker finishes it with one charge."""
    flow = payments("postgres")
    run = "pay:restart"
    a = flow.run(run, label="a", env={"FAULT_PREPARE_MS": PREPARE_MS})
    flow.wait_for_line("prepare", a.pid)
    _pg_ctl("restart")
    a.wait(90)
    out = a.output()
    assert "Traceback" not in out and "INTERNAL_ERROR" not in out, out
    record = flow.record(run)
    assert record.status in ("running", "completed"), f"{record!r}\n{out}"
    b = flow.worker(label="b")
    assert b.wait(90) == 0, b.output()
    assert flow.record(run).status == "completed"
    assert [line.step for line in flow.lines()].count("charge") == 1, flow.lines()
