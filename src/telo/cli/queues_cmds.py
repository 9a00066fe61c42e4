"""``telo queues list|show``: a manifest's ``Local.Queue`` resources — their limits (the manifest's), what holds
their slots and what waits in them (the journal's) — and how ``telo status`` says why a queued run waits (issue
16; docs/proposals/admission-control.md "Visibility"). The counting is :mod:`telo.operations.queues`'.

Both commands take ``--json``; human output is a table (rich on a terminal, plain columns otherwise). A queue the
manifest does not declare is ``ERR_QUEUE_NOT_FOUND`` (exit 1), its hint naming the queues it has. ``telo queues
set`` (limits changed without a restart, the proposal's override table) is not built.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from telo.cli.common import (
    EXIT_ERROR,
    NONE_SHOWN,
    SOURCE_KEY,
    json_option,
    json_time,
    key_values,
    out_json,
    print_diagnostics,
    table,
    time_text,
)
from telo.journal.store import Store
from telo.operations import queues as queues_ops
from telo.operations.queues import ManifestQueue, QueueConfig, QueueState

manifest_argument = click.argument("manifest", type=click.Path(exists=True, dir_okay=False))


@click.group("queues")
def queues() -> None:
    """A manifest's queues: their limits, what holds their slots, what waits in them."""


@contextmanager
def loaded(manifest: str) -> Iterator[list[ManifestQueue]]:
    """The manifest's queues with their journals open; a manifest that does not load prints its problems."""
    from telo.manifest import ManifestLoadError

    try:
        with queues_ops.manifest_queues(manifest) as found:
            yield found
    except ManifestLoadError as exc:
        print_diagnostics(exc.diagnostics)
        click.echo(f"error: {exc.code}: {manifest} has {len(exc.diagnostics)} problem(s)", err=True)
        sys.exit(EXIT_ERROR)


@queues.command("list")
@manifest_argument
@json_option
def list_command(manifest: str, as_json: bool) -> None:
    """Every queue of MANIFEST: its limits, the runs holding its slots, waiting (due now, later) and parked."""
    with loaded(manifest) as found:
        states = [queues_ops.read(q.store, q.config.name, q.config) for q in found]
    if as_json:
        out_json({"queues": [s.to_json(json_time) for s in states]})
        return
    if not states:
        click.echo(f"{manifest} declares no Local.Queue", err=True)
        return
    rows = [[s.name, s.config.journal if s.config else NONE_SHOWN, holding_text(s), str(s.totals["waiting"]),
             str(s.totals["later"]), str(s.totals["parked"] + s.totals["parkedDue"]), str(len(s.keys)),
             limits_text(s.config) if s.config else NONE_SHOWN] for s in states]
    table(["QUEUE", "JOURNAL", "HOLDING", "WAITING", "LATER", "PARKED", "KEYS", "LIMITS"], rows)


@queues.command("show")
@manifest_argument
@click.argument("name")
@click.option("--oldest", type=click.IntRange(0, 1000), default=10, show_default=True,
              help="List this many of the runs waiting longest for a slot, with their position.")
@json_option
def show_command(manifest: str, name: str, oldest: int, as_json: bool) -> None:
    """One queue of MANIFEST: its limits, what holds its slots per key and per process, the oldest waiting runs."""
    with loaded(manifest) as found:
        queue = queues_ops.find(found, name, manifest)
        state = queues_ops.read(queue.store, name, queue.config, oldest=oldest)
    data = state.to_json(json_time)
    if as_json:
        out_json(data)
        return
    key_values(summary(state, data))
    if data["keys"]:
        click.echo()
        limit = state.config.key_limit if state.config else None
        table(["KEY", "HOLDING", "RUNNING", "WAITING", "LATER", "PARKED"],
              [[NONE_SHOWN if k["key"] is None else k["key"], of(k["holding"], limit), str(k["running"]),
                str(k["waiting"]), str(k["later"]), str(k["parked"])] for k in data["keys"]])
    if data.get("oldest"):
        click.echo()
        table(["POSITION", "RUN", "STATUS", "WORKFLOW", "KEY", "PRIORITY", "DUE"],
              [[str(o["position"]), o["run"], o["status"], o["workflow"] or NONE_SHOWN, o["key"] or NONE_SHOWN,
                str(o.get("priority", 0)), time_text(o["dueAt"])] for o in data["oldest"]])


