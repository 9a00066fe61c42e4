"""Deferred appends: the writes one execution of one run has handed to the group commit without waiting.

A durable run need not wait for every append's commit (ARCHITECTURE §3; docs/guarantees.md "Deferred
receipts"): the writer thread commits them in order, within a group commit or two, while the run goes on.
What must then never happen is a HOLE — a later write of the run committed after an earlier one failed —
because replay would read a journal the execution never wrote. So the deferred writes of one execution form a
chain: the first of them that fails, or that finds a different entry already stored at its path (another
executor won the race), breaks the chain, and every later write of the chain — an append, the park record,
the completion — is refused rather than committed. The execution learns it at its next barrier (a wait for
its pending writes) and stops; a new execution starts a new chain from what is durable.
"""

from __future__ import annotations

from telo.errors import Code, JournalError
from telo.journal.claims import ClaimLost, Fence
from telo.journal.model import Entry

ERR_DURABLE_CHAIN_BROKEN = Code.DURABLE_CHAIN_BROKEN


class ChainBroken(JournalError):
    """A write of an execution whose earlier deferred write failed or lost a race: refused, not committed."""

    default_code = ERR_DURABLE_CHAIN_BROKEN


class WriteChain:
    """The deferred writes of one execution (see the module docstring). ``broken`` is set once, by the
    writer thread, and read by it before each later write of the chain."""

    __slots__ = ("broken", "fence", "run")

    def __init__(self, run: str, fence: Fence | None = None) -> None:
        self.run = run
        self.fence = fence  # the execution's claim: every write of the chain is conditional on it
        self.broken: BaseException | None = None

    def break_with(self, exc: BaseException) -> None:
        if self.broken is None:
            self.broken = exc

    def check(self) -> None:
        """Raise if an earlier write of this chain failed: the write about to run must not commit."""
        if self.broken is not None:
            raise ChainBroken(
                f"a write of run {self.run!r} was refused: an earlier deferred write of the same execution "
                f"failed ({self.broken})",
                hint="the execution stops; resume the run (a worker, or resubmitting it) to continue from what "
                "the journal holds",
                data={"run": self.run},
            )


def stored_for(chain: WriteChain | None, run: str, written: Entry, stored: Entry) -> Entry:
    """What an append of ``written`` that found ``stored`` already at its path returns (first writer wins). A
    deferred one (``chain``) that found ANOTHER value there lost a race its execution built on: the chain
    breaks, so nothing this execution writes after it commits."""
    if chain is not None and not written.same_record(stored):
        chain.break_with(lost_race(run, written.path))
    return stored


def lost_race(run: str, path: str) -> ClaimLost:
    return ClaimLost(
        f"another execution of run {run!r} recorded a different value at {path!r} first; this execution built "
        "on its own value, so it stops and the journal's first writer stands",
        hint="two processes executed the run at once (a claim lapsed while its holder still ran); the run "
        "continues from the journal in whichever execution holds its claim",
        data={"run": run, "path": path},
    )
