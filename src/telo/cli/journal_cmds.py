"""``telo runs journal`` (a run's entries in log order, or as a tree of their paths) and ``telo runs
checkpoints`` (the states a run can be restored to or forked from); registered on the ``runs`` group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from telo import paths
from telo.cli.common import (
    NONE_SHOWN,
    console,
    journal_option,
    json_option,
    json_time,
    manifest_option,
    open_store,
    out_json,
    plain,
    printable,
    shown,
    table,
    time_text,
)
from telo.errors import TeloError
from telo.journal.eventlog import Event
from telo.journal.model import NO_VALUE, Entry
from telo.operations import runs

VALUE_WIDTH = 100  # a value longer than this is cut in human output (`--json` always has it whole)


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


def journal_rows(found: Sequence[Event], run: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    rows: list[dict[str, Any]] = []
    interrupt = None
    for ev in found:
        if ev.entry is None:
            interrupt = {"event": ev.kind.value, "path": ev.path}
            continue
        e = ev.entry
        # at: when the store wrote the entry (None for one written before entries had times: an upstream journal)
        row: dict[str, Any] = {"seq": ev.seq, "at": json_time(e.at), "path": ev.path, "epoch": ev.epoch}
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

    # printable() before escape(): a label is markup, and its text must neither style nor drive the terminal.
    root = Tree(f"run {escape(printable(run))}")
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
                node = parent.add(f"[{style}]{escape(printable(seg))}[/]" if style else escape(printable(seg)))
                nodes[prefix] = node
            if i == len(segments) - 1:
                target = f"  {target_text(row.get('target'))}" if row.get("target") else ""
                decision = f"  ({row['decision']})" if row.get("decision") else ""
                label = (f"{mark(row)} {escape(printable(seg + target + decision))} = "
                         f"{escape(printable(value_text(row)))}  #{row['seq']} {row['event']}")
                node.label = f"[dim]{label}[/]" if is_telo_record(row["path"]) or seg.startswith("@") else label
            parent = node
    return root


@click.command("journal")
@click.argument("run")
@click.option("--tree", is_flag=True, help="Show the entries as a tree of their paths (human output).")
@journal_option
@manifest_option
@json_option
def journal_command(run: str, tree: bool, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Every journal entry of a run, in log order: seq, when it was written, path, kind, decision, target,
    value, event kind."""
    with open_store(journal, manifest) as store:
        _, found = runs.events(store, run)
    rows, interrupt = journal_rows(found, run)
    if as_json:
        data: dict[str, Any] = {"run": run, "entries": rows}
        if interrupt is not None:
            data["interrupt"] = interrupt
        out_json(data)
        return
    if tree:
        console().print(render_tree(run, rows))
    else:
        table(["SEQ", "AT", "PATH", "KIND", "DECISION", "TARGET", "EVENT", "VALUE"],
              [[str(r["seq"]), time_text(r["at"]), r.get("storedPath", r["path"]), r["kind"],
                r.get("decision") or NONE_SHOWN,
                target_text(r.get("target")) or NONE_SHOWN, r["event"], value_text(r)] for r in rows])
    if interrupt is not None:
        click.echo(f"interrupt: parked at {printable(interrupt['path'])}")


@click.command("checkpoints")
@click.argument("run")
@journal_option
@manifest_option
@json_option
def checkpoints_command(run: str, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """The states a run can be restored to or forked from (pass a SEQ to `telo restore` / `telo fork`)."""
    with open_store(journal, manifest) as store:
        found = runs.checkpoints(store, run)
    if as_json:
        out_json({"run": run, "checkpoints": [{"seq": c.seq, "path": c.path, "epoch": c.epoch, "kind": c.kind}
                                              for c in found]})
        return
    table(["SEQ", "PATH", "EPOCH", "KIND"], [[str(c.seq), c.path, str(c.epoch), c.kind] for c in found])
