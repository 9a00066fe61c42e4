"""``telo queues list|show|set``: a manifest's ``Local.Queue`` resources — their limits (the manifest's, or as
``telo queues set`` overrides them in the journal), what holds their slots and what waits in them (the
journal's) — and how ``telo status`` says why a queued run waits (issue 16; docs/proposals/admission-control.md
"Visibility"). The counting is :mod:`telo.operations.queues`', the overriding
:mod:`telo.operations.queue_limits`'.

Every command takes ``--json``; human output is a table (rich on a terminal, plain columns otherwise). A queue the
manifest does not declare is ``ERR_QUEUE_NOT_FOUND`` (exit 1), its hint naming the queues it has; a limit ``set``
cannot take is ``ERR_INVALID_VALUE`` (exit 3), with a hint, and nothing is written.
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
    ManifestPath,
    json_option,
    json_time,
    key_values,
    out_json,
    print_diagnostics,
    table,
    time_text,
)
from telo.journal.store import Store
from telo.operations import queue_limits
from telo.operations import queues as queues_ops
from telo.operations.queues import ManifestQueue, QueueConfig, QueueState, override_json

manifest_argument = click.argument("manifest", type=ManifestPath())


@click.group("queues")
def queues() -> None:
    """A manifest's queues: their limits, what holds their slots, what waits in them; change their limits."""


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


_LIMIT_OPTION = "N|none"


@queues.command("set")
@manifest_argument
@click.argument("name")
@click.option("--concurrency", metavar=_LIMIT_OPTION, help="Runs of the queue executing at once, across every "
              "process on the journal (none: no limit).")
@click.option("--worker-concurrency", metavar=_LIMIT_OPTION, help="Runs of the queue executing at once in one "
              "process (none: no limit).")
@click.option("--key-limit", metavar=_LIMIT_OPTION, help="Runs executing at once per concurrencyKey value (the "
              "manifest must declare the key; none: no per-key limit).")
@click.option("--rate-limit", metavar="N/PERIOD|none", help="Starts per sliding window, e.g. 100/1m (none: no "
              "rate limit).")
@click.option("--reset", is_flag=True, help="Drop the override: the manifest's limits hold again.")
@click.option("--by", metavar="WHO", help="Who makes the change, recorded with it (default: user@host).")
@json_option
def set_command(manifest: str, name: str, concurrency: str | None, worker_concurrency: str | None,
                key_limit: str | None, rate_limit: str | None, reset: bool, by: str | None, as_json: bool) -> None:
    """Override limits of queue NAME of MANIFEST in its journal, without restarting its workers.

    Each process on the journal applies the change within about a second, at its next claim; a limit not named
    keeps its value (the manifest's, or an earlier override's). Lowering a limit stops no run: the queue starts
    no new one until it is under the new limit."""
    def given(value: str | None) -> str | queue_limits.Unset:
        return queue_limits.UNSET if value is None else value

    with loaded(manifest) as found:
        queue = queues_ops.find(found, name, manifest)
        change = queue_limits.set_limits(queue.store, queue.config, concurrency=given(concurrency),
                                         worker_concurrency=given(worker_concurrency), key_limit=given(key_limit),
                                         rate_limit=given(rate_limit), reset=reset, by=by)
    config = change.config
    data: dict[str, Any] = {"queue": name, "journal": config.journal, "limits": config.to_json(),
                            "manifestLimits": config.declared.to_json(),
                            "override": None if config.override is None else override_json(config.override,
                                                                                           json_time)}
    if change.reset:
        data["reset"] = True
        data["dropped"] = None if change.dropped is None else override_json(change.dropped, json_time)
    if as_json:
        out_json(data)
        return
    lines: dict[str, Any] = {"queue": name}
    if change.reset:
        lines["override"] = "dropped: the manifest's limits hold" if change.dropped is not None else \
            "none to drop: the manifest's limits hold"
    else:
        lines["override"] = override_text(config)
    lines["limits"] = limits_text(config)
    lines["workers"] = "each applies it at its next claim, within about a second (no restart)"
    key_values(lines)


_FIELDS = (("concurrency", "concurrency"), ("worker_concurrency", "workerConcurrency"), ("key_limit", "keyLimit"),
           ("rate_limit", "rateLimit"))


def limit_value(config: QueueConfig, field: str) -> str:
    """One limit of ``config`` as a value: ``3``, ``100/1m``, ``none``."""
    if field == "rate_limit":
        return "none" if config.rate_limit is None else f"{config.rate_limit}/{config.rate_period}"
    value = getattr(config, field)
    return "none" if value is None else str(value)


def override_text(config: QueueConfig) -> str:
    """``concurrency 3 (manifest: 1), rateLimit none (manifest: 100/1h); set by alice@host at …``."""
    override = config.override
    if override is None:
        return "none: the manifest's limits hold"
    changed = dict(override.overridden())
    parts = [f"{label} {limit_value(config, field)} (manifest: {limit_value(config.declared, field)})"
             for field, label in _FIELDS if field in changed]
    return f"{', '.join(parts)}; set by {override.set_by or NONE_SHOWN} at {time_text(override.set_at)}"


def summary(state: QueueState, data: dict[str, Any]) -> dict[str, Any]:
    """``telo queues show``'s lines: the limits in effect (an overridden one with the manifest's beside it),
    then what the journal holds."""
    out: dict[str, Any] = {"queue": state.name}
    config = state.config
    if config is not None:
        changed = {} if config.override is None else dict(config.override.overridden())

        def shown(field: str, text: str | int | None) -> str | int | None:
            if field not in changed:
                return text
            return f"{limit_value(config, field)} (override; manifest: {limit_value(config.declared, field)})"

        out["journal"] = config.journal
        out["concurrency"] = shown("concurrency", config.concurrency)
        out["workerConcurrency"] = shown("worker_concurrency", config.worker_concurrency)
        if config.key is not None:
            per_key = "no per-key limit" if config.key_limit is None else f"at most {config.key_limit} per key"
            was = f" (override; manifest: {limit_value(config.declared, 'key_limit')})" \
                if "key_limit" in changed else ""
            out["concurrencyKey"] = f"{config.key}, {per_key}{was}"
        out["holdSlotWhileParked"] = "true" if config.hold_parked else "false"
        if config.rate_limit is not None or "rate_limit" in changed:
            out["rateLimit"] = shown("rate_limit", f"{config.rate_limit} starts per {config.rate_period}")
        if config.override is not None:
            out["override"] = (f"set by {config.override.set_by or NONE_SHOWN} at {time_text(config.override.set_at)} "
                               "(telo queues set … --reset drops it)")
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
        parts.append(f"key {config.key} ≤ {config.key_limit}" if config.key_limit is not None
                     else f"key {config.key} (no limit)")
    if config.rate_limit is not None:
        parts.append(f"rate {config.rate_limit}/{config.rate_period}")
    if config.hold_parked:
        parts.append("holdSlotWhileParked")
    return (", ".join(parts) or "none") + (" (overridden)" if config.override is not None else "")


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
    named += [f"{what} key {queue[name]}" for name, what in (("dedupKey", "dedup"), ("debounceKey", "debounce"))
              if name in queue]  # (issue 16 step 4: a singleton's key reads as its dedup key)
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
