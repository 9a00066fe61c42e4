"""``telo ui``: serve the operator dashboard over a journal (docs/dashboard.md; needs the ``ui`` extra)."""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from telo.cli.common import ManifestPath, journal_compat_option
from telo.errors import Code, TeloError


def _read_token_file(path: Path) -> str:
    """The token a file holds, without the newline an editor or ``echo`` leaves (never echoed in a message)."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {str(path)!r}: {exc}", param_hint="--token-file") from exc
    if not token:
        raise click.BadParameter(f"{str(path)!r} is empty", param_hint="--token-file")
    return token


def resolve_token(ctx: click.Context, token: str | None, token_file: Path | None) -> str | None:
    """The dashboard's token: ``--token-file`` or ``--token``, else ``TELO_UI_TOKEN``; None means no token.

    A flag beats the environment, being the more specific choice; both flags at once is a usage error (which
    one was meant?). ``--token`` is for trying things out: argv is visible to every user of the machine (``ps``)."""
    from_env = ctx.get_parameter_source("token") is ParameterSource.ENVIRONMENT
    if token_file is not None:
        if token and not from_env:
            raise click.UsageError("pass --token or --token-file, not both")
        return _read_token_file(token_file)
    return token or None


def dashboard_journal(journal: str | None) -> str:
    """The journal name the dashboard serves: ``--journal``, else ``TELO_JOURNAL`` or a project file's
    ``journal``. The dashboard opens journals by name, so a manifest (``TELO_MANIFEST``, a project file's
    ``manifest``) is refused rather than guessed at; one named implicitly that does not exist is refused here,
    saying what named it."""
    from telo.operations.journals import local_path, require_exists
    from telo.operations.project import ENV_JOURNAL, journal_source

    source = journal_source(journal, None)
    if source is None or source.journal is None:
        named = f"; {source.origin} names a manifest, not a journal" if source is not None else ""
        raise click.UsageError(f"name a journal with --journal PATH-or-URL, {ENV_JOURNAL}, or journal = "
                               f'"PATH" in a telo.toml{named}')
    if not source.by_flag:
        require_exists(source.journal, local_path(source.journal), source)
    return source.journal


@click.command("ui")
@click.option("--journal", "journal", default=None, metavar="PATH-or-URL",
              help="A SQLite file, a file-journal directory, or a postgresql:// URL (it must exist); default: "
              "TELO_JOURNAL, or `journal` in the nearest telo.toml / [tool.telo].")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback requires a token.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: any free port; the line printed at start names it).")
@click.option("--token", envvar="TELO_UI_TOKEN", default=None, metavar="TOKEN",
              help="Require this token on every request (Bearer header, or ?token= once). Prefer TELO_UI_TOKEN "
              "or --token-file: a command line is visible to other users.")
@click.option("--token-file", "token_file", default=None, metavar="PATH",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Read the token from this file (surrounding whitespace ignored); beats TELO_UI_TOKEN.")
@click.option("--manifest", "manifest", default=None, metavar="PATH",
              type=ManifestPath(),
              help="Show and operate this manifest's schedules on /schedules (its journal is the --journal served).")
@journal_compat_option
@click.pass_context
def ui_command(ctx: click.Context, journal: str | None, host: str, port: int, token: str | None,
               token_file: Path | None, manifest: str | None) -> None:
    """Serve a web dashboard: runs by status, each run's journal as a timeline, deliver/cancel/resume."""
    token = resolve_token(ctx, token, token_file)
    journal = dashboard_journal(journal)
    try:
        from telo.server.serve import serve
    except ImportError as exc:
        raise TeloError(Code.UI_UNAVAILABLE, f"the dashboard's packages are not installed ({exc.name})",
                        hint="pip install 'telo-python[ui]'") from exc
    serve(journal, host=host, port=port, token=token, manifest=manifest)


COMMANDS = [ui_command]
