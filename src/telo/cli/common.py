"""What every ``telo`` command module shares: exit codes, the journal/manifest/JSON options, opening the
journal a command names, and output (a value always leaves through the plain encoding,
:func:`telo.values.to_plain`, never ``str()``, so a timestamp, bytes or a uint read the same in a table and
in ``--json``). Command modules import this, never :mod:`telo.cli.main`, which registers them.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from telo.errors import Code, TeloError
from telo.journal.compat import ENV as COMPAT_ENV
from telo.journal.compat import MODES as COMPAT_MODES
from telo.journal.model import NO_VALUE
from telo.journal.store import Store

if TYPE_CHECKING:
    from telo.operations.project import JournalSource
    from telo.values import Timestamp

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and what it ran failed (a run failed, an assertion did not hold)
EXIT_USAGE = 2  # click's own exit code for bad arguments
EXIT_ERROR = 3  # telo refused: bad input, unreadable journal, a busy run ...
EXIT_NOT_SETTLED = 4  # `telo result`: the run has not settled (yet)
# "The thing is not there" answers exit 1 on every command, like a failed outcome (docs/cli.md); every other
# refusal (a busy run, a bad cursor, an unreadable journal) is telo refusing (exit 3).
NOT_THERE = frozenset({Code.DURABLE_RUN_NOT_FOUND, Code.CHECKPOINT_NOT_FOUND, Code.JOURNAL_NOT_FOUND,
                       Code.WORKFLOW_NOT_FOUND, Code.QUEUE_NOT_FOUND, Code.SCHEDULE_NOT_FOUND,
                       Code.DURABLE_EVENT_NOT_SET, Code.DURABLE_STREAM_NOT_FOUND})

NONE_SHOWN = "—"  # what a human table shows for "no value" (JSON omits the member instead)

# `telo run` and `telo worker`: how long a SIGTERM/SIGINT lets running effects finish (telo.durable.shutdown).
grace_option = click.option(
    "--grace", type=click.FloatRange(min=0), default=30.0, show_default=True, metavar="SECONDS",
    help="On SIGTERM/SIGINT: let running effects finish and record their receipts for this long, start nothing "
    "new, release claims, then exit 128+signal; a second signal stops at once.")


def _journal_compat(ctx: click.Context, param: click.Parameter, mode: str | None) -> None:
    """--journal-compat (or TELO_JOURNAL_COMPAT, which click reads and checks): the process's mode, in
    TELO_JOURNAL_COMPAT, where every journal this command opens — and every `telo test` child — reads it."""
    if mode is not None:
        os.environ[COMPAT_ENV] = mode


# Commands that write journals: how values are written (telo.journal.compat; docs/compat.md).
journal_compat_option = click.option(
    "--journal-compat", type=click.Choice(COMPAT_MODES), envvar=COMPAT_ENV, expose_value=False,
    is_eager=True, callback=_journal_compat,
    help="legacy: write plain JSON values with no codec version, for an upstream runtime that predates the codec, "
    "refusing what plain JSON cannot carry (docs/compat.md); default: TELO_JOURNAL_COMPAT, else typed.")
journal_option = click.option("--journal", "journal", metavar="PATH-or-URL",
                              help="A SQLite file, a file-journal directory, or a postgresql:// URL (it must exist); "
                              "default: TELO_JOURNAL, TELO_MANIFEST, or the nearest telo.toml / [tool.telo].")
class ManifestPath(click.Path):
    """A manifest file, as an argument or an option: one that is not there is ``ERR_MANIFEST_NOT_FOUND`` with a
    hint, a usage error (exit 2) — not click's bare "does not exist" line without the catalogue's code."""

    def __init__(self) -> None:
        super().__init__(exists=False, dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)  # (a directory is still click's "is a directory")
        if not os.path.exists(path):
            name = param.get_error_hint(ctx).strip("'") + ": " if param is not None and ctx is not None else ""
            raise OptionInvalid(Code.MANIFEST_NOT_FOUND, f"{name}there is no manifest at {os.fsdecode(path)!r}",
                                hint="check the path (a relative one is read from the current directory)",
                                data={"manifest": os.fsdecode(path)})
        return path


manifest_option = click.option("--manifest", "manifest", type=ManifestPath(),
                               help="Take the journal from this manifest.")
# Where open_store leaves the journal source of this invocation (click's meta is shared by the group's context
# and the command's), so that a hint printed later — an error's, at the top — can say how to reach it.
SOURCE_KEY = "telo.journal_source"
# A command a hint names, in backquotes, that addresses runs in a journal: the flag goes right after the verb,
# where it cannot be mistaken for (or split) the command's own arguments, whatever a run id looks like.
_ADDRESSING = frozenset({"status", "result", "deliver", "cancel", "resume", "resolve", "restore", "fork", "runs",
                         "send", "events", "stream"})
# (a group's subcommand takes the flag, not the group: `telo events list --journal J RUN`)
_HINTED_COMMAND = re.compile(r"`telo (?P<verb>(?:runs|events|stream) [a-z]+|[a-z]+)(?=[ `])")
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON (values in the plain encoding).")


class OptionInvalid(TeloError):
    """A command-line option's value the command cannot use (a malformed duration, say): reported like any error,
    with its code and hint, but it exits 2, as a malformed option does (docs/cli.md)."""


def option_invalid(exc: TeloError) -> OptionInvalid:
    return OptionInvalid(exc.code, exc.message, hint=exc.hint, data=exc.data)


def duration_option_s(value: str | None, name: str, *, positive: bool = False) -> float | None:
    """A duration option (``90s``, ``15m``, ``2h``, ``1d``) in seconds, None when not given; one that is malformed,
    negative — or zero, when ``positive`` — is :class:`OptionInvalid`."""
    from telo.kinds.addressing import duration_ms

    if value is None or value == "":
        return None
    try:
        ms = duration_ms(value, name)
    except TeloError as exc:
        raise option_invalid(exc) from None
    if ms < 0 or (positive and ms == 0):
        raise OptionInvalid(Code.INVALID_VALUE, f"{name}: {value!r} " + ("cannot be negative" if ms < 0 else
                                                                         "must be more than zero"),
                            hint="write e.g. 500ms, 30s, 2m")
    return ms / 1000


def report_error(exc: TeloError) -> int:
    """Print a TeloError as one line and its hint; the exit code it means (docs/cli.md "Errors and exit
    codes"). A message that starts with its own code (a park reason reused as a message, say) is printed with
    the code once."""
    message = exc.message.removeprefix(f"{exc.code}: ")
    click.echo(f"error: {exc.code}: {printable(message)}", err=True)
    if exc.hint:
        echo_hint(exc.hint)
    if exc.code == Code.INPUT_INVALID or isinstance(exc, OptionInvalid):
        return EXIT_USAGE  # inputs the command line gave that the workflow's inputType refuses, a bad option
    return EXIT_FAILED if exc.code in NOT_THERE else EXIT_ERROR


def open_store(journal: str | None, manifest: str | None) -> Store:
    """The journal a command that reads or operates on runs means — ``--journal``, ``--manifest``, else the
    environment or the nearest project file (:mod:`telo.operations.project`): one that does not exist is
    refused, never created (:mod:`telo.operations.journals`)."""
    from telo.operations.journals import REQUIRED_HINT, open_source
    from telo.operations.project import journal_source

    source = journal_source(journal, manifest)
    if source is None:  # a usage error (exit 2), with the catalogue's code
        raise OptionInvalid(Code.JOURNAL_REQUIRED, "this command reads a journal, and none is named",
                            hint=REQUIRED_HINT)
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[SOURCE_KEY] = source
    return open_source(source)


def journal_flag(source: JournalSource | None = None) -> str:
    """The options a printed command needs to reach this invocation's journal (``--journal J``), or "" when
    the environment or a project file would find it anyway (:func:`telo.operations.project.needed_flag`)."""
    from telo.operations.project import needed_flag

    if source is None:
        ctx = click.get_current_context(silent=True)
        source = ctx.meta.get(SOURCE_KEY) if ctx is not None else None
    return needed_flag(source)


def pasteable(text: str, flag: str | None = None) -> str:
    """``text`` with every backquoted ``telo`` command that addresses runs given ``flag`` (default
    :func:`journal_flag`), so that the command works as pasted in the same directory."""
    flag = journal_flag() if flag is None else flag
    if not flag:
        return text

    def add(match: re.Match[str]) -> str:
        verb = match.group("verb")
        return f"{match.group(0)} {flag}" if verb.split()[0] in _ADDRESSING else match.group(0)

    return _HINTED_COMMAND.sub(add, text)


def worker_command_text(manifest: str | None) -> str:
    """How a hint names the worker that continues a run: with the manifest this invocation was given, else a
    placeholder to fill in."""
    import shlex

    return f"telo worker {shlex.quote(manifest)}" if manifest else "telo worker MANIFEST"


def echo_hint(text: str) -> None:
    """A hint on stderr, its commands made to work as pasted."""
    click.echo(f"hint: {printable(pasteable(text))}", err=True)


def plain(value: Any) -> Any:
    from telo.values import to_plain

    return to_plain(value)


def printable(text: str) -> str:
    """``text`` as human output may show it: every character that is not printable — a newline, ESC and the
    rest of C0/C1, DEL, the line and paragraph separators, bidi overrides and other format characters — as
    its Python escape (``\\n``, ``\\x1b``, ``\\u202e``). Run ids, tokens, paths and messages are anyone's
    text: raw, a newline in one forges a row of a table and an escape sequence drives the terminal. Every
    table and line printer passes its text through here; a backslash is left as it is (a JSON cell escapes
    its own), and ``--json`` has the exact text."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def json_time(ms: int | None) -> str | None:
    """A record's time (epoch ms) as every ``--json`` output and the dashboard's API write it: the same RFC 3339
    text with three fractional digits as :func:`time_text` (one JSON vocabulary), None for no time."""
    return None if ms is None else time_text(ms)


def time_text(at: int | str | Timestamp | None) -> str:
    """A time as human output shows it: RFC 3339 in UTC with exactly three fractional digits
    (``2026-12-02T07:52:55.123Z``), one width for every time so that table columns align — never the
    epoch-ms number. Takes epoch ms (a record's times), a Timestamp, or RFC 3339 text (a recorded ``at``);
    ``—`` for no time."""
    from datetime import datetime, timedelta

    from telo.values import Timestamp
    from telo.values.types import parse_rfc3339

    if at is None:
        return NONE_SHOWN
    if isinstance(at, str):
        try:
            ms = parse_rfc3339(at).epoch_millis()
        except ValueError:
            return printable(at)  # not a time after all: shown as the text it is
    else:
        ms = at.epoch_millis() if isinstance(at, Timestamp) else at
    try:
        moment = datetime(1970, 1, 1) + timedelta(milliseconds=ms)
    except OverflowError:  # only a damaged record holds such a number
        return f"<not a time: {ms}>"
    return moment.isoformat(timespec="milliseconds") + "Z"


def shown(value: Any) -> str:
    """One cell of human output: text as it is, anything else as compact plain JSON, no value as '—'."""
    if value is None or value is NO_VALUE:
        return NONE_SHOWN
    p = plain(value)
    return p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)


