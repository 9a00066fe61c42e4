"""A send racing a restore: the send read the run's epoch before the restore, stores its message after the
restore record under the OLD epoch's path, and returns success (duplicate=False). fold() ignores records of an
abandoned epoch — inbox entries included — so the message is gone: no receive ever sees it."""
from __future__ import annotations

from typing import Any

import pytest

from telo.durable import messages
from telo.journal import eventlog
from tests.api.test_messages import MANIFEST  # noqa: F401  (registers MsgTest kinds)
from tests.api.test_messages import load as _load

load = _load


class RestoreFirst:
    """A store whose append_in_order lets an operator's restore land first (between send's read and write)."""

    def __init__(self, store: Any, checkpoint: int) -> None:
        self._s, self._cp = store, checkpoint

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s, name)

    def append_in_order(self, run: str, entry: Any) -> Any:
        eventlog.restore(self._s, run, self._cp)
        return self._s.append_in_order(run, entry)


@pytest.mark.parametrize("load", ["sqlite", "file"], indirect=True)
def test_a_message_sent_while_a_restore_lands_is_not_lost(load: Any) -> None:
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