def summary(state: QueueState, data: dict[str, Any]) -> dict[str, Any]:
    """``telo queues show``'s lines: the limits as declared, then what the journal holds."""
    out: dict[str, Any] = {"queue": state.name}
    config = state.config
    if config is not None:
        out["journal"] = config.journal
        out["concurrency"] = config.concurrency
        out["workerConcurrency"] = config.worker_concurrency
        if config.key is not None:
            out["concurrencyKey"] = f"{config.key}, at most {config.key_limit} per key"
        out["holdSlotWhileParked"] = "true" if config.hold_parked else "false"
        if config.rate_limit is not None:
            out["rateLimit"] = f"{config.rate_limit} starts per {config.rate_period}"
        out.update(config.more)
    t = state.totals
    parked = t["parked"] + t["parkedDue"]
    holds = "hold" if state.hold_parked else "do not hold"
    out["holding"] = f"{holding_text(state)} ({t['running']} running; {parked} parked, which {holds} a slot)"
    out["waiting"] = f"{t['waiting']} due now, {t['later']} due later"
    if t["unclaimed"]:
        out["unclaimed"] = f"{t['unclaimed']} running without a live claim (due again: first in line)"
    if "rate" in data:
        rate = data["rate"]
        frees = f"; full until {time_text(rate['freesAt'])}" if rate["freesAt"] else ""
        out["rate"] = f"{rate['started']} of {rate['limit']} started in the last {rate['period']}{frees}"
    if state.processes:
        out["processes"] = ", ".join(f"{p} runs {n}" for p, n in state.processes.items())
    return out


def of(n: int, limit: int | None) -> str:
    return str(n) if limit is None else f"{n}/{limit}"


def holding_text(state: QueueState) -> str:
    return of(state.holding(), state.config.concurrency if state.config else None)


def limits_text(config: QueueConfig) -> str:
    """The limits in one cell: ``concurrency 10, workerConcurrency 4, key inputs.tenant ≤ 2, rate 100/1m``."""
    parts = []
    if config.concurrency is not None:
        parts.append(f"concurrency {config.concurrency}")
    if config.worker_concurrency is not None:
        parts.append(f"workerConcurrency {config.worker_concurrency}")
    if config.key is not None:
        parts.append(f"key {config.key} ≤ {config.key_limit}")
    if config.rate_limit is not None:
        parts.append(f"rate {config.rate_limit}/{config.rate_period}")
    if config.hold_parked:
        parts.append("holdSlotWhileParked")
    return ", ".join(parts) or "none"


# --- telo status / telo runs show of a queued run ---------------------------------------------------------


def manifest_limits(store: Store) -> Callable[[str], QueueConfig | None] | None:
    """The limits of a queue by name when this invocation's journal came from a manifest (``--manifest``,
    ``TELO_MANIFEST``, a project file's ``manifest``), read from it only when a waiting run asks; None when a
    journal was named directly (the journal does not record limits)."""
    ctx = click.get_current_context(silent=True)
    source = ctx.meta.get(SOURCE_KEY) if ctx is not None else None
    if source is None or source.manifest is None:
        return None
    manifest: str = source.manifest

    def lookup(name: str) -> QueueConfig | None:
        with queues_ops.manifest_queues(manifest, store=store) as found:
            return next((q.config for q in found if q.config.name == name), None)

    return lookup


def queue_json(queue: dict[str, Any]) -> dict[str, Any]:
    """A run's queue view with its times in the JSON form (``heldBy``'s ``freesAt``)."""
    if "heldBy" not in queue:
        return queue
    return {**queue, "heldBy": [{**h, "freesAt": json_time(h["freesAt"])} if "freesAt" in h else h
                                for h in queue["heldBy"]]}


def held_text(held: dict[str, Any]) -> str:
    limit = held["limit"]
    if limit == "concurrency":
        return f"concurrency {held['holding']}/{held['max']}"
    if limit == "concurrencyKey":
        return f"key {held['key']} {held['holding']}/{held['max']}"
    if limit == "rateLimit":
        return f"rate {held['started']}/{held['period']}, frees at {time_text(held['freesAt'])}"
    if limit == "workerConcurrency":
        return (f"workerConcurrency {held['max']} (each of the {held['processes']} processes executing the "
                "queue's runs is at it)")
    return f"{held['ahead']} runs ahead of it, room for {held['room']}"


def queue_text(queue: dict[str, Any]) -> str:
    """A run's queue in one line: ``q (key acme)``, and while it waits why: ``waiting for a slot, position 2 of
    5: held by concurrency 3/3, key acme 2/2; 3 running (2 with its key), 0 parked``."""
    named = [f"key {queue['key']}"] if "key" in queue else []
    named += [f"priority {queue['priority']}"] if "priority" in queue else []
    text = str(queue["name"]) + (f" ({', '.join(named)})" if named else "")
    if "running" not in queue:
        return text
    with_key = f" ({queue['runningWithKey']} with its key)" if "runningWithKey" in queue else ""
    counts = f"{queue['running']} running{with_key}, {queue['parked']} parked"
    if "position" not in queue:
        return f"{text}; due later, then it waits for a slot; {counts}"
    text += f"; waiting for a slot, position {queue['position']} of {queue['waitingForSlot']}"
    if "heldBy" not in queue:
        return (f"{text}; {counts} (which limit holds it: name the manifest, --manifest, whose Local.Queue "
                "declares them)")
    held = queue["heldBy"]
    why = "held by " + ", ".join(held_text(h) for h in held) if held else \
        "no limit holds it: a worker's next sweep starts it"
    return f"{text}: {why}; {counts}"


COMMANDS = [queues]
