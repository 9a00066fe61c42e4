"""A send racing a restore (issue 18 review, bug 1): the send read the run's epoch before the restore and stored
its message, after the restore record, under the abandoned epoch's path, answering duplicate=False; fold()
ignores an abandoned epoch's records, so no receive ever saw it. Messages are stored under no epoch now
(telo.journal.eventlog, "Epochs")."""
from __future__ import annotations

from typing import Any

from telo.durable import messages
from telo.journal import eventlog
from tests.api.test_messages import load  # noqa: F401  (the fixture: every store)


class RestoreFirst:
    """A store whose append_in_order lets an operator's restore land first (between send's read and write)."""

    def __init__(self, store: Any, checkpoint: int) -> None:
        self._s, self._cp = store, checkpoint

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s, name)

    def append_in_order(self, run: str, entry: Any) -> Any:
        eventlog.restore(self._s, run, self._cp)
        return self._s.append_in_order(run, entry)


def test_a_message_sent_while_a_restore_lands_is_not_lost(load: Any) -> None:  # noqa: F811
    with load() as app:
        app.run("three", {"id": "r"})
        app.send("three:r", "cmds", "m1", key="k1")
        st = app.wait("three:r", 10)
        assert st.parked is not None and st.parked.path == "steps/b"
        store = app.aio._store()
        checkpoint = next(c for c in app.checkpoints("three:r") if c.path == "steps/p1")
        sent = messages.send(RestoreFirst(store, checkpoint.seq), "three:r", "cmds", "m2", key="k2")
        assert not sent.duplicate  # the sender is told its message is durable
        logical = messages.logical_entries(store, "three:r")
        assert messages.inbox_path("cmds", "k2") in logical, sorted(p for p in logical if p.startswith("@inbox"))
        # and the restored timeline receives it: `a` takes k1 again, `b` takes the raced k2, `c` the next one
        app._call(app.aio._continue("three:r", background=True))
        assert app.wait("three:r", 10).status == "parked"
        app.send("three:r", "cmds", "m3", key="k3")
        done = app.result("three:r", wait=10)
    assert done.ok and [done.step(s)["key"] for s in ("a", "b", "c")] == ["k1", "k2", "k3"]
