"""The real ``telo`` command, run as a subprocess of the test (no stdin, output captured)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def telo(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "telo", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
