"""What `telo run` says about the durable runs it started or attached to, and the exit code that says it.

A durable run started by a target is detached (reference §1): the target's answer is ``{runId, started,
status: running}`` the moment the run is admitted, while ``telo run`` goes on to await the run until it settles
or parks. Reported as that answer, a run that completed, failed or parked read ``running`` — and, with the
old exit code (the targets'), ``telo run`` exited 0 for a failed run or one that parked for a delivery. Now:

* each run's outcome is one line on stdout — status, then the result, the error, or what it waits for and
  the command that moves it on;
* ``--json`` prints the targets' answers with each run's *final* status, and its ``result``, ``error`` or
  ``parked`` (the steps' own output goes to stderr meanwhile, so stdout is the JSON alone);
* the exit code is the worst outcome: 1 for a run that failed or was cancelled, 4 for one that has not
  settled (parked, left running, or executed by another process), else the targets' code (docs/cli.md). A start
  a queue's ``singleton`` skipped (issue 16) is what the manifest asked for: it exits 0, its line naming the live
  run; the one a start attached to by ``dedupKey`` or ``debounce`` is reported like any run it attached to.
  ``--exit-on targets`` keeps upstream's rule (the targets' code alone), for scenario manifests that fail
  runs on purpose (``telo test`` runs them so).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import click

from telo.cli.common import (
    EXIT_FAILED,
    EXIT_NOT_SETTLED,
    EXIT_OK,
    journal_flag,
    json_time,
    pasteable,
    plain,
    printable,
    time_text,
)
from telo.durable.messages import INBOX_TOKEN_PREFIX
from telo.durable.operator import unconfirmed_step
from telo.errors import Code
from telo.operations.project import JournalSource
from telo.runtime.resource import RunOutcome

SETTLED_BADLY = frozenset({"failed", "cancelled"})
NOT_SETTLED = frozenset({"parked", "running", "elsewhere", "scheduled"})
_SHOWN_RESULT = 300  # characters of a result shown on the outcome line (`telo result` has it whole)


def exit_code(outcomes: Mapping[str, RunOutcome], targets_code: int) -> int:
    """The worst of the runs' outcomes; the targets' own code when it is not 0 (a target failed, a signal)."""
    if targets_code != EXIT_OK:
        return targets_code
    statuses = {o.status for o in outcomes.values()}
    if statuses & SETTLED_BADLY:
        return EXIT_FAILED
    if statuses & NOT_SETTLED:
        return EXIT_NOT_SETTLED
    return EXIT_OK


def settled_answers(target_results: Mapping[str, Any], outcomes: Mapping[str, RunOutcome]) -> dict[str, Any]:
    """The targets' results as plain JSON, a durable start's answer carrying its run's final status."""
    out: dict[str, Any] = {}
    for name, value in target_results.items():
        answer = plain(value)
        run = answer.get("runId") if isinstance(answer, dict) else None
        outcome = outcomes.get(run) if isinstance(run, str) else None
        if outcome is not None:
            answer = {**answer, **_outcome_json(outcome)}
        out[name] = answer
    return out


def _outcome_json(outcome: RunOutcome) -> dict[str, Any]:
    out: dict[str, Any] = {"status": outcome.status}
    if outcome.has_result:
        out["result"] = plain(outcome.result)
    if outcome.error is not None:
        out["error"] = {k: plain(v) for k, v in outcome.error.items()}
    if outcome.parked is not None:
        out["parked"] = {k: json_time(v) if k == "at" and isinstance(v, int) else plain(v)
                         for k, v in outcome.parked.items()}
    if outcome.holder is not None:
        out["holder"] = outcome.holder
    return out


