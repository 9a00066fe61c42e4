"""Claim holders: who executes a run, and whether that holder still exists (reference §6 "Claims").

A holder is written into the store as text ``<name>@<host>:<pid>:<start>`` where ``start`` is the process
start time in clock ticks (``/proc/<pid>/stat``). Recording the process instance, not only a name, lets a
restarted process take over the claim of its own dead predecessor at once instead of waiting out the TTL:
on the same host, a holder whose (pid, start) no longer names a live process cannot be executing anything.
Across hosts nothing can be observed, so a claim there lapses when its holder stops renewing it.

**Fencing.** Every grant of a claim carries a fencing token (:class:`Fence`): an integer per run that grows at
every grant, kept by the store when the claim is released. An execution writes — entries, its park, its
completion, record updates — only through its fence, and a store applies such a write only while the run's
claim is still that fence's (same holder, same token), checked in the same transaction as the write. A
holder that was paused, or whose loop blocked, past its lease and whose run was taken over meanwhile thus
learns it at its next write, with :class:`ClaimLost`, and stops: it can never write over, or build on, what the
new holder did. A lapsed claim that nobody took is still the holder's: renewing it is safe, because the
token proves that no other execution was granted the run in between.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass, field
from functools import cache

from telo.clock import process_start_ticks
from telo.errors import Code, JournalError

ERR_DURABLE_CLAIM_LOST = Code.DURABLE_CLAIM_LOST

DEFAULT_TTL_MS = 60_000
# The shortest lease a journal may configure (``claimTtl``): renewals run every third of it, and a lease much
# shorter than a second would turn an ordinary scheduling hiccup (a GC pause, a loaded machine) into a takeover.
MIN_TTL_MS = 1_000
# TELO_CLAIM_RENEW_MS overrides the renewal period for the crash suite, which kills a process at the
# renewal boundary and cannot wait 20 s for it; nothing else sets it.
_RENEW_OVERRIDE_MS = int(os.environ.get("TELO_CLAIM_RENEW_MS") or 0)


def renew_every_ms(ttl_ms: int) -> int:
    """How often a claim of lease ``ttl_ms`` is renewed: a third of it (reference §6: 20 s for 60 s), so two
    renewals in a row may fail (a slow commit, a lost connection) before the lease lapses."""
    return _RENEW_OVERRIDE_MS or max(ttl_ms // 3, 1)


@dataclass(frozen=True, slots=True)
class Fence:
    """What an execution holds: its claim's holder text and the fencing token granted with it. ``granted`` is
    the claimant's ``time.monotonic()`` just before it asked for the claim (0: unknown), where its lease began
    at the latest (telo.durable.renewals)."""

    holder: str
    token: int
    granted: float = field(default=0.0, compare=False)


class ClaimLost(JournalError):
    """The run's claim is no longer this execution's (taken over, released, cancelled), or another execution
    recorded first at a path this one wrote: the write is refused and the execution stops."""

    default_code = ERR_DURABLE_CLAIM_LOST


def fence_refused(run: str, fence: Fence, what: str, holder: str | None, token: int | None) -> ClaimLost:
    """The error of a fenced write the store refused: the run's claim is not ``fence``'s any more."""
    now = "no claim" if holder is None else f"claim {holder!r} (token {token})"
    return ClaimLost(
        f"{what} of run {run!r} was refused: this execution's claim (token {fence.token}) is no longer the "
        f"run's, which now has {now}",
        hint="another execution took the run over (this one was paused or blocked past its lease), or an "
        "operator cancelled or released it; this execution stops, and the run continues from the journal in "
        "whichever execution holds its claim",
        data={"run": run, "token": fence.token, "holder": fence.holder, "currentHolder": holder,
              "currentToken": token},
    )

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
