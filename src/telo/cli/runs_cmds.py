"""Commands that address runs in a journal: ``status``, ``result``, ``deliver``, ``cancel``, ``resume``,
``worker`` (issue: the durable backend). Every read command takes ``--json`` (values in the plain encoding)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import click

from telo.cli.main import EXIT_ERROR, EXIT_FAILED, cli, grace_option
from telo.errors import Code, TeloError
from telo.journal.model import NO_VALUE, RunRecord


def open_journal(journal: str | None, manifest: str | None) -> Any:
    from telo.journal import open_store

    if journal:
        return open_store(journal)
    if manifest:
        from telo.runtime.app import Application

        app = Application.load(manifest)
        app.create_resources()
        from telo.durable.journals import Journal

        journals = [r for r in app.resources.values() if isinstance(r, Journal)]
        if len(journals) != 1:
            raise TeloError(Code.JOURNAL_AMBIGUOUS, f"{manifest} declares {len(journals)} journals",
                            hint="name the journal with --journal")
        return journals[0].open()
    raise click.UsageError("name a journal with --journal PATH-or-URL, or --manifest FILE")


journal_option = click.option("--journal", "journal", metavar="PATH-or-URL",
                              help="A SQLite file, a file-journal directory, or a postgresql:// URL.")
manifest_option = click.option("--manifest", "manifest", type=click.Path(exists=True, dir_okay=False),
                               help="Take the journal from this manifest.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON (values in the plain encoding).")


def emit(data: dict[str, Any], as_json: bool) -> None:
    from telo.values import to_plain

    if as_json:
        click.echo(json.dumps(to_plain(data), ensure_ascii=False))
        return
    for key, value in data.items():
        if value is None:
            continue
        shown = json.dumps(to_plain(value), ensure_ascii=False) if not isinstance(value, str) else value
        click.echo(f"{key:>18}: {shown}")


def unconfirmed_report(store: Any, run: str) -> list[dict[str, Any]]:
    """Every recorded resolution of an unconfirmed effect (``<step>/@unconfirmed[n]``), for `telo status`."""
    from telo import paths
    from telo.journal import eventlog

    out = []
    for path, entry in eventlog.recover(store, run).entries.items():
        last = paths.parse(path)[-1]
        if last.name == paths.UNCONFIRMED:
            out.append({"step": paths.parent(path), "resolution": entry.decode(run)})
    return out


def status_view(record: RunRecord, store: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"run": record.run, "status": record.status, "workflow": record.workflow}
    if record.due_at is not None:
        out["dueAt"] = record.due_at
    if record.parked is not None:
        out["parked"] = record.parked.to_json()
    unconfirmed = unconfirmed_report(store, record.run) if store is not None else []
    if unconfirmed:
        out["unconfirmedEffects"] = unconfirmed
    if record.claim is not None:
        out["claim"] = {"holder": record.claim.holder, "until": record.claim.until, "fence": record.fence}
    if record.error:
        out["error"] = dict(record.error)
    if record.corrupt is not None:
        out["corrupt"] = {"code": Code.DURABLE_JOURNAL_CORRUPT.value, "message": record.corrupt}
    if record.terminal:
        result = record.decoded_result()
        if result is not NO_VALUE:
            out["result"] = result
        out["replayedSteps"] = record.replayed_steps or 0
        out["collapsedRegions"] = record.collapsed_regions or 0
        if record.collapse_reasons:
            out["collapseReasons"] = list(record.collapse_reasons)
    return out


def _require(store: Any, run: str) -> RunRecord:
    record: RunRecord | None = store.read_run(run)
    if record is None:
        raise TeloError(Code.DURABLE_RUN_NOT_FOUND, f"no run {run!r} in this journal",
                        hint="list the journal's runs with `telo runs list`")
    return record


@cli.command("status")
@click.argument("run")
@journal_option
@manifest_option
@json_option
def status_command(run: str, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Show a run's record: status, where it is parked, who holds it, its outcome."""
    with open_journal(journal, manifest) as store:
        emit(status_view(_require(store, run), store), as_json)


