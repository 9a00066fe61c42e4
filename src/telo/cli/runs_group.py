"""Looking into a journal and travelling in it (issue 7): ``telo runs list|show|journal|checkpoints``,
``telo restore``, ``telo fork`` and ``telo schedule``.

Every read command takes ``--json``; a value always leaves through the plain encoding
(:func:`telo.values.to_plain`), never ``str()``, so a timestamp, bytes or a uint read the same in the table
and in the JSON. Human output is a rich table when stdout is a terminal and plain aligned columns otherwise
(scripts and tests read the same words without box drawing or colour). Exit codes are those of
``docs/cli.md``: an unknown run or checkpoint is "not found" (1), any other telo refusal is 3.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import click

from telo import paths
from telo.cli.main import EXIT_ERROR, EXIT_FAILED, cli
from telo.cli.runs_cmds import journal_option, json_option, manifest_option, open_journal, unconfirmed_report
from telo.errors import Code, TeloError
from telo.journal.model import NO_VALUE, STATUSES, Entry, RunFilter, RunRecord

NONE_SHOWN = "—"  # what a human table shows for "no value" (JSON omits the member instead)
VALUE_WIDTH = 100  # a value longer than this is cut in human output (`--json` always has it whole)

# Looking up something that is not there is "not found" (exit 1), like a delivery nobody waited for; every
# other refusal (a busy run, a bad cursor, an unreadable journal) is telo refusing (exit 3).
NOT_FOUND_CODES = frozenset({Code.DURABLE_RUN_NOT_FOUND, Code.CHECKPOINT_NOT_FOUND, Code.JOURNAL_NOT_FOUND,
                             Code.WORKFLOW_NOT_FOUND})


# --- plumbing ---------------------------------------------------------------------------------------------


@contextmanager
def reported() -> Iterator[None]:
    """Turn a TeloError into the CLI's one-line error and hint, with this group's exit codes."""
    try:
        yield
    except TeloError as exc:
        click.echo(f"error: {exc.code}: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        sys.exit(EXIT_FAILED if exc.code in NOT_FOUND_CODES else EXIT_ERROR)


def open_store(journal: str | None, manifest: str | None) -> Any:
    """The journal named by ``--journal`` or ``--manifest``; a plain path that does not exist is refused
    rather than created, since a read command creating an empty journal at a mistyped path would answer
    "no runs" for the wrong reason."""
    if journal and "://" not in journal and journal != "memory:" and not os.path.exists(journal):
        raise TeloError(Code.JOURNAL_NOT_FOUND, f"there is no journal at {journal!r}",
                        hint="pass an existing SQLite file, file-journal directory or postgresql:// URL, "
                        "or --manifest FILE to use the manifest's journal")
    return open_journal(journal, manifest)


def require_run(store: Any, run: str) -> RunRecord:
    record: RunRecord | None = store.read_run(run)
    if record is None:
        raise TeloError(Code.DURABLE_RUN_NOT_FOUND, f"no run {run!r} in this journal",
                        hint="list the journal's runs with `telo runs list`", data={"run": run})
    return record


def plain(value: Any) -> Any:
    from telo.values import to_plain

    return to_plain(value)


def ms_time(ms: int | None) -> Any:
    """Epoch milliseconds as a timestamp value (plain-encoded as RFC 3339 text), None for no time."""
    from telo.values import Timestamp

    return None if ms is None else Timestamp.from_epoch_millis(ms)


def shown(value: Any) -> str:
    """One cell of human output: text as it is, anything else as compact plain JSON, no value as '—'."""
    if value is None or value is NO_VALUE:
        return NONE_SHOWN
    p = plain(value)
    return p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)


def out_json(data: Any) -> None:
    click.echo(json.dumps(plain(data), ensure_ascii=False))


def is_terminal() -> bool:
    return sys.stdout.isatty()


def console() -> Any:
    from rich.console import Console

    # Off a terminal (only `--tree` draws with rich there) lines are never wrapped: a pipe has no width.
    return Console() if is_terminal() else Console(width=10_000, no_color=True, highlight=False)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str | None = None) -> None:
    """A rich table on a terminal; otherwise plain columns (two spaces apart, last column unpadded)."""
    if is_terminal():
        from rich.table import Table

        t = Table(*headers, title=title, title_justify="left", highlight=False)
        for row in rows:
            t.add_row(*row)
        console().print(t)
        return
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    for row in [list(headers), *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths[:-1], strict=True)] + [row[-1]]
        click.echo("  ".join(cells).rstrip())


def key_values(data: Mapping[str, Any]) -> None:
    """Human form of a record: one ``key: value`` line per member that is present."""
    width = max((len(k) for k in data), default=0)
    for key, value in data.items():
        if value is not None:
            click.echo(f"{key:>{width}}: {shown(value)}")


# --- telo runs ---------------------------------------------------------------------------------------------


@cli.group("runs")
def runs() -> None:
    """Look into a journal: list its runs, show one, read its journal, list its checkpoints."""


def parse_since(text: str, now_ms: int) -> int:
    """``--since``: a duration back from now (``90m``, ``2h``, ``1d``), an RFC 3339 timestamp, or epoch ms."""
    from telo.durable.addressing import duration_ms
    from telo.values.types import parse_rfc3339

    if text.isdigit():
        return int(text)
    try:
        return parse_rfc3339(text).epoch_millis()
    except ValueError:
        pass
    try:
        return now_ms - duration_ms(text, "--since")
    except TeloError:
        raise click.BadParameter(f"{text!r} is neither a duration (90m, 2h, 1d), an RFC 3339 timestamp nor "
                                 "epoch milliseconds", param_hint="--since") from None


def list_row(record: RunRecord) -> dict[str, Any]:
    row: dict[str, Any] = {"run": record.run, "status": record.status, "workflow": record.workflow,
                           "createdAt": ms_time(record.created_at), "updatedAt": ms_time(record.updated_at),
                           "dueAt": ms_time(record.due_at)}
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
        return f"due {shown(ms_time(record.due_at))}"
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
                    since=None if since is None else parse_since(since, int(time.time() * 1000)),
                    limit=limit, after=after)
    with reported(), open_store(journal, manifest) as store:
        page = store.list_runs(flt)
    if as_json:
        out_json({"runs": [list_row(r) for r in page.runs], "next": page.next})
        return
    rows = [[r.run, r.status, r.workflow or NONE_SHOWN, shown(ms_time(r.created_at)),
             shown(ms_time(r.updated_at)), list_detail(r)] for r in page.runs]
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


def show_view(store: Any, run: str) -> dict[str, Any]:
    """Everything an operator asks about one run (see docs/cli.md for each member)."""
    from telo.journal import eventlog, rules

    require_run(store, run)
    state = eventlog.recover(store, run)
    record = state.record
    assert record is not None
    view: dict[str, Any] = {
        "run": record.run, "status": record.status, "workflow": record.workflow, "journal": store.kind,
        "epoch": state.epoch, "entries": len(state.entries),
        "createdAt": ms_time(record.created_at), "updatedAt": ms_time(record.updated_at),
        "dueAt": ms_time(record.due_at),
    }
    inputs = record.decoded_inputs()
    if inputs is not NO_VALUE:
        view["inputs"] = inputs
    if record.parked is not None:
        p = record.parked
        view["parked"] = {k: v for k, v in {"path": p.path, "resource": p.resource, "token": p.token,
                                            "at": ms_time(p.at), "reason": p.reason}.items() if v is not None}
    if record.claim is not None:
        claim = holder_view(record.claim.holder)
        claim["until"] = ms_time(record.claim.until)
        claim["live"] = rules.claim_is_live(record.claim, int(time.time() * 1000))
        claim["fence"] = record.fence
        view["claim"] = claim
    unconfirmed = unconfirmed_report(store, run)
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
    with reported(), open_store(journal, manifest) as store:
        view = show_view(store, run)
    if as_json:
        out_json(view)
        return
    human = dict(view)
    claim = human.pop("claim", None)
    if claim is not None:
        alive = {True: "alive", False: "dead", None: "unknown (another host)"}[claim.get("alive")]
        human["claim"] = (f"{claim['holder']} until {shown(claim['until'])} "
                          f"({'live' if claim['live'] else 'lapsed'}; holder process {alive}; "
                          f"fencing token {claim['fence']})")
    digest = human.pop("digest", {})
    human["manifestDigest"] = digest.get("manifestDigest")
    human["digestScope"] = digest.get("digestScope")
    if "hold" in digest:
        human["digestHold"] = f"held at {digest['hold']['path']}: {digest['hold'].get('reason') or ''}".rstrip(": ")
    key_values(human)


# --- telo runs journal --------------------------------------------------------------------------------------


def target_text(target: Mapping[str, str] | None) -> str:
    """``Kind name``; the declaring module (a file URL) is left to ``--json``, where it is whole."""
    return f"{target.get('kind', '?')} {target.get('name', '?')}" if target else ""


def entry_value(entry: Entry, run: str) -> dict[str, Any]:
    """``{"value": plain}``, ``{}`` for no value, or the raw frame and the error when it does not read."""
    try:
        value = entry.decode(run)
        return {} if value is NO_VALUE else {"value": plain(value)}
    except TeloError as exc:
        return {"valueFrame": entry.value, "valueError": {"code": exc.code, "message": exc.message}}


def value_text(v: Mapping[str, Any]) -> str:
    if "valueError" in v:
        return f"<unreadable: {v['valueError']['code']}>"
    text = shown(v["value"]) if "value" in v else NONE_SHOWN
    return text if len(text) <= VALUE_WIDTH else text[: VALUE_WIDTH - 1] + "…"


def is_telo_record(path: str) -> bool:
    """A record telo keeps for itself (a reserved ``@`` segment), as opposed to a step of the manifest."""
    try:
        return any(paths.is_reserved(s) for s in paths.parse(path))
    except TeloError:
        return False


def journal_rows(store: Any, run: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    from telo.journal import eventlog

    rows: list[dict[str, Any]] = []
    interrupt = None
    for ev in eventlog.events(store, run):
        if ev.entry is None:
            interrupt = {"event": ev.kind.value, "path": ev.path}
            continue
        e = ev.entry
        row: dict[str, Any] = {"seq": ev.seq, "path": ev.path, "epoch": ev.epoch}
        if e.path != ev.path:
            row["storedPath"] = e.path
        row["kind"] = e.kind
        if e.decision is not None:
            row["decision"] = e.decision
        if e.target is not None:
            row["target"] = dict(e.target)
        row.update(entry_value(e, run))
        row["event"] = ev.kind.value
        if ev.idempotency_key is not None:
            row["idempotencyKey"] = ev.idempotency_key
        rows.append(row)
    return rows, interrupt


MARK_STEP, MARK_DECISION, MARK_DELIVERY = "✓", "·", "✉"


def mark(row: Mapping[str, Any]) -> str:
    """The tree's mark of an entry (docs/cli.md): a step's recorded result, a delivered payload, a decision."""
    if row["kind"] == "decision":
        return MARK_DECISION
    return MARK_STEP if "target" in row else MARK_DELIVERY


def render_tree(run: str, rows: Sequence[Mapping[str, Any]]) -> Any:
    """The run's entries as a tree of their stored paths; a node holds its entry, if one is at that path."""
    from rich.markup import escape
    from rich.tree import Tree

    root = Tree(f"run {escape(run)}")
    nodes: dict[str, Tree] = {}
    for row in rows:
        stored = row.get("storedPath", row["path"])
        try:
            segments = [str(s) for s in paths.parse(stored)]
        except TeloError:
            segments = [stored]
        parent, prefix = root, ""
        for i, seg in enumerate(segments):
            prefix = f"{prefix}/{seg}" if prefix else seg
            node = nodes.get(prefix)
            if node is None:
                style = "dim" if seg.startswith("@") else ""
                node = parent.add(f"[{style}]{escape(seg)}[/]" if style else escape(seg))
                nodes[prefix] = node
            if i == len(segments) - 1:
                target = f"  {target_text(row.get('target'))}" if row.get("target") else ""
                decision = f"  ({row['decision']})" if row.get("decision") else ""
                label = (f"{mark(row)} {escape(seg)}{escape(target)}{escape(decision)} = {escape(value_text(row))}"
                         f"  #{row['seq']} {row['event']}")
                node.label = f"[dim]{label}[/]" if is_telo_record(row["path"]) or seg.startswith("@") else label
            parent = node
    return root


