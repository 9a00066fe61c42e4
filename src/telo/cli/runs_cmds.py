"""Commands that address runs in a journal: ``status``, ``result``, ``deliver``, ``cancel``, ``resume``,
``resolve``, and ``worker``, which continues them. Each parses its arguments, calls :mod:`telo.operations`
and prints the answer; every read command takes ``--json`` (values in the plain encoding)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import click

from telo.cli.common import (
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_NOT_SETTLED,
    SOURCE_KEY,
    ManifestPath,
    duration_option_s,
    echo_hint,
    emit,
    grace_option,
    journal_compat_option,
    journal_option,
    json_option,
    json_time,
    manifest_option,
    open_store,
    pasteable,
    print_diagnostics,
    time_text,
)
from telo.cli.logs import LEVELS
from telo.cli.queues_cmds import manifest_limits, queue_json, queue_text
from telo.clock import SYSTEM_CLOCK
from telo.durable.slots import DEFAULT_CONCURRENCY
from telo.errors import Code
from telo.journal.model import NO_VALUE, RunRecord
from telo.manifest import Manifest
from telo.operations.runs import RunView


def unconfirmed_view(view: RunView) -> list[dict[str, Any]]:
    """The run's unconfirmed-effect resolutions, ``{step, resolution}`` each, settled or not."""
    return [{"step": u.step, "resolution": u.resolution()} for u in view.unconfirmed]


def status_view(view: RunView) -> dict[str, Any]:
    record = view.record
    out: dict[str, Any] = {"run": record.run, "status": record.status, "workflow": record.workflow}
    if record.due_at is not None:
        out["dueAt"] = json_time(record.due_at)
    if record.parked is not None:
        out["parked"] = record.parked.to_json()
        if record.parked.at is not None:
            out["parked"]["at"] = json_time(record.parked.at)
    if view.queue is not None:  # issue 16: its queue, key and — while it waits — what holds it (telo queues)
        out["queue"] = queue_json(view.queue)
    unconfirmed = unconfirmed_view(view)
    if unconfirmed:
        out["unconfirmedEffects"] = unconfirmed
    if record.claim is not None:
        out["claim"] = {"holder": record.claim.holder, "until": json_time(record.claim.until), "fence": record.fence}
    if record.error:
        out["error"] = dict(record.error)
    if record.corrupt is not None:
        out["corrupt"] = {"code": Code.DURABLE_JOURNAL_CORRUPT.value, "message": record.corrupt}
    if record.terminal:
        out.update(outcome_view(record))
    return out


def status_for_humans(view: dict[str, Any], record: RunRecord) -> dict[str, Any]:
    """The status record (``view``, of ``record``) as human output shows it: its times as RFC 3339 text
    (``--json`` keeps epoch ms, the shape ``Local.Status`` answers, docs/cli.md "Output")."""
    out = dict(view)
    if "dueAt" in out:
        out["dueAt"] = time_text(out["dueAt"])
    if "at" in out.get("parked", {}):
        out["parked"] = {**out["parked"], "at": time_text(out["parked"]["at"])}
    if isinstance(out.get("parked", {}).get("reason"), str):  # (a reason may name the command that moves it on)
        out["parked"] = {**out["parked"], "reason": pasteable(out["parked"]["reason"])}
    if "claim" in out:  # (as `telo runs show` says it: whether the lease still holds)
        from telo.journal.rules import claim_is_live

        claim = out["claim"]
        live = claim_is_live(record.claim, SYSTEM_CLOCK.now_ms())
        out["claim"] = (f"{claim['holder']} until {time_text(claim['until'])} "
                        f"({'live' if live else 'lapsed'}; fencing token {claim['fence']})")
    elif out.get("status") == "running":  # (made due by a send, a delivery, a resume: nothing runs it yet)
        out["next"] = "no process holds it: a `telo worker` of its manifest continues it, or `telo run` again"
    if "queue" in out:
        out["queue"] = queue_text(out["queue"])
    if "unconfirmedEffects" in out:
        out["unconfirmedEffects"] = [{**u, "resolution": resolution_for_humans(u["resolution"])}
                                     for u in out["unconfirmedEffects"]]
    return out


def resolution_for_humans(resolution: Any) -> Any:
    """An unconfirmed effect's recorded resolution with its ``at`` in the one human time form."""
    if isinstance(resolution, dict) and isinstance(resolution.get("at"), str):
        return {**resolution, "at": time_text(resolution["at"])}
    return resolution


