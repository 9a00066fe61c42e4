"""Fault-injection points for the crash suite: named boundaries where a test kills this process.

They exist only when a test arms them through the environment — ``TELO_FAULT=<name>`` kills the process with
SIGKILL the first time execution reaches that point, ``TELO_FAULT=<name>@<n>`` the n-th time, and
``TELO_FAULT=<name>[@<n>]:stop`` SIGSTOPs it there instead (a pause: the test continues it with SIGCONT) — and
cost one global lookup otherwise. Normal runs never set the variable. The named boundaries are listed in
:data:`POINTS` so a test cannot arm a point that does not exist.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

POINTS = frozenset({
    "before-admit",  # a workflow start, before the run is admitted
    "after-admit",  # admitted and claimed (durable); a new run's body may have begun its redriven steps
    "after-inputs-decision",  # a step's inputs decision (its effect intent) is durable
    "inside-effect",  # a Python target reached telo.faults.point("inside-effect") while doing its work
    "before-effect",  # about to execute a step's effect
    "after-effect-before-entry",  # the effect returned; its step entry is not written yet
    "after-entry",  # the step entry is durable
    "before-park-record",  # a park latched its signal; the park record is not written yet
    "after-park-record",  # the park record is durable; the signal has not unwound yet
    "after-delivery-append",  # a delivery is durable (payload stored, run unparked: one store operation); the
    # deliverer has not answered yet
    "after-snapshot-append",  # compaction appended its snapshot; nothing truncated yet
    "before-claim-renewal",  # a running body is about to renew its claim
    "before-journal-commit",  # the PostgreSQL writer sent a batch's statements (its row locks are held) and is
    # about to send COMMIT
})


def _armed() -> tuple[str, int, int] | None:
    """(point, which hit, the signal to send) from ``TELO_FAULT``."""
    spec = os.environ.get("TELO_FAULT")
    if not spec:
        return None
    spec, _, flavour = spec.partition(":")
    name, _, count = spec.partition("@")
    if name not in POINTS:
        raise SystemExit(f"TELO_FAULT names no fault point: {name!r} (known: {', '.join(sorted(POINTS))})")
    if flavour not in ("", "stop"):
        raise SystemExit(f"TELO_FAULT: unknown flavour {flavour!r} (only ':stop')")
    return name, int(count or 1), signal.SIGSTOP if flavour else signal.SIGKILL


_ARMED = _armed()
_hits = 0
_lock = threading.Lock()


def armed(name: str) -> bool:
    """Whether a test armed ``name``: a boundary that means "durable" (an entry written) makes its pending
    writes durable first when — and only when — it is armed, so the kill lands where its name says."""
    return _ARMED is not None and _ARMED[0] == name


def point(name: str) -> None:
    """Kill (or stop) this process here if a test armed ``name`` (and this is the armed hit)."""
    global _hits
    if _ARMED is None or _ARMED[0] != name:
        return
    with _lock:
        _hits += 1
        if _hits == _ARMED[1]:
            sys.stdout.flush()
            sys.stderr.flush()
            # raise(), not kill(getpid()): a process-directed SIGSTOP may be taken by another thread while this
            # one goes on for a moment (a COMMIT was seen to leave after it); raise() signals this thread.
            signal.raise_signal(_ARMED[2])
