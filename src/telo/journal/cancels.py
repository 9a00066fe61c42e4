"""An in-process notice that some run was cancelled, so a running body need not read its status per step.

A durable body stops at its next step once its run is cancelled (docs/guarantees.md). Reading the run's
status before every step costs a database read per step; instead a body re-reads it when a cancel was
written by THIS process since its last read (this counter moved), and otherwise at most every
:data:`POLL_MS` — which is how a cancel written by another process (``telo cancel``) is noticed.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

POLL_MS: Final = 20

_generation = 0


def generation() -> int:
    return _generation


def notice(settled: Any = None) -> None:
    """A store wrote a cancellation: bump the counter once it is durable (``settled`` may be the write's
    future, when the store returned one)."""
    if isinstance(settled, asyncio.Future):
        settled.add_done_callback(lambda _f: _bump())
    else:
        _bump()


def _bump() -> None:
    global _generation
    _generation += 1
