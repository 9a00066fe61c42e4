"""``Store.read_entries_in_order`` on PostgreSQL (issue 18's receive): the look a receive takes after its park
must see a message whose send is still committing inside its sender's transaction — a ``DurableLocal.Send`` in a
``Durable.Consume`` batch's transaction found the run not parked and woke nothing; were the look to miss the
message too, the run would wait for good. The read takes ``append_in_order``'s per-run lock, so it waits for
that transaction to end. (SQLite, file and memory commit one writer at a time: a park cannot commit inside a
send's transaction there.)"""

from __future__ import annotations

import threading
from pathlib import Path

from telo.clock import FakeClock
from telo.durable import messages
from telo.journal.model import Entry
from tests.stores.conftest import StoreHarness
from tests.stores.test_conformance import admit


def test_a_read_in_order_waits_for_a_send_committing_in_its_senders_transaction(tmp_path: Path) -> None:
    harness = StoreHarness("postgres", tmp_path, FakeClock())
    try:
        store = harness.open()
        admit(store, "r1")
        message = Entry(messages.inbox_path("cmds", "k1"), "decision", '"m1"', 1, messages.MESSAGE_DECISION, None)
        sent, release = threading.Event(), threading.Event()

        def sender() -> None:
            with store.transaction():
                store.append_in_order("r1", message)
                sent.set()
                assert release.wait(10)

        sending = threading.Thread(target=sender)
        sending.start()
        assert sent.wait(10)
        seen: list[list[str]] = []
        reader = threading.Thread(target=lambda: seen.append([e.path for e in store.read_entries_in_order("r1")]))
        reader.start()
        reader.join(0.5)
        waited = reader.is_alive()  # blocked behind the sender's open transaction
        release.set()
        sending.join(10)
        reader.join(10)
    finally:
        harness.close_all()
    assert waited, f"the read did not wait for the send in flight: it saw {seen}"
    assert messages.inbox_path("cmds", "k1") in seen[0]
