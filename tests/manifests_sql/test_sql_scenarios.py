"""The sql YAML scenarios: each manifest here runs through ``telo test`` in a fresh child (PASS iff it exits 0),
and ``telo check`` finds nothing in it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from telo.analysis import check

HERE = Path(__file__).resolve().parent
MANIFESTS = sorted(HERE.glob("*.yaml"))


@pytest.mark.parametrize("manifest", MANIFESTS, ids=[m.name for m in MANIFESTS])
def test_scenario_passes_and_checks_clean(manifest: Path) -> None:
    assert check(manifest) == []
    proc = subprocess.run([sys.executable, "-m", "telo", "test", "--timeout", "90", str(manifest)],
                          cwd=HERE.parents[1], capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
