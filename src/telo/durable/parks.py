"""One park record for the branches of a fan-out that park in one execution (spec §7.8; reference §3 "Fan-out
settlement").

A fan-out settles every branch before its suspension propagates, so several branches may park in one execution,
and the run record holds one park (§5.2). Each park an execution records is merged with the one it recorded
before, so the record keeps what wakes the run for any of its branches:

- the due time is the earliest of theirs: a branch's sleep or receive timeout never waits for a sibling's later
  one (the branches not due yet park again when the run re-executes);
- the path, resource and token are those of a park a delivery must find — a ``Durable.Await``'s: ``Local.Deliver``
  matches the record's token and writes at its path — else the latest park's. A receive's park needs neither: a
  send wakes the run by the receive's ``@waiting`` record (telo.durable.messages).

Two Awaits of one execution on different tokens still leave one token on the record, as upstream does: a delivery
to the other is refused until the run re-executes and parks on it (docs/guarantees.md). For the same reason a
branch parked at an unconfirmed effect beside an Await shows as the Await's park until that delivery comes; the
run then parks at the effect again, for ``telo resolve``.

A send (or a receive's own look) may unpark the run while a sibling branch still runs; that sibling's park writes
``parked`` back. The execution, once unwound, looks again (telo.durable.inbox.wake_after_sibling_parks).
"""

from __future__ import annotations

from dataclasses import replace

from telo.durable.messages import INBOX_TOKEN_PREFIX
from telo.journal.model import Parked


def _delivered_to(park: Parked) -> bool:
    return park.token is not None and not park.token.startswith(INBOX_TOKEN_PREFIX)


def merged(earlier: Parked | None, park: Parked) -> Parked:
    """The record of ``park`` after ``earlier`` (this execution's previous park, if any; module docstring)."""
    if earlier is None:
        return park
    base = earlier if _delivered_to(earlier) and not _delivered_to(park) else park
    due = [at for at in (earlier.at, park.at) if at is not None]
    return replace(base, at=min(due) if due else None)