@cli.command("result")
@click.argument("run")
@click.option("--wait", "wait", default=None, help="Wait up to this long for the run to settle (e.g. 30s).")
@journal_option
@manifest_option
@json_option
def result_command(run: str, wait: str | None, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Print a run's result; exit 1 if it failed or was cancelled, 4 if it has not settled."""
    from telo.durable.addressing import duration_ms

    deadline = time.monotonic() + (duration_ms(wait, "--wait") / 1000 if wait else 0)
    with open_journal(journal, manifest) as store:
        while True:
            record = _require(store, run)
            if record.terminal or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        emit(status_view(record, store), as_json)
    if not record.terminal:
        sys.exit(4)
    sys.exit(0 if record.status == "completed" else EXIT_FAILED)


@cli.command("deliver")
@click.argument("token")
@click.option("--payload", default="null", help="The payload as JSON (default null).")
@journal_option
@manifest_option
@json_option
def deliver_command(token: str, payload: str, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Deliver a payload to the run parked on TOKEN; a worker or a resubmission continues it."""
    from telo.durable.waits import deliver
    from telo.values import from_plain

    try:
        value = from_plain(json.loads(payload), {})
    except ValueError as exc:
        raise TeloError(Code.DURABLE_PAYLOAD_INVALID, f"--payload is not JSON: {exc}",
                        hint='pass JSON, e.g. --payload \'{"approvedBy":"ada"}\'') from exc
    with open_journal(journal, manifest) as store:
        result = deliver(store, token, value)
    emit(result, as_json)
    if not result["delivered"]:
        sys.exit(EXIT_FAILED)


@cli.command("cancel")
@click.argument("run")
@click.option("--reason", default="cancelled by operator")
@journal_option
@manifest_option
@json_option
def cancel_command(run: str, reason: str, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Cancel a run; a body executing right now stops at its next step."""
    from telo.journal.model import Outcome

    with open_journal(journal, manifest) as store:
        record = _require(store, run)
        if record.terminal:
            emit({"run": run, "cancelled": False, "status": record.status}, as_json)
            sys.exit(EXIT_FAILED)
        store.complete(run, Outcome.cancelled(reason))
        emit({"run": run, "cancelled": True, "status": "cancelled"}, as_json)


@cli.command("resume")
@click.argument("run")
@click.option("--reason", default="resumed by operator")
@click.option("--force", is_flag=True, help="Continue a run held because its manifest changed (recorded).")
@journal_option
@manifest_option
@json_option
def resume_command(run: str, reason: str, force: bool, journal: str | None, manifest: str | None,
                   as_json: bool) -> None:
    """Continue a parked run now (an operator override, recorded in the journal)."""
    from telo.durable.addressing import resume_run

    with open_journal(journal, manifest) as store:
        emit(dict(resume_run(store, run, reason, int(time.time() * 1000), force=force)), as_json)


@cli.command("resolve")
@click.argument("run")
@click.argument("path")
@click.option("--redrive", "action", flag_value="redrive", help="Execute the effect again, with the same key.")
@click.option("--skip-with", "skip_with", metavar="JSON", help="Record this JSON as the effect's result.")
@click.option("--fail", "action", flag_value="fail", help="Fail the run at this step.")
@journal_option
@manifest_option
@json_option
def resolve_command(run: str, path: str, action: str | None, skip_with: str | None, journal: str | None,
                    manifest: str | None, as_json: bool) -> None:
    """Answer an unconfirmed effect: a step whose outcome is unknown after a crash (see `telo status`)."""
    from telo.durable.addressing import resolve_unconfirmed
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
    with open_journal(journal, manifest) as store:
        emit(dict(resolve_unconfirmed(store, run, path, action, value, int(time.time() * 1000))), as_json)


@cli.command("worker")
@click.argument("manifest", type=click.Path(exists=True, dir_okay=False))
@click.option("--interval", default="1s", show_default=True, help="How often to sweep for due runs.")
@click.option("--until-idle", is_flag=True, help="Exit once no run is due or running (for scripts and tests).")
@grace_option
def worker_command(manifest: str, interval: str, until_idle: bool, grace: float) -> None:
    """Continue due runs of every workflow in MANIFEST (claims make several workers safe on one journal)."""
    from telo.durable.shutdown import run_draining
    from telo.durable.worker import run_worker
    from telo.manifest import ManifestLoadError

    try:
        sys.exit(asyncio.run(run_draining(run_worker(manifest, interval=interval, until_idle=until_idle),
                                          grace_s=grace)))
    except ManifestLoadError as exc:
        for d in exc.diagnostics:
            click.echo(str(d), err=True)
        sys.exit(EXIT_ERROR)
