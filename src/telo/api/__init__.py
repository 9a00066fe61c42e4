"""The Python API: load a manifest, start and address durable runs, from sync or async code (issue 7;
docs/python-api.md is the contract).

Two classes, one vocabulary:

* :class:`App` (:mod:`telo.api.sync`) — synchronous. ``telo.load(...)`` returns one. It runs the application
  on a private event loop in a background thread, so a run it starts keeps executing while your code does
  other things, exactly as under ``telo run``; every method blocks until its answer is ready.
* :class:`AsyncApp` (:mod:`telo.api.aio`) — the same methods as coroutines, on the event loop you await them
  from (``AsyncApp.load(...)``; ``async with`` closes it).

Runs are addressed as in the CLI: by run id (a ``str`` or the :class:`RunRef` :meth:`AsyncApp.start`
returned) in the application's journal. ``journal=`` names a journal the way ``--journal`` does (a SQLite
file, a file-journal directory, ``postgresql://…``, ``memory:``; created if it does not exist, since the App
starts runs in it) and replaces the journal of every journal resource of the manifest: runs are written
there and every addressing method reads it.

Results (:mod:`telo.api.results`) are frozen dataclasses whose values are domain values (``int``, ``float``,
``str``, ``dict``, :class:`telo.values.Timestamp` …), as CEL and the journal see them.

Operations that make a run ready to continue — :meth:`~AsyncApp.deliver`, :meth:`~AsyncApp.resume`,
:meth:`~AsyncApp.fork`, :meth:`~AsyncApp.restore` — also continue it in this process, in the background,
when the run's workflow is one of this application's (pass ``continue_run=False`` to only record, like the
CLI). With a clock other than the system clock (``clock=FakeClock()`` in tests) time does not pass by itself,
so :meth:`~AsyncApp.run` returns as soon as a run parks on time; advance the clock and call
:meth:`~AsyncApp.run_due` (see :mod:`telo.testing`).
"""

from __future__ import annotations

from telo.api.aio import AsyncApp
from telo.api.results import (
    Delivery,
    JournalEntry,
    Resolution,
    RunError,
    RunList,
    RunRef,
    RunResult,
    RunStatus,
    Scheduled,
)
from telo.api.sync import App, load
from telo.journal.eventlog import Checkpoint
from telo.journal.model import Parked
from telo.operations.schedules import ScheduleView

__all__ = [
    "App",
    "AsyncApp",
    "Checkpoint",
    "Delivery",
    "JournalEntry",
    "Parked",
    "Resolution",
    "RunError",
    "RunList",
    "RunRef",
    "RunResult",
    "RunStatus",
    "ScheduleView",
    "Scheduled",
    "load",
]
