"""The kernel events ``Assert.Events`` sees (reference §14), as data for the generated reference (docs/kinds/).

An event is named ``<resource>.<Event>`` after the resource that emits it (``chargeCard.Invoked``), so an
``Assert.Events`` pattern names a resource, an event, or ``*`` for either segment. Emitted by the dispatch
chokepoint (telo.engine.dispatch), the retry loop (telo.engine.retry), the resolution of an unconfirmed effect
(telo.durable.unconfirmed), ``DurableLocal.Workflow`` (telo.kinds.workflow) and ``Console.WriteLine``;
tests/unit/test_kind_reference.py checks this list against the ``emit(...)`` calls of the source.
"""

from __future__ import annotations

from typing import NamedTuple


class Event(NamedTuple):
    name: str  # the part after `<resource>.`
    emitted_by: str
    when: str
    payload: str


KERNEL_EVENTS: tuple[Event, ...] = (
    Event("Invoked", "any invoked resource", "a call returned",
          "`{ref, inputs, outputs, phase: end, outcome: ok}`"),
    Event("InvokeRejected", "any invoked resource", "a call failed with a telo error (an `ERR_…` code: a "
          "contract, a timeout seen by the caller, a `throw` …)", "`{ref, inputs, code, message, outcome: error}`"),
    Event("InvokeFailed", "any invoked resource", "a call raised something else (a Python exception); the caller "
          "sees ERR_EXECUTION_FAILED", "`{ref, inputs, code: ERR_EXECUTION_FAILED, message}`"),
    Event("InvokeCancelled", "any invoked resource", "a call was cancelled (its step's `timeout` ran out, a "
          "sibling failed, shutdown)", "`{ref, inputs}`"),
    Event("InvokeParked", "any invoked resource", "a call parked its durable run (a sleep, an await, a long retry "
          "backoff)", "`{ref, inputs, outcome: parked}`"),
    Event("InvokeRetrying", "any invoked resource", "an attempt of a step with a `retry` policy failed and will "
          "be retried (after the delay, jitter applied; a long one parks the run)", "`{ref, run, path, attempt, "
          "attempts, code, message, delayMs}` (`attempt` is the failed one, 1-based, of `attempts` in all)"),
    Event("InvokeUnconfirmed", "any invoked resource", "a durable run resumed at a call whose outcome is unknown (a "
          "crash inside it) and decided what to do: its `lookup`'s answer, an operator's (`telo resolve`), or its "
          "`onUnconfirmed` policy", "`{ref, run, path, key, action, by, found}`: `action` redrive, skip, fail or "
          "park; `by` lookup, operator or policy; `found` the lookup's answer"),
    Event("RunCompleted", "DurableLocal.Workflow", "an execution of a run ended: completed", "`{run, status, "
          "replayedSteps}`"),
    Event("RunFailed", "DurableLocal.Workflow", "… failed", "likewise"),
    Event("RunParked", "DurableLocal.Workflow", "… parked (waiting for a time or a delivery)", "likewise"),
    Event("RunCancelled", "DurableLocal.Workflow", "… was cancelled", "likewise"),
    Event("RunRunning", "DurableLocal.Workflow", "… stopped with the run still running (the process was "
          "interrupted or lost its claim)", "likewise"),
    Event("LineWritten", "Console.WriteLine", "a line was written", "`{line}`"),
)

__all__ = ["KERNEL_EVENTS", "Event"]
