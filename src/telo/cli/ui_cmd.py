"""``telo ui``: serve the operator dashboard over a journal (docs/dashboard.md; needs the ``ui`` extra)."""

from __future__ import annotations

import click

from telo.errors import Code, TeloError


@click.command("ui")
@click.option("--journal", "journal", required=True, metavar="PATH-or-URL",
              help="A SQLite file, a file-journal directory, or a postgresql:// URL (it must exist).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback requires --token.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: any free port; the line printed at start names it).")
@click.option("--token", envvar="TELO_UI_TOKEN", default=None, metavar="TOKEN",
              help="Require this token on every request (Bearer header, or ?token= once). Also TELO_UI_TOKEN.")
def ui_command(journal: str, host: str, port: int, token: str | None) -> None:
    """Serve a web dashboard: runs by status, each run's journal as a timeline, deliver/cancel/resume."""
    try:
        from telo.server.serve import serve
    except ImportError as exc:
        raise TeloError(Code.UI_UNAVAILABLE, f"the dashboard's packages are not installed ({exc.name})",
                        hint="pip install 'telo-python[ui]'") from exc
    serve(journal, host=host, port=port, token=token or None)


COMMANDS = [ui_command]
