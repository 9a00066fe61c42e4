"""``telo runs list`` and ``telo runs show``: looking into a journal (issue 7). ``telo runs journal`` and
``telo runs checkpoints`` are in :mod:`telo.cli.journal_cmds`; restore, fork and schedule in
:mod:`telo.cli.travel_cmds`.

Every read command takes ``--json``; human output is a rich table when stdout is a terminal and plain
aligned columns otherwise (scripts and tests read the same words without box drawing or colour). Exit codes
are those of ``docs/cli.md``: an unknown run or checkpoint is "not found" (1), any other telo refusal is 3.
"""

from __future__ import annotations

from typing import Any

import click

from telo import paths
from telo.cli.common import (
    NONE_SHOWN,
    journal_option,
    json_option,
    json_time,
    key_values,
    manifest_option,
    open_store,
    out_json,
    pasteable,
    table,
    time_text,
)
from telo.cli.queues_cmds import manifest_limits, queue_json, queue_text
from telo.cli.runs_cmds import resolution_for_humans, unconfirmed_view
from telo.clock import SYSTEM_CLOCK
from telo.errors import Code, TeloError
from telo.journal.model import NO_VALUE, STATUSES, RunFilter, RunRecord
from telo.journal.store import Store
from telo.operations import runs as runs_ops


@click.group("runs")
def runs() -> None:
    """Look into a journal: list its runs, show one, read its journal, list its checkpoints."""


def parse_since(text: str, now_ms: int) -> int:
    """``--since``: a duration back from now (``90m``, ``2h``, ``1d``), an RFC 3339 timestamp, or epoch ms."""
    try:
        return runs_ops.since_ms(text, now_ms)  # as the Python API's runs(since=) reads it
    except TeloError:
        raise click.BadParameter(f"{text!r} is neither a duration (90m, 2h, 1d), an RFC 3339 timestamp nor "
                                 "epoch milliseconds", param_hint="--since") from None


def list_row(record: RunRecord) -> dict[str, Any]:
    row: dict[str, Any] = {"run": record.run, "status": record.status, "workflow": record.workflow,
                           "createdAt": json_time(record.created_at), "updatedAt": json_time(record.updated_at),
                           "dueAt": json_time(record.due_at)}
    if record.parked is not None:
        row["parked"] = {k: v for k, v in {"path": record.parked.path, "token": record.parked.token}.items()
                         if v is not None}
    if record.error:
        row["error"] = {"code": record.error.get("code"), "message": record.error.get("message")}
    if record.corrupt is not None:
        row["corrupt"] = {"code": Code.DURABLE_JOURNAL_CORRUPT.value, "message": record.corrupt}
    return {k: v for k, v in row.items() if v is not None}


def list_detail(record: RunRecord) -> str:
    if record.corrupt is not None:
        return f"{Code.DURABLE_JOURNAL_CORRUPT}: {record.corrupt}"
    if record.parked is not None:
        waiting = f" waiting for {record.parked.token}" if record.parked.token else ""
        return f"parked at {record.parked.path}{waiting}"
    if record.error:
        return str(record.error.get("code") or "")
    if record.due_at is not None:
        return f"due {time_text(record.due_at)}"
    return ""


@runs.command("list")
@click.option("--status", type=click.Choice(STATUSES), help="Only runs with this status.")
@click.option("--workflow", help="Only runs of this workflow.")
@click.option("--since", metavar="T", help="Only runs created since T: a duration back (2h), RFC 3339, or epoch ms.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Runs per page.")
@click.option("--after", metavar="CURSOR", help="The page after this cursor (the `next` of the previous page).")
@journal_option
@manifest_option
@json_option
def list_command(status: str | None, workflow: str | None, since: str | None, limit: int, after: str | None,
                 journal: str | None, manifest: str | None, as_json: bool) -> None:
    """List runs, newest first, a page at a time."""
    flt = RunFilter(status=status, workflow=workflow,
                    since=None if since is None else parse_since(since, SYSTEM_CLOCK.now_ms()),
                    limit=limit, after=after)
    with open_store(journal, manifest) as store:
        page = runs_ops.list_runs(store, flt)
    if as_json:
        out_json({"runs": [list_row(r) for r in page.runs], "next": page.next})
        return
    rows = [[r.run, r.status, r.workflow or NONE_SHOWN, time_text(r.created_at), time_text(r.updated_at),
             list_detail(r)] for r in page.runs]
    if rows:
        table(["RUN", "STATUS", "WORKFLOW", "CREATED", "UPDATED", "DETAIL"], rows)
    else:
        click.echo("no runs", err=True)
    if page.next is not None:
        # On stderr: the columns on stdout stay exactly one row per run for scripts.
        click.echo(f"more: --after {page.next}", err=True)


def holder_view(holder_text: str) -> dict[str, Any]:
    """Who holds a claim, and whether that process still exists (knowable on this host only)."""
    from telo.journal.claims import Holder

    holder = Holder.parse(holder_text)
    if holder is None:  # not a holder telo wrote (an upstream name): nothing can be observed
        return {"holder": holder_text, "alive": None}
    if not holder.is_local():
        return {"holder": holder_text, "host": holder.host, "pid": holder.pid, "alive": None}
    return {"holder": holder_text, "host": holder.host, "pid": holder.pid,
            "alive": not holder.is_dead_local_process()}


