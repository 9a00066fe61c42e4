"""``Store.journal_mark``: the log's entry count and highest seq, moving with every change to it — held by every
store, and what the console polls instead of reading a run's whole log each second (telo.server.live)."""

from __future__ import annotations

import pytest

from telo.clock import FakeClock
from telo.journal import eventlog
from telo.journal.model import Admission, Entry
from telo.journal.store import Store
from telo.server.live import run_version

TARGET = {"kind": "Python.Function", "name": "charge", "module": "file:///app.yaml"}


def test_the_mark_counts_the_log_and_moves_with_each_change(store: Store, clock: FakeClock) -> None:
    assert store.admit(Admission.of("r1", workflow="w")).admitted
    assert store.journal_mark("r1") == (0, 0)
    assert store.journal_mark("nobody") == (0, 0)
    first = store.append("r1", Entry.decided("steps/a/inputs", "inputs", {"n": 1}))
    second = store.append("r1", Entry.step("steps/a", TARGET, {"ok": True}))
    store.append("r1", Entry.step("steps/a", TARGET, {"ok": False}))  # first writer wins: nothing changes
    assert store.journal_mark("r1") == (2, second.seq) and second.seq is not None and first.seq is not None
    assert store.journal_mark("r1") == (len(store.read_entries("r1")), max(e.seq or 0 for e in
                                                                         store.read_entries("r1")))
    before = store.journal_mark("r1")
    eventlog.compact(store, "r1", clock=clock)  # a snapshot appended, the prefix truncated
    after = store.journal_mark("r1")
    assert after != before and after[1] > before[1] and after[0] == len(store.read_entries("r1"))


# The SQL stores ask the database; memory and file keep the default (their logs are in memory, or cached).
@pytest.mark.parametrize("harness", ["sqlite", "postgres"], indirect=True)
def test_the_consoles_poll_does_not_read_the_log(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    assert store.admit(Admission.of("r1", workflow="w")).admitted
    store.append("r1", Entry.decided("steps/a/inputs", "inputs", {"n": 1}))
    version = run_version(store, "r1")

    def no_log(run: str) -> list[Entry]:
        raise AssertionError("the poll read the whole log")

    monkeypatch.setattr(store, "read_entries", no_log)
    assert run_version(store, "r1") == version
    store.append("r1", Entry.step("steps/a", TARGET, 1))
    assert run_version(store, "r1") != version
