"""A step's retry policy and per-attempt timeout (reference §3 "Retry", "Timeout"; spec §7.9).

Retry runs INSIDE the step's effect, so the journal records one outcome per step. Each attempt after the first
records its start marker at ``<step>/attempt[k]`` and each failure's verdict (the backoff, its due time) at
``<step>/retryVerdict[k]`` before the backoff begins; a backoff long enough to park (SUSPENDING_BACKOFF_MS)
journals its due time at ``<step>/retry[k]`` and parks there, so a resumed run keeps its budget.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from typing import Any

from telo import paths
from telo.engine.context import RESUME_ATTEMPT, RETRIED, current, derive, entered
from telo.engine.dispatch import Invocable, InvokeError, dispatch
from telo.engine.handle import as_epoch_ms, epoch_ms_value
from telo.engine.journaling import journal_for, suspend_allowed
from telo.engine.services import Services
from telo.engine.steps import InvokeStep, RetryPolicy
from telo.engine.suspend import ParkUntil, ParkWhere
from telo.errors import Code, TeloError

SUSPENDING_BACKOFF_MS = 30_000
# Codes a retry policy never retries (reference §3 "Retry"): contract and resolution failures.
NEVER_RETRIED = frozenset({
    Code.INPUT_INVALID, Code.OUTPUT_INVALID, Code.CONTRACT_UNRESOLVABLE, Code.SCHEMA_PROJECTION_UNRESOLVED,
    Code.RESOURCE_NOT_FOUND, Code.RESOURCE_NOT_INVOKABLE, Code.INVOKE_CANCELLED, Code.PREDICATE_NOT_BOOLEAN,
    Code.DURABLE_SUSPEND_FORBIDDEN, Code.JOURNAL_ENTRY_MISMATCH, Code.DURABLE_UNJOURNALABLE_VALUE,
})


_NO_RETRY = RetryPolicy()


def retryable(exc: TeloError, policy: RetryPolicy) -> bool:
    return exc.code not in NEVER_RETRIED and exc.code not in policy.non_retryable


async def attempts(step: InvokeStep, target: Invocable, inputs: Any, sv: Services, path: str) -> Any:
    """One step's effect with its retry policy and per-attempt timeout (reference §3 "Retry", "Timeout").

    Retry runs INSIDE the step's effect, so the journal records one outcome per step; a backoff long enough
    to park journals its due time at ``<step>/retry[k]`` so a resumed run keeps its budget (spec §7.9).
    """
    policy = step.retry or _NO_RETRY
    ctx = current()
    k, resume_due = ctx.extra(RESUME_ATTEMPT, (0, None))
    journal = journal_for() if ctx.handle is not None else None
    if resume_due is not None:  # a resumed retry: wait out what is left of the recorded backoff, not all of it
        await _wait_until(step, path, k - 1, resume_due, sv, "resumed retry")
    while True:
        if journal is not None and k > 0:
            await journal.decide(paths.attempt_path(path, k), "attempt", functools.partial(dict, attempt=k))
        try:
            # Usually the enclosing context already says attempt 1: then there is nothing to derive.
            here = current()
            if policy.attempts > 0 and here.extra(RETRIED) is None:  # (steps inside may run again: no receipts)
                here = derive(here, extra=(RETRIED, path))
            with entered(here if here.attempt == k + 1 else derive(here, attempt=k + 1)):
                call = dispatch(target, inputs, events=sv.events, path=path)
                if step.timeout_ms is None:
                    return await call
                try:
                    return await asyncio.wait_for(call, step.timeout_ms / 1000)
                except TimeoutError:
                    raise InvokeError(
                        Code.STEP_TIMEOUT,
                        f"{step.where}: attempt {k + 1} did not finish within {step.timeout_ms:g} ms",
                        data={"step": step.name, "timeout": step.timeout_ms},
                    ) from None
        except TeloError as exc:
            if k >= policy.attempts or not retryable(exc, policy):
                raise
            backoff = policy.backoff_ms(k)
            delay = backoff if policy.jitter == "none" else backoff * sv.clock.random()  # (recorded in the verdict)
            due_at = sv.clock.now_ms() + int(delay)
            if journal is not None:  # the verdict: a crash from here on resumes at attempt k+1, at due_at
                verdict = {"attempt": k, "code": exc.code, "message": exc.message, "backoffMs": int(delay),
                           "dueAt": due_at}
                recorded = await journal.decide(paths.retry_verdict_path(path, k), "retry",
                                                functools.partial(dict, verdict))
                due_at = recorded.get("dueAt", due_at) if isinstance(recorded, Mapping) else due_at
            if sv.events.active:  # what the verdict decided, for the live progress view and Assert.Events
                sv.events.emit(f"{target.name}.InvokeRetrying", {
                    "ref": {"kind": target.kind, "name": target.name}, "run": current().run_id, "path": path,
                    "attempt": k + 1, "attempts": policy.attempts + 1, "code": exc.code, "message": exc.message,
                    "delayMs": int(delay)})
            handle = current().handle
            if backoff >= SUSPENDING_BACKOFF_MS and handle is not None:
                # The upstream record of a suspending retry (reference §3), read by upstream runtimes too.
                due = as_epoch_ms(await handle.decide(paths.retry_path(path, k), "value",
                                                      functools.partial(epoch_ms_value, handle, int(due_at))))
                await _wait_until(step, path, k, due if due is not None else due_at, sv,
                                  f"retry {k + 1} of {policy.attempts} after {exc.code}")
            else:
                await sv.sleep(delay / 1000)
            k += 1


async def _wait_until(step: InvokeStep, path: str, k: int, due: int, sv: Services, reason: str) -> None:
    """Wait for a retry's due time: in process when short, parked at ``<step>/retry[k]`` when long (§7.9)."""
    remaining = due - sv.clock.now_ms()
    if remaining <= 0:
        return
    handle = current().handle
    if remaining >= SUSPENDING_BACKOFF_MS and handle is not None:
        suspend_allowed(step.name)
        await handle.park(ParkWhere(paths.retry_path(path, max(k, 0)), step.name, reason), ParkUntil(at=due))
    await sv.sleep(remaining / 1000)


