"""Travelling in a journal and scheduling runs: ``telo restore``, ``telo fork`` (a checkpoint by seq or step
path, :func:`telo.operations.runs.resolve_checkpoint`) and ``telo schedule``."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any

import click

from telo.cli.common import (
    EXIT_ERROR,
    EXIT_FAILED,
    ManifestPath,
    echo_hint,
    journal_compat_option,
    journal_option,
    json_option,
    json_time,
    key_values,
    manifest_option,
    open_store,
    option_invalid,
    out_json,
    print_diagnostics,
    time_text,
    worker_command_text,
)
from telo.clock import SYSTEM_CLOCK
from telo.errors import TeloError
from telo.operations import actions


@click.command("restore")
@click.argument("run")
@click.argument("checkpoint")
@click.option("--reason", default="restored by operator", show_default=True, help="Recorded with the restore.")
@journal_option
@manifest_option
@json_option
def restore_command(run: str, checkpoint: str, reason: str, journal: str | None, manifest: str | None,
                    as_json: bool) -> None:
    """Roll RUN back to CHECKPOINT (a seq or step path from `telo runs checkpoints`), recorded as a new epoch.

    The steps after the checkpoint execute again when the run is next continued (a worker, or `telo run`
    with the same run id); the ones before it replay. History is kept: the old epoch stays in the journal."""
    with open_store(journal, manifest) as store:
        out = actions.restore(store, run, checkpoint, reason=reason)
    view = {"run": run, "restored": True, "checkpoint": out.checkpoint, "epoch": out.epoch, "status": out.status}
    if as_json:
        out_json(view)
        return
    key_values(view)
    echo_hint(f"a worker (`{worker_command_text(manifest)}`) or `telo run` with the same run id continues it")


@click.command("fork")
@click.argument("run")
@click.argument("checkpoint")
@click.option("--run-id", "new_run", default=None, help="The new run's id (default <run>:fork:<8 hex>).")
@click.option("--keep-keys", is_flag=True,
              help="Execute the steps after the checkpoint under RUN's idempotency keys, not the new run's.")
@journal_option
@manifest_option
@json_option
def fork_command(run: str, checkpoint: str, new_run: str | None, keep_keys: bool, journal: str | None,
                 manifest: str | None, as_json: bool) -> None:
    """Copy RUN's state at CHECKPOINT into a new run; RUN itself is left untouched.

    The new run is `running` with the same workflow and inputs; a worker (`telo worker MANIFEST`) continues
    it from the checkpoint. The steps after the checkpoint execute again under the NEW run's idempotency keys
    (`<new run>/steps/...`), so an effect that is not idempotent across runs may happen twice. With
    --keep-keys they carry RUN's keys (`<RUN>/steps/...`; a fork of such a fork keeps the first run's), recorded
    in the fork's journal, so a system that deduplicates by key answers them from its record of RUN's effects."""
    with open_store(journal, manifest) as store:
        out = actions.fork(store, run, checkpoint, new_run, keep_keys=keep_keys)
    view = out.to_json()
    # Said on every fork, --json included (stderr): the one thing a fork does that the original's history
    # cannot warn about is which keys the re-executed effects carry.
    echo_hint(actions.fork_keys_note(out.run, out.source, out.keys))
    if as_json:
        out_json(view)
        return
    key_values(view)
    echo_hint(f"a worker (`{worker_command_text(manifest)}`) continues it from the checkpoint")


def due_time(after: str | None, at: str | None, now_ms: int) -> int:
    """``--after``/``--at`` as the Python API reads ``after=``/``at=`` (operations.starting.due_ms); giving both
    or neither is a usage error here (exit 2)."""
    from telo.operations.starting import due_ms

    if (after is None) == (at is None):
        raise click.UsageError("give exactly one of --after DURATION or --at TIMESTAMP")
    try:
        return due_ms(after, at, now_ms, names=("--after", "--at"))
    except TeloError as exc:
        raise option_invalid(exc) from None


async def admit_scheduled(manifest: str, workflow: str, inputs: tuple[Sequence[str], Sequence[str]],
                          run_id: str | None, due: int) -> dict[str, Any]:
    """Start ``manifest``'s application (creating its journal if need be: this command creates a run), admit
    the scheduled run through :func:`telo.operations.starting.schedule`, close it again. ``inputs``: the
    ``--input`` and ``--input-json`` pairs, typed by the workflow's ``inputType`` before anything starts."""
    from telo.kinds.controllers import load_application
    from telo.operations.command_inputs import command_inputs, workflow_typing
    from telo.operations.starting import schedule

    app = load_application(manifest)
    values = command_inputs(*inputs, workflow_typing(app, workflow))
    try:
        await app.start()
        out = await schedule(app, workflow, values, run_id, due)
    finally:
        await app.close()
    if not out.scheduled:
        return {"run": out.run, "scheduled": False, "status": out.status}
    return {"run": out.run, "scheduled": True, "workflow": out.workflow, "dueAt": json_time(out.due_at)}


@click.command("schedule")
@click.argument("manifest", type=ManifestPath())
@click.argument("workflow")
@click.option("--after", metavar="DURATION", help="Due this long from now (90s, 15m, 2h, 1d).")
@click.option("--at", metavar="TIMESTAMP", help="Due at this RFC 3339 time (or epoch ms).")
@click.option("--input", "inputs", multiple=True, metavar="KEY=VALUE",
              help="A workflow input: text, unless the workflow's inputType declares its type.")
@click.option("--input-json", "json_inputs", multiple=True, metavar="KEY=JSON", help="A workflow input given as JSON.")
@click.option("--run-id", "run_id", default=None, help="The run's id (default: the workflow's runId rule).")
@json_option
@journal_compat_option
def schedule_command(manifest: str, workflow: str, after: str | None, at: str | None, inputs: tuple[str, ...],
                     json_inputs: tuple[str, ...], run_id: str | None, as_json: bool) -> None:
    """Admit a scheduled run of WORKFLOW; a worker (`telo worker MANIFEST`) starts it when it is due."""
    from telo.manifest import ManifestLoadError

    due = due_time(after, at, SYSTEM_CLOCK.now_ms())
    try:
        view = asyncio.run(admit_scheduled(manifest, workflow, (inputs, json_inputs), run_id, due))
    except ManifestLoadError as exc:
        print_diagnostics(exc.diagnostics)
        click.echo(f"error: {exc.code}: {manifest} has {len(exc.diagnostics)} problem(s); nothing was "
                   "scheduled", err=True)
        sys.exit(EXIT_ERROR)
    if as_json:
        out_json(view)
    else:
        key_values({**view, "dueAt": time_text(view["dueAt"])} if "dueAt" in view else view)
    if not view["scheduled"]:
        if not as_json:
            click.echo(f"hint: run {view['run']!r} already exists; pass another --run-id", err=True)
        sys.exit(EXIT_FAILED)


COMMANDS = [restore_command, fork_command, schedule_command]
