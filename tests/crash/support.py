"""Shared by the crash tests and their child processes: naming a store on a command line, and reaping children.

A child process cannot receive a store object, so a store is described by a :class:`StoreSpec` (kind plus
location) that travels as command-line arguments and is opened on each side with the store's own
constructor. Every spec opens with the store's default durability settings: those are what the crash tests
hold to their promise.
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from telo.journal.store import Store

REPO_ROOT = Path(__file__).resolve().parents[2]
KINDS = ("sqlite", "file", "postgres")


@dataclass(frozen=True, slots=True)
class StoreSpec:
    kind: str
    location: str  # SQLite file, file-journal directory, or PostgreSQL URL
    table: str | None = None  # PostgreSQL table prefix (each test its own)

    def open(self) -> Store:
        if self.kind == "sqlite":
            from telo.journal.sqlite import SqliteStore

            return SqliteStore(self.location)
        if self.kind == "file":
            from telo.journal.file import FileStore

            return FileStore(self.location)
        if self.kind == "postgres":
            from telo.journal.postgres import PostgresStore

            assert self.table is not None
            # A small pool: each child needs one connection, and many children come and go.
            return PostgresStore(self.location, table=self.table, pool_size=2)
        raise ValueError(f"unknown store kind {self.kind!r}")

    def argv(self) -> list[str]:
        out = ["--kind", self.kind, "--location", self.location]
        if self.table is not None:
            out += ["--table", self.table]
        return out

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--kind", required=True, choices=KINDS)
        parser.add_argument("--location", required=True)
        parser.add_argument("--table", default=None)

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> StoreSpec:
        return cls(ns.kind, ns.location, ns.table)


def make_spec(kind: str, tmp_path: Path) -> StoreSpec:
    """A fresh, empty store location of ``kind`` for one test (PostgreSQL: a table prefix nobody else uses)."""
    if kind == "sqlite":
        return StoreSpec(kind, str(tmp_path / "journal.db"))
    if kind == "file":
        directory = tmp_path / "journal"
        directory.mkdir()
        return StoreSpec(kind, str(directory))
    from tests.pg_support import fresh_prefix, pg_url

    return StoreSpec(kind, pg_url(), fresh_prefix())


class Child:
    """A child Python process whose stdout lines arrive on a queue (read by a thread, so reads never block
    the parent's timing), and whose stderr goes to a file kept for failure messages."""

    def __init__(self, module: str, args: list[str], stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self._stderr: IO[bytes] = open(stderr_path, "wb")  # noqa: SIM115 - closed in reap()
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self.lines.put(None)  # EOF: the child is gone (or closed stdout)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL (no cleanup in the child can run) and reap, so its pid is free and provably dead."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def reap(self, timeout: float = 10.0) -> list[str]:
        """Wait for stdout EOF (every line the child flushed before dying), close files, return the rest."""
        self.kill() if self.proc.poll() is None else self.proc.wait()
        self._reader.join(timeout)
        rest: list[str] = []
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                rest.append(line)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()
        return rest

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text("utf-8", "replace")[-4000:]
        except OSError:
            return ""