@runs.command("journal")
@click.argument("run")
@click.option("--tree", is_flag=True, help="Show the entries as a tree of their paths (human output).")
@journal_option
@manifest_option
@json_option
def journal_command(run: str, tree: bool, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Every journal entry of a run, in log order: seq, path, kind, decision, target, value, event kind."""
    with reported(), open_store(journal, manifest) as store:
        require_run(store, run)
        rows, interrupt = journal_rows(store, run)
    if as_json:
        data: dict[str, Any] = {"run": run, "entries": rows}
        if interrupt is not None:
            data["interrupt"] = interrupt
        out_json(data)
        return
    if tree:
        console().print(render_tree(run, rows))
    else:
        table(["SEQ", "PATH", "KIND", "DECISION", "TARGET", "EVENT", "VALUE"],
              [[str(r["seq"]), r.get("storedPath", r["path"]), r["kind"], r.get("decision") or NONE_SHOWN,
                target_text(r.get("target")) or NONE_SHOWN, r["event"], value_text(r)] for r in rows])
    if interrupt is not None:
        click.echo(f"interrupt: parked at {interrupt['path']}")


@runs.command("checkpoints")
@click.argument("run")
@journal_option
@manifest_option
@json_option
def checkpoints_command(run: str, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """The states a run can be restored to or forked from (pass a SEQ to `telo restore` / `telo fork`)."""
    from telo.journal import eventlog

    with reported(), open_store(journal, manifest) as store:
        found = eventlog.checkpoints(store, run)
    if as_json:
        out_json({"run": run, "checkpoints": [{"seq": c.seq, "path": c.path, "epoch": c.epoch, "kind": c.kind}
                                              for c in found]})
        return
    table(["SEQ", "PATH", "EPOCH", "KIND"], [[str(c.seq), c.path, str(c.epoch), c.kind] for c in found])


# --- time travel ---------------------------------------------------------------------------------------------


def resolve_checkpoint(store: Any, run: str, checkpoint: str) -> int:
    """A checkpoint by its seq, or by a step path (its newest checkpoint there, in any epoch)."""
    from telo.journal import eventlog

    if checkpoint.isdigit():
        return int(checkpoint)
    found = [c.seq for c in eventlog.checkpoints(store, run) if c.path == checkpoint]
    if not found:
        raise TeloError(Code.CHECKPOINT_NOT_FOUND, f"run {run!r} has no checkpoint at {checkpoint!r}",
                        hint=f"list the run's checkpoints with `telo runs checkpoints {run}` and pass one of their "
                        "seq numbers or paths", data={"run": run, "checkpoint": checkpoint})
    return max(found)


@cli.command("restore")
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
    from telo.journal import eventlog

    with reported(), open_store(journal, manifest) as store:
        seq = resolve_checkpoint(store, run, checkpoint)
        state = eventlog.restore(store, run, seq, reason=reason)
    status = state.record.status if state.record else "running"
    view = {"run": run, "restored": True, "checkpoint": seq, "epoch": state.epoch, "status": status}
    if as_json:
        out_json(view)
        return
    key_values(view)
    click.echo("hint: a worker (`telo worker MANIFEST`) or `telo run` with the same run id continues it", err=True)


@cli.command("fork")
@click.argument("run")
@click.argument("checkpoint")
@click.option("--run-id", "new_run", default=None, help="The new run's id (default <run>:fork:<short uuid>).")
@journal_option
@manifest_option
@json_option
def fork_command(run: str, checkpoint: str, new_run: str | None, journal: str | None, manifest: str | None,
                 as_json: bool) -> None:
    """Copy RUN's state at CHECKPOINT into a new run; RUN itself is left untouched.

    The new run is `running` with the same workflow and inputs; a worker (`telo worker MANIFEST`) continues
    it from the checkpoint."""
    import uuid

    from telo.journal import eventlog

    target = new_run or f"{run}:fork:{uuid.uuid4().hex[:8]}"
    with reported(), open_store(journal, manifest) as store:
        seq = resolve_checkpoint(store, run, checkpoint)
        state = eventlog.fork(store, run, seq, target)
    view = {"run": target, "forkedFrom": run, "checkpoint": seq,
            "status": state.record.status if state.record else "running"}
    if as_json:
        out_json(view)
        return
    key_values(view)
    click.echo("hint: a worker (`telo worker MANIFEST`) continues it from the checkpoint", err=True)


# --- scheduling ----------------------------------------------------------------------------------------------


def due_time(after: str | None, at: str | None, now_ms: int) -> int:
    from telo.durable.addressing import duration_ms, instant_ms

    if (after is None) == (at is None):
        raise click.UsageError("give exactly one of --after DURATION or --at TIMESTAMP")
    if after is not None:
        return now_ms + duration_ms(after, "--after")
    assert at is not None
    return instant_ms(int(at) if at.isdigit() else at, Code.DURABLE_SCHEDULE_INVALID, "--at")


async def admit_scheduled(manifest: str, workflow: str, inputs: Mapping[str, Any], run_id: str | None,
                          due: int) -> dict[str, Any]:
    """Admit a ``scheduled`` run of ``workflow`` in its manifest's journal, as ``Local.Schedule`` does, with the
    workflow's run-id rule and manifest digest; nothing executes here."""
    from telo.durable.workflow import Workflow
    from telo.journal.model import Admission
    from telo.runtime.app import Application

    app = Application.load(manifest)
    try:
        await app.start()
        wf = app.resources.get(workflow)
        if not isinstance(wf, Workflow):
            names = sorted(n for n, r in app.resources.items() if isinstance(r, Workflow))
            raise TeloError(Code.WORKFLOW_NOT_FOUND, f"{manifest} declares no durable workflow {workflow!r}",
                            hint=f"its workflows: {', '.join(names) or 'none'}")
        run = run_id or wf.run_id_for(dict(inputs))
        digest = wf.body.digest
        result = await asyncio.to_thread(wf.journal.store.admit, Admission.of(
            run, status="scheduled", due_at=due, inputs=dict(inputs), workflow=wf.name,
            manifest_digest=digest.value if digest else None, digest_scope=digest.scope if digest else None))
    finally:
        await app.close()
    if not result.admitted:
        return {"run": run, "scheduled": False, "status": result.record.status}
    return {"run": run, "scheduled": True, "workflow": wf.name, "dueAt": ms_time(due)}


@cli.command("schedule")
@click.argument("manifest", type=click.Path(exists=True, dir_okay=False))
@click.argument("workflow")
@click.option("--after", metavar="DURATION", help="Due this long from now (90s, 15m, 2h, 1d).")
@click.option("--at", metavar="TIMESTAMP", help="Due at this RFC 3339 time (or epoch ms).")
@click.option("--input", "inputs", multiple=True, metavar="KEY=VALUE", help="A workflow input (JSON or text).")
@click.option("--run-id", "run_id", default=None, help="The run's id (default: the workflow's runId rule).")
@json_option
def schedule_command(manifest: str, workflow: str, after: str | None, at: str | None, inputs: tuple[str, ...],
                     run_id: str | None, as_json: bool) -> None:
    """Admit a scheduled run of WORKFLOW; a worker (`telo worker MANIFEST`) starts it when it is due."""
    from telo.cli.run_cmds import parse_inputs
    from telo.manifest import ManifestLoadError

    values = parse_inputs(inputs)
    with reported():
        due = due_time(after, at, int(time.time() * 1000))
        try:
            view = asyncio.run(admit_scheduled(manifest, workflow, values, run_id, due))
        except ManifestLoadError as exc:
            for d in exc.diagnostics:
                click.echo(str(d), err=True)
            click.echo(f"error: {exc.code}: {manifest} has {len(exc.diagnostics)} problem(s); nothing was "
                       "scheduled", err=True)
            sys.exit(EXIT_ERROR)
    if as_json:
        out_json(view)
    else:
        key_values(view)
    if not view["scheduled"]:
        if not as_json:
            click.echo(f"hint: run {view['run']!r} already exists; pass another --run-id", err=True)
        sys.exit(EXIT_FAILED)
