"""How the PostgreSQL journal's connections are opened and what each session is told (docs/design.md
"PostgreSQL connections").

**Connection options.** TCP keepalives, so a connection the network dropped silently is noticed and opened
again instead of waiting forever (the LISTEN connection above all).

**No transaction outlives its holder.** A write holds the run's row locks from its first statement to its
COMMIT, and a claim sweep passes over locked rows (``FOR UPDATE SKIP LOCKED``, :mod:`telo.journal.postgres_sql`).
So a process stopped between the two — SIGSTOP, a frozen VM, a laptop lid, a debugger — held its runs against
every other worker for as long as it stayed stopped, long after its lease lapsed: the takeover the lease
promises never came (measured: 8 of 40 runs of tests/faults/test_one_executor.py's paused-holder case under
load, the holder's writer ``idle in transaction`` after its entries' INSERT). PostgreSQL ends such a session
itself when it is told to: every telo session carries ``idle_in_transaction_session_timeout``, so the server
rolls back a transaction its client left idle, and its locks go with it. The paused process finds its
connection gone when it wakes; its next write is refused by fencing (:mod:`telo.journal.claims`), because the
run has changed hands.

- **telo's own transactions** (the writer's batches, sweeps, deliveries, renewals) send their statements back
  to back, milliseconds apart: :data:`IDLE_TRANSACTION_TIMEOUT_MS` (10 s) is far beyond any pause of a live
  process (a collection, a loaded machine's scheduling) and bounds how long past its lease a stopped holder's
  runs stay out of reach.
- **A joinable transaction** (a ``Sql.Transaction`` body on the journal's database, spec §8.2) runs the user's
  code between its statements, and the run's heartbeat keeps its claim for as long as that code runs. It gets
  the lease instead, if longer: :func:`joinable_timeout_ms`, set with ``SET LOCAL`` when it begins. A body idle
  inside its transaction for longer than that loses the transaction (the step fails with the server's error)
  — the same bound the lease puts on a stopped holder.

The settings are sent once per connection when it is opened (the pool's ``configure``, the writer's
connect), never per transaction: they cost no round trip on the write path (issue 14).
"""

from __future__ import annotations

from typing import Any, Final

import psycopg

CONNECT_OPTIONS: Final[dict[str, Any]] = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}

# How long telo's own transactions may sit idle before the server ends them (see the module docstring).
IDLE_TRANSACTION_TIMEOUT_MS: Final = 10_000


def configure(conn: psycopg.Connection[Any]) -> None:
    """Tell a new session of the journal to end transactions left idle (the pool's ``configure`` hook)."""
    conn.execute(f"SET idle_in_transaction_session_timeout = {int(IDLE_TRANSACTION_TIMEOUT_MS)}")


def joinable_timeout_ms(claim_ttl_ms: int) -> int:
    """The idle bound of a joinable transaction: its holder's lease, never less than telo's own."""
    return max(int(claim_ttl_ms), IDLE_TRANSACTION_TIMEOUT_MS)


def limit_joinable(conn: psycopg.Connection[Any], claim_ttl_ms: int) -> None:
    """Inside a joinable transaction's BEGIN: its own idle bound, for this transaction only."""
    conn.execute(f"SET LOCAL idle_in_transaction_session_timeout = {joinable_timeout_ms(claim_ttl_ms)}")
