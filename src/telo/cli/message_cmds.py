"""Messages into runs, events and streams out of them (issue 18; telo.durable.messages, telo.durable.streams):
``telo send``, ``telo events get|list`` and ``telo stream read``. Each parses its arguments, calls
:mod:`telo.operations.actions` and prints the answer."""

from __future__ import annotations

import asyncio
import shlex

import click

from telo.cli.common import (
    duration_option_s,
    emit,
    journal_compat_option,
    journal_option,
    json_option,
    json_time,
    manifest_option,
    open_store,
    out_json,
    shown,
)
from telo.errors import Code, TeloError


@click.command("send")
@click.argument("run")
@click.argument("topic")
@click.option("--payload", default="null", help="The message as JSON (default null).")
@click.option("--key", default=None, help="Its idempotency key: a second send with this key delivers nothing "
                                          "(default: a fresh one).")
@journal_option
@manifest_option
@json_option
@journal_compat_option
def send_command(run: str, topic: str, payload: str, key: str | None, journal: str | None, manifest: str | None,
                 as_json: bool) -> None:
    """Send a message to RUN on TOPIC, for its Durable.Receive steps; durable when this returns. A run parked on
    the topic is made due: a worker continues it."""
    from telo.operations import actions

    value = actions.payload_from_json(payload, "--payload", empty_is_null=False)
    with open_store(journal, manifest) as store:
        sent = actions.send(store, run, topic, value, key=key)
    emit(sent.to_json(), as_json)


@click.group("events")
def events_group() -> None:
    """Read the events a run published (Durable.Publish)."""


@events_group.command("get")
@click.argument("run")
@click.argument("name")
@click.option("--wait", "wait", default=None, help="Wait up to this long for the run to publish it (e.g. 30s).")
@journal_option
@manifest_option
@json_option
def events_get_command(run: str, name: str, wait: str | None, journal: str | None, manifest: str | None,
                       as_json: bool) -> None:
    """Print the latest value RUN published under NAME; exit 1 (ERR_DURABLE_EVENT_NOT_SET) if it has published
    none (by the end of --wait)."""
    from telo.operations import actions

    wait_ms = int((duration_option_s(wait, "--wait") or 0) * 1000)
    with open_store(journal, manifest) as store:
        found = asyncio.run(actions.wait_for_event(store, run, name, wait_ms))
        record = store.read_run(run) if found is None else None
    if found is None:
        settled = record is not None and record.terminal  # (a wait on a settled run ends at once: say why)
        raise TeloError(Code.DURABLE_EVENT_NOT_SET, f"run {run!r} has published no event {name!r}"
                        + (f" and has settled ({record.status}): it never will" if settled and record else
                           f" within {wait}" if wait else ""),
                        hint=("list what it published: " if settled else "wait for it with --wait 30s, or list "
                              "what it published: ") + f"`telo events list {shlex.quote(run)}`",
                        data={"run": run, "name": name})
    out = {**found.to_json(), "at": json_time(found.at)}
    emit(out, as_json)


@events_group.command("list")
@click.argument("run")
@click.option("--name", default=None, help="Only the events of this name.")
@journal_option
@manifest_option
@json_option
def events_list_command(run: str, name: str | None, journal: str | None, manifest: str | None,
                        as_json: bool) -> None:
    """Print every event RUN published (of --name), oldest first."""
    from telo.operations import actions

    with open_store(journal, manifest) as store:
        found = actions.events(store, run, name)
    if as_json:
        out_json([{**e.to_json(), "at": json_time(e.at)} for e in found])
        return
    if not found:  # (an empty list, not a failure: `telo events get` is the one that asks for a value)
        click.echo(f"run {run!r} has published no events" + (f" named {name!r}" if name else ""), err=True)
        return
    click.echo(f"{'SEQ':<5} {'AT':<25} {'NAME':<20} VALUE")  # (plain output: one header line, docs/cli.md)
    for e in found:
        click.echo(f"{e.seq:<5} {json_time(e.at) or '—':<25} {e.name:<20} {shown(e.value)}")


@click.group("stream")
def stream_group() -> None:
    """Read the streams a run writes (Durable.StreamWrite)."""


@stream_group.command("read")
@click.argument("run")
@click.argument("name")
@click.option("--from", "offset", type=click.IntRange(min=0), default=0, help="The first offset to read (default 0).")
@click.option("--follow", is_flag=True, help="Wait for more values until the stream is closed or the run settles.")
@click.option("--wait", "wait", default=None, help="With --follow: stop after this long with nothing new (e.g. 30s).")
@journal_option
@manifest_option
@json_option
def stream_read_command(run: str, name: str, offset: int, follow: bool, wait: str | None, journal: str | None,
                        manifest: str | None, as_json: bool) -> None:
    """Print RUN's stream NAME from --from on, a value a line (`OFFSET VALUE`, or one JSON object a line with
    --json); with --follow, block for more until it is closed or the run settles."""
    from telo.operations import actions

    def show(at: int, value: object) -> None:
        if as_json:
            out_json({"offset": at, "value": value})
        else:
            click.echo(f"{at:<6} {shown(value)}")

    with open_store(journal, manifest) as store:

        def written() -> int | None:
            """How many values the stream holds (None: none written yet); a settled run that never wrote it is
            exit 1, "not there" (never an empty stream). One read of the run's streams."""
            streams, settled = actions.list_streams(store, run)
            held = next((s.values for s in streams if s.stream == name), None)
            if held is None and settled:
                raise TeloError(Code.DURABLE_STREAM_NOT_FOUND, f"run {run!r} has settled and wrote no stream "
                                f"{name!r}", hint=f"list its streams: `telo stream list {shlex.quote(run)}`",
                                data={"run": run, "stream": name})
            return held

        if not follow:
            page = actions.read_stream(store, run, name, offset)
            # Nothing read of a stream that will not grow: is there one, and is --from past its end? (A silent
            # empty read looked like an empty stream.)
            held = written() if not page.values and (page.closed or page.settled) else None
            past = f"; --from {offset} is past its end (its values are at offsets 0..{held - 1})" \
                if held is not None and offset > held else ""
            for at, value in page.values:
                show(at, value)
            if not as_json:
                click.echo(f"-- next {page.next}" + (" (closed)" if page.closed else "")
                           + (" (run settled)" if page.settled else "") + past, err=True)
            return
        wait_s = duration_option_s(wait, "--wait")

        async def each() -> int:
            count = 0
            async for at, value in actions.follow_stream(store, run, name, offset, wait_s=wait_s):
                show(at, value)
                count += 1
            return count

        if asyncio.run(each()) == 0:  # (a follow that saw nothing: was there a stream to follow?)
            written()


@stream_group.command("list")
@click.argument("run")
@journal_option
@manifest_option
@json_option
def stream_list_command(run: str, journal: str | None, manifest: str | None, as_json: bool) -> None:
    """Print RUN's streams: name, values written, and whether it is closed."""
    from telo.operations import actions

    with open_store(journal, manifest) as store:
        found, settled = actions.list_streams(store, run)
    if as_json:
        out_json({"run": run, "streams": [s.to_json() for s in found], "settled": settled})
        return
    for s in found:
        click.echo(f"{s.stream:<24} {s.values:>8} values" + ("  (closed)" if s.closed else ""))
    if not found:
        click.echo(f"run {run!r} has written no streams")


COMMANDS = (send_command, events_group, stream_group)
