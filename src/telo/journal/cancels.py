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


def notice(settled: asyncio.Future[Any] | None = None) -> None:
    """A store wrote a cancellation: bump the counter once it is durable — at once, or once ``settled``, the
    write's future (a write queued for a group commit), is done."""
    if settled is not None:
        settled.add_done_callback(lambda _f: _bump())
    else:
        _bump()


def _bump() -> None:
    global _generation
    _generation += 1
