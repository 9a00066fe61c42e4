"""One executor at a time, under the faults that are not ``kill -9`` (issue 12, cases 1 and 2).

Each test drives real ``telo`` processes over a payment workflow (``prepare``, idempotent, then ``charge``,
which must never run twice) on SQLite, the file journal and PostgreSQL, with a 1 s lease (``claimTtl``), and
judges from the ledger the effects write themselves (tests/faults/workflows/payments.py).

- **A holder paused past its lease.** Process A is SIGSTOPped inside ``prepare``; once its lease has lapsed,
  worker B takes the run over, re-drives ``prepare``, charges and completes the run. A is continued: before
  fencing it charged a second time (the intent B wrote held the same value, and first writer wins handed it
  back) and its completion overwrote B's record. Now A's first write after waking is refused
  (``ERR_DURABLE_CLAIM_LOST``) and A stops before its next effect, saying so on stderr.
- **A holder stopped inside a journal transaction** (PostgreSQL). A stopped between its writer's statements and
  their COMMIT held its run's row locks, which claim sweeps pass over (``SKIP LOCKED``): B found nothing to
  take over until A was continued — ``telo worker --until-idle`` waited for as long as A stayed stopped (the
  paused-holder case above failed this way under load, 8 runs in 40). Now the server ends a session idle in a
  transaction (telo/journal/postgres_session.py): A's batch is rolled back, B takes the run over once the
  lease lapsed, and A, continued, writes nothing more.
- **A holder whose event loop is blocked.** ``prepare`` is an ``async def`` that blocks its loop for three
  leases: the claim used to lapse while its holder was alive, and a second worker charged too. Renewals now run
  on their own thread: the claim never lapses, the second worker finds nothing to do, and A charges once.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.faults.conftest import KINDS
from tests.faults.support import Payments, Proc
from tests.pg_support import pg_url

LEASE_S = 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_a_holder_paused_past_its_lease_never_charges_again(kind: str, payments: Callable[..., Payments]) -> None:
    flow = payments(kind)
    run = "pay:paused"
    a = flow.run(run, label="a", env={"FAULT_PREPARE_MS": "1500"})
    flow.wait_for_line("prepare", a.pid)
    flow.pause(a)  # paused inside its idempotent step, holding the claim (between two journal writes)
    try:
        time.sleep(LEASE_S * 2.5)
        b = flow.worker(label="b")
        assert b.wait(60) == 0, b.output()
        taken = flow.record(run)
        assert taken.status == "completed", f"[{kind}] B did not complete the run: {taken!r}\n{b.output()}"
    finally:
        a.signal(signal.SIGCONT)
    a.wait(60)
    ctx = f"[{kind}]"
    charges = [line for line in flow.lines() if line.step == "charge"]
    assert [line.pid for line in charges] == [b.pid], f"{ctx} charge executed by {charges} (A={a.pid}, B={b.pid})"
    assert Counter(line.step for line in flow.lines() if line.pid == a.pid) == {"prepare": 1}, flow.lines()
    final = flow.record(run)
    assert final.status == "completed" and final.claim is None
    assert final.decoded_result()["steps"]["charge"]["result"]["by"] == b.pid, f"{ctx} A overwrote B's outcome"
    assert "ERR_DURABLE_CLAIM_LOST" in a.output(), f"{ctx} A did not say why it stopped:\n{a.output()}"


def test_a_holder_stopped_inside_a_journal_transaction_does_not_hold_its_run(payments: Callable[..., Payments]
                                                                           ) -> None:
    flow = payments("postgres")
    run = "pay:stopped-in-transaction"
    # Batch 1 admits the run, batch 2 claims it: A stops with its UPDATE sent (the row locked), COMMIT not.
    a = flow.run(run, label="a", env={"TELO_FAULT": "before-journal-commit@2:stop"})
    try:
        _wait_stopped(a)
        held = _idle_in_transaction(flow.spec.table or "")
        assert held, f"A stopped outside a transaction: the fault point moved?\n{a.output()}"
        b = flow.worker(label="b")
        assert b.wait(45) == 0, b.output()
        taken = flow.record(run)
        assert taken.status == "completed", f"B did not complete the run: {taken!r}\n{b.output()}"
        assert not _idle_in_transaction(flow.spec.table or ""), "A's transaction is still open"
    finally:
        a.signal(signal.SIGCONT)
    a.wait(60)
    charges = [line for line in flow.lines() if line.step == "charge"]
    assert [line.pid for line in charges] == [b.pid], f"charge executed by {charges} (A={a.pid}, B={b.pid})"
    assert not [line for line in flow.lines() if line.pid == a.pid and line.step != "prepare"], flow.lines()
    final = flow.record(run)
    assert final.status == "completed" and final.claim is None
    assert final.decoded_result()["steps"]["charge"]["result"]["by"] == b.pid, "A overwrote B's outcome"
    assert "Traceback" not in a.output(), a.output()


def _wait_stopped(proc: Proc, timeout: float = 30.0) -> None:
    """Until ``proc`` stopped itself (state ``T`` in /proc), or fail with its output."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.popen.poll() is None, f"{proc.label} exited {proc.popen.returncode}:\n{proc.output()}"
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "T":
            return
        time.sleep(0.02)
    raise AssertionError(f"{proc.label} never reached its fault point:\n{proc.output()}")


def _idle_in_transaction(table: str) -> list[str]:
    """The queries of sessions idle inside a transaction that wrote this flow's tables."""
    with psycopg.connect(pg_url(), autocommit=True) as conn:
        rows = conn.execute("SELECT query FROM pg_stat_activity WHERE state = 'idle in transaction' "
                            "AND position(%s in query) > 0", (table,)).fetchall()
    return [str(query) for (query,) in rows]


@pytest.mark.parametrize("kind", KINDS)
def test_a_holder_blocking_its_event_loop_keeps_its_claim(kind: str, payments: Callable[..., Payments]) -> None:
    flow = payments(kind, prepare="prepare_blocking")
    run = "pay:blocked"
    a = flow.run(run, label="a", env={"FAULT_PREPARE_MS": str(int(LEASE_S * 3000))})
    flow.wait_for_line("prepare", a.pid)
    time.sleep(LEASE_S * 1.5)  # past the lease while A's loop is still blocked
    b = flow.worker(label="b")  # runs until nothing is due or running: it waits for A's run to settle
    assert a.wait(60) == 0, a.output()
    assert b.wait(60) == 0, b.output()
    ctx = f"[{kind}]"
    by_step = Counter((line.step, line.pid) for line in flow.lines())
    assert by_step == {("prepare", a.pid): 1, ("charge", a.pid): 1, ("notify", a.pid): 1}, (
        f"{ctx} {flow.lines()} (A={a.pid}, B={b.pid})")
    final = flow.record(run)
    assert final.status == "completed" and final.fence == 1, f"{ctx} the run changed hands: {final!r}"


def test_a_lease_shorter_than_a_second_is_refused(payments: Callable[..., Payments]) -> None:
    flow = payments("sqlite", ttl="500ms")
    out = flow.cli("run", str(flow.manifest), "--input", "id=pay:short")
    assert out.returncode == 3 and "ERR_JOURNAL_CONFIG_INVALID" in out.stderr and "claimTtl" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and not flow.lines()
