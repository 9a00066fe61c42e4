"""What stops an execution rather than fails its body (telo.engine.suspend.ExecutionHalted; issue 12, case 6).

Raised by the journal, or by the run handle itself, these reach the body only as a halt no ``catch`` can see:
losing the run (taken over, a broken chain of deferred writes), a cancel, a shutdown, a journal write that
failed for a reason that may pass (a full disk, a lost connection) and an entry this runtime cannot read
(written by a newer codec, or damaged). None of them is the body's own deterministic failure, so none may
settle the run: it is left running for a later or newer executor (docs/guarantees.md "Faults that are not
the body's").
"""

from __future__ import annotations

from typing import Final

from telo.durable.shutdown import ERR_DURABLE_SHUTTING_DOWN
from telo.errors import ERR_DURABLE_ENTRY_UNDECODABLE, ERR_DURABLE_JOURNAL_CORRUPT, Code, DurableError, TeloError
from telo.journal.chain import ERR_DURABLE_CHAIN_BROKEN
from telo.journal.claims import ERR_DURABLE_CLAIM_LOST

RUN_CANCELLED: Final = Code.DURABLE_RUN_CANCELLED


class RunCancelled(DurableError):
    """The run was cancelled while its body executed; the body stops at its next journaling point."""

    default_code = RUN_CANCELLED


HALTING_CODES: Final = frozenset({
    ERR_DURABLE_CLAIM_LOST, ERR_DURABLE_CHAIN_BROKEN, RUN_CANCELLED, ERR_DURABLE_SHUTTING_DOWN,
    Code.JOURNAL_WRITE_FAILED, Code.JOURNAL_UNAVAILABLE, Code.JOURNAL_FAILED, Code.JOURNAL_CLOSED,
    ERR_DURABLE_ENTRY_UNDECODABLE, ERR_DURABLE_JOURNAL_CORRUPT,
})


def halts(exc: BaseException) -> bool:
    """Does ``exc`` stop the execution rather than fail the body (HALTING_CODES)? Never for an effect's own
    failure, whatever its code (marked by :func:`body_failure`): that is decided by who raised it, not how."""
    return isinstance(exc, TeloError) and exc.code in HALTING_CODES and not getattr(exc, _BODY_FAILURE, False)


_BODY_FAILURE: Final = "telo_body_failure"


def body_failure(exc: TeloError) -> TeloError:
    """Mark ``exc`` as an effect's own failure (its receipt's error, as raised or replayed): it fails the body,
    even when its code is one the journal uses for a halt (an effect whose own journal write failed)."""
    setattr(exc, _BODY_FAILURE, True)
    return exc
