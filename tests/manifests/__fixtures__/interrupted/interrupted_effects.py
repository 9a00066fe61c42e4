"""Effects of the interrupted-run fixture: each appends one fsynced line to a ledger; `crash_once` ends the
process with os._exit(1) the first time (a marker file remembers it), as a power cut would."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def _record(line: str) -> None:
    with open(os.environ["INTERRUPTED_LEDGER"], "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def record(inputs: dict[str, Any]) -> dict[str, Any]:
    _record(inputs["line"])
    return {"recorded": inputs["line"]}


def crash_once(inputs: dict[str, Any]) -> dict[str, Any]:
    marker = Path(os.environ["INTERRUPTED_MARKER"])
    _record("crash step entered")
    if not marker.exists():
        marker.write_text("crashed once\n")
        os._exit(1)  # no cleanup, no journal write: the step is left unfinished
    return {"survived": True}
