"""A start that attaches to an existing run (``DurableLocal.Workflow``'s ``onConflict: attach``; reference §6): moved
out of :mod:`telo.kinds.workflow` to keep that module within its size (issue 16 grew the queued start there)."""

from __future__ import annotations

import logging
from typing import Any

from telo.journal.model import NO_VALUE, RunRecord
from telo.values.equality import equal

log = logging.getLogger("telo.durable")


def warn_if_inputs_differ(run: str, record: RunRecord, inputs: Any) -> None:
    """A start that attaches to an existing run (onConflict: attach) gets that run, admitted with ITS inputs:
    when the caller's differ, say so (a warning ``telo run`` prints) rather than let the caller believe its
    inputs were used. ``onConflict: reject`` refuses the start instead."""
    admitted = record.decoded_inputs()
    if admitted is NO_VALUE or equal(admitted, inputs):
        return
    log.warning("durable.run.inputs_differ", extra={
        "durable.run": run,
        "durable.message": f"run {run!r} exists with other inputs; this start attaches to it and its own inputs "
                           "are not used (onConflict: reject refuses such a start; a new runId starts a new run)",
    })