def describe(outcome: RunOutcome, manifest: str) -> str:
    """One line for a human: the run, its status, and what moves it on. The commands it names reach the
    manifest's journal as pasted: with ``--manifest M`` unless the environment or a project file leads there."""
    run = outcome.run
    head = f"run {run!r}:"
    m = shlex.quote(manifest)
    j = _journal_flag(manifest)
    if outcome.status == "completed":
        if not outcome.has_result:
            return f"{head} completed"
        text = json.dumps(plain(outcome.result), ensure_ascii=False)
        if len(text) > _SHOWN_RESULT:
            text = text[: _SHOWN_RESULT - 1] + f"… (telo result {shlex.quote(run)}{j})"
        return f"{head} completed; result: {text}"
    if outcome.status == "failed":
        error = outcome.error or {}
        return f"{head} failed: {error.get('code', '')}: {error.get('message', '')}"
    if outcome.status == "cancelled":
        return f"{head} cancelled"
    if outcome.status == "parked":
        return f"{head} {_parked(outcome, m, j)}"
    if outcome.status == "elsewhere":
        return (f"{head} running in another process ({outcome.holder or 'holder unknown'}), which holds its claim; "
                f"this process did not execute it (wait for it: telo result {shlex.quote(run)}{j} --wait 60s)")
    if outcome.status == "skipped":  # a start its queue's singleton (mode skip) did not admit (issue 16)
        return (f"{head} live already, holding its queue's singleton key; this start was skipped and admitted "
                f"nothing (wait for that run: telo result {shlex.quote(run)}{j} --wait 60s)")
    if outcome.status == "scheduled":  # a queued run this process stopped waiting for (issue 16)
        return (f"{head} still waiting in its queue for a slot; a worker starts it when the queue has room "
                f"(telo worker {m}; why it waits: telo status {shlex.quote(run)}{j})")
    error = outcome.error or {}
    why = f" ({error.get('code')}: {error.get('message')})" if error else ""
    return (f"{head} still running: this process stopped executing it{why}; it continues wherever it is "
            f"executed next (telo worker {m})")


def _journal_flag(manifest: str) -> str:
    flag = journal_flag(JournalSource(manifest=manifest, origin="--manifest"))
    return f" {flag}" if flag else ""


def _parked(outcome: RunOutcome, m: str, j: str) -> str:
    parked = outcome.parked or {}
    run = shlex.quote(outcome.run)
    token, at, reason = parked.get("token"), parked.get("at"), parked.get("reason")
    inbox = f"{INBOX_TOKEN_PREFIX}{outcome.run}:"
    if isinstance(token, str) and token.startswith(inbox):  # a Durable.Receive (telo.durable.messages)
        topic = token[len(inbox):]
        return (f"parked, waiting for a message on topic {topic!r} (send one: telo send {run} "
                f"{shlex.quote(topic)}{j} --payload JSON; then continue it: telo run again, or telo worker {m})")
    if token is not None:
        return (f"parked, waiting for a delivery to {token!r} (deliver it: telo deliver {shlex.quote(str(token))}"
                f"{j} --payload JSON; then continue it: telo run again, or telo worker {m})")
    if reason is not None:
        if "`telo resolve " in str(reason):  # the reason names the command already: given this journal's flag
            return f"parked: {pasteable(str(reason), j.strip())}"
        step = unconfirmed_step(str(parked.get("path", ""))) or str(parked.get("path", ""))
        return (f"parked: {reason} (decide: telo resolve {run} {shlex.quote(step)}"
                f"{j} --redrive|--skip-with JSON|--fail)")
    if isinstance(at, int):
        return f"parked until {time_text(at)} (a worker continues it then: telo worker {m})"
    return f"parked at {parked.get('path')!r} (telo status {run}{j})"


def report_problems(outcomes: Mapping[str, RunOutcome]) -> None:
    """On stderr, as errors: the runs that failed, then those an execution here stopped before they settled."""
    for o in outcomes.values():
        if o.status == "failed":
            error = o.error or {}
            click.echo(f"run {o.run!r} failed: {error.get('code', Code.INTERNAL)}: {error.get('message', '')}",
                       err=True)
    for o in outcomes.values():
        if o.status == "running" and o.error is not None:
            click.echo(f"run {o.run!r} stopped before it settled (it continues wherever it is executed next): "
                       f"{o.error.get('code', Code.INTERNAL)}: {o.error.get('message', '')}", err=True)


def report(outcomes: Mapping[str, RunOutcome], manifest: str) -> None:
    for outcome in outcomes.values():
        click.echo(printable(describe(outcome, manifest)))  # a run id or token is anyone's text


@contextlib.contextmanager
def stdout_to_stderr(active: bool) -> Iterator[None]:
    """While ``active``, whatever writes to file descriptor 1 — a step's ``print``, a sync function in a worker
    thread, a subprocess it starts — lands on stderr instead: ``--json`` owns stdout."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
