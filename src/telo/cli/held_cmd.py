"""``telo resume --workflow W --force [--all] [--dry-run]``: every run held because its manifest changed,
released in one command (issue 15). Each run gets one line — the run, its workflow, what changed, and what
was done — then a summary; ``--dry-run`` lists them and writes nothing (:mod:`telo.operations.held`).

``--safe`` (issue 17) compares each run with the new manifest (:mod:`telo.durable.safe_change`) and resumes only
the runs the change is safe for; each line then says safe, or why not."""

from __future__ import annotations

import shlex
from typing import Any

import click

from telo.cli.common import EXIT_FAILED, EXIT_OK, echo_hint, out_json, printable
from telo.clock import SYSTEM_CLOCK
from telo.errors import TeloError
from telo.journal.store import Store
from telo.manifest import Manifest


def check_bulk_options(run: str | None, workflow: str | None, every: bool, dry_run: bool, force: bool,
                       safe: bool = False) -> None:
    """One run by id, or every held run of a workflow (or of all): never both, and the bulk form needs
    ``--force`` (what it does is accept the new manifest) — or ``--safe``, which accepts it only for the runs
    it is safe for — unless it only looks (``--dry-run``)."""
    if run is not None:
        if workflow is not None or every or dry_run or safe:
            raise click.UsageError("--workflow, --all, --safe and --dry-run release held runs in bulk: give them "
                                   "without a RUN")
        return
    if (workflow is None) == (not every):
        raise click.UsageError("give a RUN, or --workflow W (or --all) with --force or --safe to resume held runs")
    if not force and not safe and not dry_run:
        raise click.UsageError("resuming held runs in bulk accepts their changed manifest: add --safe (the runs it "
                               "is safe for) or --force (all of them), or --dry-run to list them first")


def resume_held(store: Store, workflow: str | None, reason: str, dry_run: bool, as_json: bool,
                manifest: Manifest | None = None, safe_only: bool = False) -> int:
    """List (and unless ``dry_run`` force on) the held runs of ``workflow`` (None: every workflow) — with
    ``safe_only``, only those ``manifest`` is safe for; the exit code: 0 when there were held runs and every one
    was resumed (or listed), 1 when there were none or one was not resumed."""
    from telo.operations import held

    found = held.held_runs(store, workflow, manifest)
    rows: list[dict[str, Any]] = []
    resumed = 0
    for h in found:
        row = h.to_json()
        if safe_only and not dry_run and (h.safety is None or not h.safety.safe):
            row.update(resumed=False, reason="the change is not safe for it: " + "; ".join(
                h.safety.reasons if h.safety is not None else ["it could not be assessed"]))
        elif not dry_run:
            try:
                out = held.release(store, h.run, reason, SYSTEM_CLOCK.now_ms())
            except TeloError as exc:  # one run that cannot be released does not stop the others
                row.update(resumed=False, reason=f"{exc.code}: {exc.message}")
            else:
                row["resumed"] = out.resumed
                if not out.resumed:
                    row["reason"] = out.reason
            resumed += bool(row["resumed"])
        rows.append(row)
        if not as_json:
            safety = "" if h.safety is None else " — safe" if h.safety.safe else \
                " — not safe: " + "; ".join(h.safety.reasons)
            click.echo(printable(_line(h.run, h.workflow, h.describe() + safety, row, dry_run)))
    of = f"of workflow {workflow!r}" if workflow is not None else "of any workflow"
    if as_json:
        out_json({"workflow": workflow, "dryRun": dry_run, "held": len(found), "resumed": resumed, "runs": rows})
    elif dry_run:
        click.echo(f"dry run: {len(found)} held run(s) {of}; nothing was written")
        if found:
            which = f"--workflow {shlex.quote(workflow)}" if workflow is not None else "--all"
            echo_hint(f"release them against the new manifest: `telo resume {which} --force`")
    else:
        click.echo(f"{resumed} of {len(found)} held run(s) {of} resumed")
        if resumed:
            echo_hint("a worker (`telo worker MANIFEST`) or `telo run` with the same run ids continues them")
    if not found or (not dry_run and resumed < len(found)):
        return EXIT_FAILED
    return EXIT_OK


def _line(run: str, workflow: str | None, changes: str, row: dict[str, Any], dry_run: bool) -> str:
    if dry_run:
        done = "would resume"
    elif row.get("resumed"):
        done = "resumed"
    else:
        done = f"not resumed: {row.get('reason')}"
    return f"run {run!r} ({workflow or '?'}): {changes} — {done}"
