"""Entry point of the ``telo`` command. Errors print as one line: the code, the message, and a hint."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from telo import __version__
from telo.errors import Code, TeloError

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and what it ran failed (a run failed, an assertion did not hold)
EXIT_USAGE = 2  # click's own exit code for bad arguments
EXIT_ERROR = 3  # telo refused: bad input, unreadable journal, a busy run ...
# "The thing is not there" answers exit 1 on every command, like a failed outcome (docs/cli.md).
NOT_THERE = frozenset({Code.DURABLE_RUN_NOT_FOUND, Code.CHECKPOINT_NOT_FOUND, Code.JOURNAL_NOT_FOUND})


# `telo run` and `telo worker`: how long a SIGTERM/SIGINT lets running effects finish (telo.durable.shutdown).
grace_option = click.option(
    "--grace", type=click.FloatRange(min=0), default=30.0, show_default=True, metavar="SECONDS",
    help="On SIGTERM/SIGINT: let running effects finish and record their receipts for this long, start nothing "
    "new, release claims, then exit 128+signal; a second signal stops at once.")


class TeloGroup(click.Group):
    """Turns a TeloError escaping any command into one clear line and a documented exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TeloError as exc:
            click.echo(f"error: {exc.code}: {exc.message}", err=True)
            if exc.hint:
                click.echo(f"hint: {exc.hint}", err=True)
            ctx.exit(EXIT_FAILED if exc.code in NOT_THERE else EXIT_ERROR)


@click.group(cls=TeloGroup)
@click.version_option(__version__, prog_name="telo")
def cli() -> None:
    """Durable execution for Telo manifests: runs survive kill -9 and never repeat a finished step."""


@cli.group()
def frame() -> None:
    """Typed frames (spec §6): the canonical text a journal stores a value as."""


@frame.command("encode")
@click.argument("plain_json")
def frame_encode(plain_json: str) -> None:
    """Encode a plain JSON value (integers read as CEL int) as its canonical typed frame."""
    from telo.values import encode_frame, from_plain

    try:
        plain = json.loads(plain_json)
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
    from telo.cli import logs, run_cmds, runs_cmds, runs_group, ui_cmd  # noqa: F401 - registers the commands on `cli`

    logs.install()
    sys.exit(cli.main(standalone_mode=True))