def show_view(store: Store, run: str) -> dict[str, Any]:
    """Everything an operator asks about one run (see docs/cli.md for each member)."""
    from telo.journal import rules

    status = runs_ops.status(store, run, queue_config=manifest_limits(store))
    record = status.record
    view: dict[str, Any] = {
        "run": record.run, "status": record.status, "workflow": record.workflow, "journal": store.kind,
        "epoch": status.epoch, "entries": status.entries,
        "createdAt": json_time(record.created_at), "updatedAt": json_time(record.updated_at),
        "dueAt": json_time(record.due_at),
    }
    if status.origin is not None:  # a fork: where from, and whose idempotency keys its steps carry if not its own
        view.update(forkedFrom=status.origin.source, forkCheckpoint=status.origin.checkpoint,
                    keepsKeysOf=status.origin.keys)
    inputs = record.decoded_inputs()
    if inputs is not NO_VALUE:
        view["inputs"] = inputs
    if record.parked is not None:
        p = record.parked
        view["parked"] = {k: v for k, v in {"path": p.path, "resource": p.resource, "token": p.token,
                                            "at": json_time(p.at), "reason": p.reason}.items() if v is not None}
    if record.claim is not None:
        claim = holder_view(record.claim.holder)
        claim["until"] = json_time(record.claim.until)
        claim["live"] = rules.claim_is_live(record.claim, SYSTEM_CLOCK.now_ms())
        claim["fence"] = record.fence
        view["claim"] = claim
    # issue 16: its queue and key; while it waits, what holds it (telo.operations.queues.why_waiting)
    view["queue"] = None if status.queue is None else queue_json(status.queue)
    unconfirmed = unconfirmed_view(status)
    if unconfirmed:
        view["unconfirmedEffects"] = unconfirmed
    if record.terminal:
        result = record.decoded_result()
        if result is not NO_VALUE:
            view["result"] = result
    if record.error:
        view["error"] = dict(record.error)
    if record.replayed_steps is not None:
        view["replayedSteps"] = record.replayed_steps
    if record.collapsed_regions is not None:
        view["collapsedRegions"] = record.collapsed_regions
        view["collapseReasons"] = list(record.collapse_reasons or ())
    view["digest"] = digest_view(record)
    return {k: v for k, v in view.items() if v is not None}


def digest_view(record: RunRecord) -> dict[str, Any]:
    """The manifest digest the run recorded, and the hold when it is parked because the manifest changed."""
    out: dict[str, Any] = {"manifestDigest": record.manifest_digest, "digestScope": record.digest_scope}
    parked = record.parked
    if record.status == "parked" and parked is not None:
        first = paths.parse(parked.path)[0]
        if first.name == paths.reserved("manifest"):
            out["hold"] = {"path": parked.path, "reason": parked.reason}
    return {k: v for k, v in out.items() if v is not None}


@runs.command("show")
@click.argument("run")
@journal_option
@manifest_option
@json_option
def show_command(run: str, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Show one run: record, park, claim holder (alive?), unconfirmed effects, collapse, digest, epoch."""
    with open_store(journal, manifest) as store:
        view = show_view(store, run)
    if as_json:
        out_json(view)
        return
    human = dict(view)
    # Times in the one human form (`--json` has them in the plain encoding): createdAt, updatedAt, dueAt,
    # the park's `at`, the claim's `until`, a resolution's recorded `at`.
    for key in ("createdAt", "updatedAt", "dueAt"):
        if key in human:
            human[key] = time_text(human[key])
    if "at" in human.get("parked", {}):
        human["parked"] = {**human["parked"], "at": time_text(human["parked"]["at"])}
    if isinstance(human.get("parked", {}).get("reason"), str):  # (its command, as pasted: telo status does too)
        human["parked"] = {**human["parked"], "reason": pasteable(human["parked"]["reason"])}
    if "queue" in human:
        human["queue"] = queue_text(human["queue"])
    if "unconfirmedEffects" in human:
        human["unconfirmedEffects"] = [{**u, "resolution": resolution_for_humans(u["resolution"])}
                                       for u in human["unconfirmedEffects"]]
    claim = human.pop("claim", None)
    if claim is not None:
        alive = {True: "alive", False: "dead", None: "unknown (another host)"}[claim.get("alive")]
        human["claim"] = (f"{claim['holder']} until {time_text(claim['until'])} "
                          f"({'live' if claim['live'] else 'lapsed'}; holder process {alive}; "
                          f"fencing token {claim['fence']})")
    digest = human.pop("digest", {})
    human["manifestDigest"] = digest.get("manifestDigest")
    human["digestScope"] = digest.get("digestScope")
    if "hold" in digest:
        human["digestHold"] = f"held at {digest['hold']['path']}: {digest['hold'].get('reason') or ''}".rstrip(": ")
    key_values(human)


COMMANDS = [runs]
