"""Claim holders: who executes a run, and whether that holder still exists (reference §6 "Claims").

A holder is written into the store as text ``<name>@<host>:<pid>:<start>`` where ``start`` is the process
start time in clock ticks (``/proc/<pid>/stat``). Recording the process instance, not only a name, lets a
restarted process take over the claim of its own dead predecessor at once instead of waiting out the TTL:
on the same host, a holder whose (pid, start) no longer names a live process cannot be executing anything.
Across hosts nothing can be observed, so a claim there lapses when its holder stops renewing it.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from functools import cache

from telo.clock import process_start_ticks

DEFAULT_TTL_MS = 60_000
# A running body renews its claim this often. TELO_CLAIM_RENEW_MS overrides it for the crash suite, which
# kills a process at the renewal boundary and cannot wait 20 s for it; nothing else sets it.
RENEW_EVERY_MS = int(os.environ.get("TELO_CLAIM_RENEW_MS") or 20_000)

_HOLDER = re.compile(r"(?P<name>.*)@(?P<host>[^@:]*):(?P<pid>[0-9]+):(?P<start>[0-9]+|-)")


@cache
def this_host() -> str:
    return socket.gethostname() or "localhost"


@dataclass(frozen=True, slots=True)
class Holder:
    name: str
    host: str
    pid: int
    start: int | None

    @classmethod
    def for_this_process(cls, name: str) -> Holder:
        pid = os.getpid()
        return cls(name.replace("@", "_"), this_host(), pid, process_start_ticks(pid))

    def to_text(self) -> str:
        return f"{self.name}@{self.host}:{self.pid}:{'-' if self.start is None else self.start}"

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        """The holder a stored claim names, or None for a holder text telo did not write (upstream names)."""
        m = _HOLDER.fullmatch(text)
        if not m:
            return None
        start = m.group("start")
        return cls(m.group("name"), m.group("host"), int(m.group("pid")), None if start == "-" else int(start))

    def is_local(self) -> bool:
        return self.host == this_host()

    def is_dead_local_process(self) -> bool:
        """True only when this holder certainly no longer runs: same host, and its process instance is gone."""
        if not self.is_local():
            return False
        if self.pid == os.getpid() and (self.start is None or self.start == process_start_ticks()):
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # exists, owned by someone else
        if self.start is None:
            return False
        current = process_start_ticks(self.pid)
        # A recycled pid names a different process instance; a zombie (reaped later) cannot run either.
        return current is None or current != self.start or _is_zombie(self.pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return True
    return raw[raw.rindex(b")") + 2 : raw.rindex(b")") + 3] in (b"Z", b"X")


def holder_is_dead(holder_text: str | None) -> bool:
    if not holder_text:
        return True
    holder = Holder.parse(holder_text)
    return holder is not None and holder.is_dead_local_process()
