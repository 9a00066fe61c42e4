"""A fork server for the random-kill tests: imports telo once, then forks one child per request that runs the
``telo`` command line exactly as the ``telo`` console script does (``telo.cli.main:main``).

Why: a fresh interpreter spends ~0.5 s importing telo and its libraries before it touches a journal, so a
test that must SIGKILL hundreds of processes at moments that matter would spend most of its time (and most
of its kills) in imports. A forked child starts where those imports end: it loads the manifest, opens the
journal and works, in its own process (own pid and start time, so its claims name it), and dies by SIGKILL
like any other. Nothing is opened before the fork — no store, no event loop, no thread — so a child shares
nothing with its siblings but imported code. Settings telo reads at import (``TELO_FAULT``,
``TELO_CLAIM_RENEW_MS``) are the server's: children cannot arm fault points.

Protocol, one JSON line per request on stdin, one reply line on stdout:

- ``{"op": "spawn", "argv": [...], "env": {...}, "out": path}`` → ``{"pid": n}`` (stdout and stderr go
  to ``out``; the child's environment is the server's updated with ``env``);
- ``{"op": "poll", "pid": n}`` → ``{"code": c}``, ``c`` null while it runs, else its wait status as
  :attr:`subprocess.Popen.returncode` reports it (``-9`` for SIGKILL);
- ``{"op": "kill", "pid": n}`` → ``{"killed": bool, "code": c}``: SIGKILL if it still runs, then reap;
- ``{"op": "signal", "pid": n, "sig": s}`` → ``{"sent": bool}``: send ``s`` (SIGSTOP, SIGCONT, SIGTERM) if it
  has not been reaped;
- ``{"op": "wait", "pid": n}`` → ``{"code": c}``.

A child is reaped only when the test asks (poll/kill/wait), so its pid cannot be reused while the test may
still signal it; until then a dead child is a zombie, which telo's claims already count as dead. The server
exits when its stdin closes, SIGKILLing children that still run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

# What a `telo run` / `telo worker` process imports before it does anything (the cost this server saves).
import jsonschema  # noqa: F401
import yaml  # noqa: F401

import telo.cli.main
import telo.cli.run_cmds
import telo.cli.runs_cmds
import telo.durable.waits
import telo.journal.file
import telo.journal.postgres
import telo.journal.sqlite
import telo.kinds.controllers
import telo.operations.worker
import telo.runtime.app  # noqa: F401
from telo.cli.main import main as entry_point  # the `telo` console script (pyproject: telo.cli.main:main)


def _status(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _child(argv: list[str], env: dict[str, str], out: str) -> None:
    code = 1
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.close(null)
        os.environ.update(env)
        sys.argv = ["telo", *argv]
        try:
            entry_point()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main() -> None:
    children: dict[int, int | None] = {}  # pid -> wait status once reaped

    def reply(data: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(data) + "\n")
        sys.stdout.flush()

    def reap(pid: int, block: bool) -> int | None:
        if children.get(pid) is None:
            done, status = os.waitpid(pid, 0 if block else os.WNOHANG)
            if done == 0:
                return None
            children[pid] = _status(status)
        return children[pid]

    try:
        for raw in sys.stdin:
            req = json.loads(raw)
            op = req["op"]
            if op == "spawn":
                sys.stdout.flush()
                pid = os.fork()
                if pid == 0:
                    _child(req["argv"], req["env"], req["out"])
                children[pid] = None
                reply({"pid": pid})
            elif op == "poll":
                reply({"code": reap(req["pid"], block=False)})
            elif op == "kill":
                pid = req["pid"]
                alive = reap(pid, block=False) is None
                if alive:
                    os.kill(pid, signal.SIGKILL)  # not reaped yet: the pid is still this child's
                reply({"killed": alive, "code": reap(pid, block=True)})
            elif op == "signal":
                pid = req["pid"]
                alive = reap(pid, block=False) is None
                if alive:
                    os.kill(pid, int(req["sig"]))
                reply({"sent": alive})
            elif op == "wait":
                reply({"code": reap(req["pid"], block=True)})
            else:
                reply({"error": f"unknown op {op!r}"})
    finally:
        for pid, status in children.items():
            if status is None:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
