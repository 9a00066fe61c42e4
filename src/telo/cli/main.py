"""Entry point of the ``telo`` command: the command group, and the registration of every command module's
commands on it (command modules never import this module). Errors print as one line: the code, the message,
and a hint (:func:`telo.cli.common.report_error`)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

import telo.cli.journal_cmds as journal_cmds
import telo.cli.logs as logs
import telo.cli.message_cmds as message_cmds
import telo.cli.queues_cmds as queues_cmds
import telo.cli.run_cmds as run_cmds
import telo.cli.runs_cmds as runs_cmds
import telo.cli.runs_group as runs_group
import telo.cli.schedules_cmds as schedules_cmds
import telo.cli.travel_cmds as travel_cmds
import telo.cli.ui_cmd as ui_cmd
from telo import __version__
from telo.cli.common import report_error
from telo.errors import TeloError


class TeloGroup(click.Group):
    """Turns a TeloError escaping any command into one clear line and a documented exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TeloError as exc:
            ctx.exit(report_error(exc))


@click.group(cls=TeloGroup)
@click.version_option(__version__, prog_name="telo")
def cli() -> None:
    """Durable execution for Telo manifests: runs survive kill -9 and never repeat a finished step."""
    from telo.journal.compat import process_mode

    try:  # a bad TELO_JOURNAL_COMPAT is refused before any command runs, not at its first write
        process_mode()
    except TeloError as exc:
        raise click.UsageError(f"{exc.message} (it sets --journal-compat)") from None


@cli.group()
def frame() -> None:
    """Typed frames (spec §6): the canonical text a journal stores a value as."""


@frame.command("encode")
@click.argument("plain_json")
def frame_encode(plain_json: str) -> None:
    """Encode a plain JSON value (integers read as CEL int) as its canonical typed frame."""
    from telo.values import encode_frame, from_plain
    from telo.values.depth import load_json

    try:  # nested past the value domain's limit: ERR_TYPED_FRAME_UNENCODABLE, as encode_frame would say
        plain = load_json(plain_json, "the value")
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}") from exc
    click.echo(encode_frame(from_plain(plain, {})))


@frame.command("decode")
@click.argument("frame_text")
def frame_decode(frame_text: str) -> None:
    """Decode a typed frame strictly and print its plain JSON form (spec §6.4)."""
    from telo.values import decode_frame, to_plain

    click.echo(json.dumps(to_plain(decode_frame(frame_text)), ensure_ascii=False))


for module in (run_cmds, runs_cmds, runs_group, message_cmds, queues_cmds, schedules_cmds, travel_cmds, ui_cmd):
    for command in module.COMMANDS:
        cli.add_command(command)
runs_group.runs.add_command(journal_cmds.journal_command)
runs_group.runs.add_command(journal_cmds.checkpoints_command)


def main() -> None:
    from telo import observability

    logs.install()
    observability.trace_from_environment()  # TELO_OTEL (docs/observability.md)
    sys.exit(cli.main(standalone_mode=True))
