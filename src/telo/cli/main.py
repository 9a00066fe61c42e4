"""Entry point of the ``telo`` command: the command group, and the registration of every command module's
commands on it (command modules never import this module). Errors print as one line: the code, the message,
and a hint (:func:`telo.cli.common.report_error`)."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import click

import telo.cli.logs as logs
from telo import __version__
from telo.cli.common import report_error
from telo.errors import TeloError

# Each top-level command and the module defining it (its COMMANDS), imported when the command runs: importing
# them all cost every `telo` invocation ~0.45 s (the manifest loader, the kinds, the server), most of it for
# commands it does not run.
COMMAND_MODULES = {
    "run": "run_cmds", "check": "run_cmds", "test": "run_cmds",
    "status": "runs_cmds", "result": "runs_cmds", "deliver": "runs_cmds", "cancel": "runs_cmds",
    "resume": "runs_cmds", "resolve": "runs_cmds", "worker": "runs_cmds",
    "runs": "runs_group", "send": "message_cmds", "events": "message_cmds", "stream": "message_cmds",
    "queues": "queues_cmds", "schedules": "schedules_cmds",
    "restore": "travel_cmds", "fork": "travel_cmds", "schedule": "travel_cmds", "ui": "ui_cmd",
}


class TeloGroup(click.Group):
    """Turns a TeloError escaping any command into one clear line and a documented exit code; loads a command's
    module when the command is asked for (:data:`COMMAND_MODULES`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMAND_MODULES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        module_name = COMMAND_MODULES.get(cmd_name)
        if found is not None or module_name is None:
            return found
        module = importlib.import_module(f"telo.cli.{module_name}")
        for command in module.COMMANDS:
            self.add_command(command)
        if module_name == "runs_group":
            from telo.cli import journal_cmds

            module.runs.add_command(journal_cmds.journal_command)
            module.runs.add_command(journal_cmds.checkpoints_command)
        return super().get_command(ctx, cmd_name)

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



def main() -> None:
    from telo import observability

    logs.install()
    observability.trace_from_environment()  # TELO_OTEL (docs/observability.md)
    sys.exit(cli.main(standalone_mode=True))