def out_json(data: Any) -> None:
    click.echo(json.dumps(plain(data), ensure_ascii=False))


def emit(data: Mapping[str, Any], as_json: bool) -> None:
    """A record as JSON, or one right-aligned ``key: value`` line per member that has a value."""
    if as_json:
        out_json(data)
        return
    for key, value in data.items():
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(plain(value), ensure_ascii=False)
        click.echo(f"{key:>18}: {printable(text)}")


def is_terminal() -> bool:
    return sys.stdout.isatty()


def console() -> Any:
    from rich.console import Console

    # Off a terminal (only `--tree` draws with rich there) lines are never wrapped: a pipe has no width.
    return Console() if is_terminal() else Console(width=10_000, no_color=True, highlight=False)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str | None = None) -> None:
    """A rich table on a terminal; otherwise plain columns (two spaces apart, last column unpadded)."""
    rows = [[printable(c) for c in row] for row in rows]
    if is_terminal():
        from rich.table import Table
        from rich.text import Text

        t = Table(*headers, title=title, title_justify="left", highlight=False)
        for row in rows:
            t.add_row(*(Text(c) for c in row))  # Text, not markup: a `[red]` in a run id is shown, not applied
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
            click.echo(f"{key:>{width}}: {printable(shown(value))}")


def print_diagnostics(diagnostics: Sequence[Any]) -> None:
    for d in diagnostics:
        click.echo(str(d), err=True)
