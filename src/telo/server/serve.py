"""Serving the dashboard with uvicorn: checks the bind rule, opens the journal, binds, says where it listens."""

from __future__ import annotations

import errno
import socket
import sys
from contextlib import ExitStack
from typing import TextIO

from telo.errors import Code, TeloError
from telo.journal.redact import redact
from telo.operations.journals import open_journal
from telo.server.security import check_bind


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free port), IPv6 when the host is an IPv6 literal.
    A host that does not resolve, or a port in use or not allowed, is ``ERR_UI_BIND_FAILED``, not a traceback."""
    where = f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise TeloError(Code.UI_BIND_FAILED, f"cannot listen on {where}: the host {host!r} does not resolve "
                        f"({exc.strerror})", hint="pass --host 127.0.0.1, or a name or address of this machine",
                        data={"host": host, "port": port}) from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRNOTAVAIL:
            why, hint = "the host is not an address of this machine", "pass --host 127.0.0.1, or one of its addresses"
        else:
            why = "the port is in use" if exc.errno == errno.EADDRINUSE else str(exc.strerror)
            hint = "pick another --port (0: any free port), or stop what listens there"
        raise TeloError(Code.UI_BIND_FAILED, f"cannot listen on {where}: {why}", hint=hint,
                        data={"host": host, "port": port}) from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


def serve(journal: str, *, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
          manifest: str | None = None, out: TextIO = sys.stderr) -> None:
    """Serve the dashboard over ``journal`` until interrupted. Refuses a non-loopback host without a token
    (``ERR_UI_TOKEN_REQUIRED``) before opening anything, and a journal that does not exist
    (``ERR_JOURNAL_NOT_FOUND``: the dashboard reads and operates on runs, it never creates a journal).
    ``manifest``: the schedule pages show and operate its schedules (loaded before binding, so a manifest that
    does not load is refused at start; its only journal is ``journal``)."""
    import uvicorn

    from telo.server.app import create_app
    from telo.server.schedules import manifest_schedules

    check_bind(host, token)
    store = open_journal(journal)
    with ExitStack() as stack:
        try:
            application = stack.enter_context(manifest_schedules(manifest, store)) if manifest else None
            sock = bind(host, port)
        except BaseException:
            stack.close()  # the manifest's own journals first, then the store it may have borrowed
            store.close()
            raise
        label = redact(journal)  # a postgresql:// URL may hold a password: the line may end up in a log
        app = create_app(store, token=token, journal_label=label, close_store=True, application=application)
        # The socket is bound before uvicorn starts, so the line below names the real port (with --port 0 too)
        # and a script may read it to find the dashboard. It never includes the token.
        print(f"telo ui: serving {label}" + (f" and the schedules of {manifest}" if manifest else "")
              + f" at {url_of(sock)}" + (" (token required)" if token else ""), file=out, flush=True)
        # An open page holds a live-refresh stream (live.py): on shutdown, wait a moment for streams, not forever.
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                timeout_graceful_shutdown=2)
        uvicorn.Server(config).run(sockets=[sock])