def outcome_view(record: RunRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    result = record.decoded_result()
    if result is not NO_VALUE:
        out["result"] = result
    out["replayedSteps"] = record.replayed_steps or 0
    out["collapsedRegions"] = record.collapsed_regions or 0
    if record.collapse_reasons:
        out["collapseReasons"] = list(record.collapse_reasons)
    return out


@click.command("status")
@click.argument("run")
@journal_option
@manifest_option
@json_option
def status_command(run: str, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Show a run's record: status, where it is parked, who holds it, its outcome."""
    from telo.operations import runs

    with open_store(journal, manifest) as store:
        status = runs.status(store, run, queue_config=manifest_limits(store))
    view = status_view(status)
    emit(view if as_json else status_for_humans(view, status.record), as_json)


@click.command("result")
@click.argument("run")
@click.option("--wait", "wait", default=None, help="Wait up to this long for the run to settle (e.g. 30s).")
@journal_option
@manifest_option
@json_option
def result_command(run: str, wait: str | None, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Print a run's result; exit 1 if it failed or was cancelled, 4 if it has not settled."""
    from telo.operations import runs

    seconds = duration_option_s(wait, "--wait")
    with open_store(journal, manifest) as store:
        asyncio.run(runs.wait_settled(store, run, seconds))
        view = runs.status(store, run)
    shown = status_view(view)
    emit(shown if as_json else status_for_humans(shown, view.record), as_json)
    record = view.record
    if not record.terminal:
        sys.exit(EXIT_NOT_SETTLED)
    sys.exit(0 if record.status == "completed" else EXIT_FAILED)


@click.command("deliver")
@click.argument("token")
@click.option("--payload", default="null", help="The payload as JSON (default null).")
@journal_option
@manifest_option
@json_option
@journal_compat_option
def deliver_command(token: str, payload: str, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Deliver a payload to the run parked on TOKEN; a worker or a resubmission continues it."""
    from telo.operations import actions

    value = actions.payload_from_json(payload, "--payload", empty_is_null=False)
    with open_store(journal, manifest) as store:
        result = actions.deliver(store, token, value)
    emit(result.to_json(), as_json)
    if not result.delivered:
        if not as_json:
            echo_hint(f"no run is parked on {token!r} now: it was delivered to already, or nothing waits on it yet "
                      "(`telo runs list --status parked` lists what waits, and on which token)")
        sys.exit(EXIT_FAILED)


@click.command("cancel")
@click.argument("run")
@click.option("--reason", default="cancelled by operator")
@journal_option
@manifest_option
@json_option
def cancel_command(run: str, reason: str, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Cancel a run; a body executing right now stops at its next step."""
    from telo.operations import actions

    with open_store(journal, manifest) as store:
        out = actions.cancel(store, run, reason)
    emit({"run": run, "cancelled": out.cancelled, "status": out.status}, as_json)
    if not out.cancelled:
        sys.exit(EXIT_FAILED)


@click.command("resume")
@click.argument("run", required=False)
@click.option("--reason", default="resumed by operator")
@click.option("--force", is_flag=True, help="Continue a run held because its manifest changed (recorded).")
@click.option("--workflow", default=None, help="No RUN: every run of this workflow held by a manifest change.")
@click.option("--all", "every", is_flag=True, help="No RUN: every held run, of every workflow.")
@click.option("--dry-run", is_flag=True, help="With --workflow/--all: list the held runs and what changed; write "
              "nothing.")
@click.option("--safe", is_flag=True, help="With --workflow/--all: resume only the held runs the new manifest is safe "
              "for (docs/changing-workflows.md); needs the manifest (--manifest).")
@journal_option
@manifest_option
@json_option
@journal_compat_option
def resume_command(run: str | None, reason: str, force: bool, workflow: str | None, every: bool, dry_run: bool,
                   safe: bool, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Continue a parked run now (an operator override, recorded in the journal); exit 1 when it is not resumed
    (settled, not parked, or waiting for `telo resolve` or `telo deliver`: the reason and a hint say which).

    Without RUN, `--workflow W --force` (or `--all --force`) resumes every run held because its manifest
    changed, one line each with what changed; `--dry-run` only lists them."""
    from telo.cli.held_cmd import check_bulk_options, resume_held
    from telo.operations import actions

    check_bulk_options(run, workflow, every, dry_run, force, safe)
    if run is None:
        with open_store(journal, manifest) as store:
            source = click.get_current_context().meta.get(SOURCE_KEY)
            path = manifest or (source.manifest if source is not None else None)
            if safe and path is None:
                raise click.UsageError("--safe compares each held run with the new manifest: give --manifest")
            new = None if path is None else _load_manifest(path)
            sys.exit(resume_held(store, workflow, reason, dry_run, as_json, new, safe))
    with open_store(journal, manifest) as store:
        out = actions.resume(store, run, reason, SYSTEM_CLOCK.now_ms(), force=force)
    data = out.to_json()
    if "hint" in data:
        data["hint"] = pasteable(data["hint"])
    if not as_json:
        data.pop("hint", None)  # human output: the hint goes to stderr, like every hint
    emit(data, as_json)
    if not out.resumed:
        if out.hint and not as_json:
            echo_hint(out.hint)
        sys.exit(EXIT_FAILED)


@click.command("resolve")
@click.argument("run")
@click.argument("path")
@click.option("--redrive", "action", flag_value="redrive", help="Execute the effect again, with the same key.")
@click.option("--skip-with", "skip_with", metavar="JSON", help="Record this JSON as the effect's result.")
@click.option("--fail", "action", flag_value="fail", help="Fail the run at this step.")
@journal_option
@manifest_option
@json_option
@journal_compat_option
def resolve_command(run: str, path: str, action: str | None, skip_with: str | None, journal: str | None,
                    manifest: str | None, as_json: bool) -> None:
    """Answer an unconfirmed effect: a step whose outcome is unknown after a crash (see `telo status`)."""
    from telo.operations import actions
    from telo.values import from_plain

    if (action is None) == (skip_with is None):
        raise click.UsageError("give exactly one of --redrive, --skip-with JSON, --fail")
    value: Any = None
    if skip_with is not None:
        action = "skip"
        try:
            value = from_plain(json.loads(skip_with), {})
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--skip-with") from exc
    assert action is not None
    with open_store(journal, manifest) as store:
        out = dict(actions.resolve(store, run, path, action, value, SYSTEM_CLOCK.now_ms()))
    emit(out if as_json else {**out, "resolution": resolution_for_humans(out.get("resolution"))}, as_json)


@click.command("worker")
@click.argument("manifest", type=ManifestPath())
@click.option("--interval", default="1s", show_default=True, help="How often to sweep for due runs.")
@click.option("--until-idle", is_flag=True, help="Exit once no run is due or running (for scripts and tests).")
@click.option("--concurrency", type=click.IntRange(min=1), default=DEFAULT_CONCURRENCY, show_default=True,
              help="Runs this worker executes at once; it claims no more, leaving the rest to other workers.")
@click.option("--log-level", type=click.Choice(LEVELS), default="info", show_default=True,
              help="info: a line per run continued, parked or settled; warning: problems only.")
@click.option("--log-json", is_flag=True, help="One JSON object a line ({time, level, event, …}), for a log shipper.")
@grace_option
@journal_compat_option
def worker_command(manifest: str, interval: str, until_idle: bool, concurrency: int, log_level: str,
                   log_json: bool, grace: float) -> None:
    """Continue due runs of every workflow in MANIFEST (claims make several workers safe on one journal)."""
    from telo.cli import logs
    from telo.durable.shutdown import run_draining
    from telo.manifest import ManifestLoadError
    from telo.operations.worker import run_worker

    duration_option_s(interval, "--interval", positive=True)  # (checked before anything starts)
    logs.install(log_level, as_json=log_json)
    try:
        work = run_worker(manifest, interval=interval, until_idle=until_idle, concurrency=concurrency)
        sys.exit(asyncio.run(run_draining(work, grace_s=grace)))
    except ManifestLoadError as exc:
        print_diagnostics(exc.diagnostics)
        sys.exit(EXIT_ERROR)


COMMANDS = [status_command, result_command, deliver_command, cancel_command, resume_command, resolve_command,
            worker_command]


def _load_manifest(path: str) -> Manifest:
    """The manifest at ``path``, loaded as ``telo run`` would (its problems printed, exit 1)."""
    from telo.kinds.controllers import load_application
    from telo.manifest import ManifestLoadError

    try:
        return load_application(path).manifest
    except ManifestLoadError as exc:
        print_diagnostics(exc.diagnostics)
        click.echo(f"error: {exc.code}: {path} has {len(exc.diagnostics)} problem(s)", err=True)
        sys.exit(EXIT_ERROR)
