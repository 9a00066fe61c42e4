"""Entries record when the store wrote them (``Entry.at``, issue 15), held identically by every store.

The time comes from the store's own clock (here the suite's FakeClock), survives a fresh instance, is ignored by
``same_record`` as ``seq`` is, and is kept by a fork's copies and a compaction's snapshot; an entry written
before entries had times (an older telo, the upstream runtime) reads ``at=None``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from telo.clock import FakeClock
from telo.journal import eventlog
from telo.journal.file_format import file_stem
from telo.journal.model import Admission, Entry, Parked
from telo.journal.store import GroupCommitStore, Store
from tests.stores.conftest import StoreHarness

TARGET = {"kind": "Python.Function", "name": "charge", "module": "file:///app.yaml"}


def _admit(store: Store, run: str = "r1") -> None:
    assert store.admit(Admission.of(run, workflow="w")).admitted


def test_an_entry_is_stamped_with_the_stores_clock_and_read_back_with_it(store: Store, clock: FakeClock) -> None:
    _admit(store)
    t0 = clock.now_ms()
    first = store.append("r1", Entry.decided("steps/a/inputs", "inputs", {"n": 1}))
    clock.advance(ms=1_250)
    second = store.append("r1", Entry.step("steps/a", TARGET, {"ok": True}))
    assert (first.at, second.at) == (t0, t0 + 1_250)  # what append returns carries it
    assert [(e.path, e.at) for e in store.read_entries("r1")] == [("steps/a/inputs", t0), ("steps/a", t0 + 1_250)]


@pytest.mark.parametrize("harness", ["sqlite", "postgres"], indirect=True)  # the stores with group commit
def test_grouped_appends_are_stamped_too(store: Store, clock: FakeClock) -> None:
    """The group-commit path (SQLite, PostgreSQL: many appends in one multi-row statement) writes the time."""
    assert isinstance(store, GroupCommitStore)
    _admit(store)
    t0 = clock.now_ms()

    async def appends() -> list[Entry]:
        return list(await asyncio.gather(*(store.submit_append_async("r1", Entry.decided(f"p{i}", "value", i))
                                           for i in range(5))))

    stored = asyncio.run(appends())
    assert [e.at for e in stored] == [t0] * 5
    assert [e.at for e in store.read_entries("r1")] == [t0] * 5


def test_the_time_survives_a_fresh_instance(store: Store, reopen: Callable[[], Store], clock: FakeClock) -> None:
    _admit(store)
    store.append("r1", Entry.decided("inputs", "inputs", {"x": 1}))
    clock.advance(seconds=3)
    store.append("r1", Entry.step("steps/a", TARGET, 1))
    written = store.read_entries("r1")
    assert [e.at for e in reopen().read_entries("r1")] == [e.at for e in written] == [clock.now_ms() - 3_000,
                                                                                       clock.now_ms()]


def test_same_record_ignores_the_time_and_the_first_writers_time_stays(store: Store, clock: FakeClock) -> None:
    a = Entry.step("steps/a", TARGET, {"n": 1})
    assert Entry("p", "step", "1", 2, None, None, 1, 10).same_record(Entry("p", "step", "1", 2, None, None, 2, 99))
    _admit(store)
    first = store.append("r1", a)
    clock.advance(ms=500)
    again = store.append("r1", a)  # racing writers converge on the first write, its time included
    assert again.same_record(a) and again.at == first.at == clock.now_ms() - 500


def test_an_entry_that_carries_its_time_keeps_it(store: Store, clock: FakeClock) -> None:
    _admit(store)
    stored = store.append("r1", Entry("steps/copied", "step", '"x"', 2, None, dict(TARGET), None, 1_000_000))
    assert stored.at == 1_000_000 and store.read_entries("r1")[0].at == 1_000_000


def test_a_delivery_is_stamped_when_it_is_stored(store: Store, clock: FakeClock) -> None:
    _admit(store)
    store.append("r1", Entry.decided("steps/wait/inputs", "inputs", {}))
    store.park("r1", Parked("steps/wait", "approval", "tok"))
    clock.advance(seconds=90)
    assert store.deliver("tok", '{"by":"ada"}', 2) == "r1"
    delivered = store.read_entries("r1")[-1]
    assert (delivered.path, delivered.at) == ("steps/wait", clock.now_ms())


def test_a_fork_keeps_the_originals_times(store: Store, clock: FakeClock) -> None:
    _admit(store)
    originals = [store.append("r1", Entry.decided("inputs", "inputs", {"x": 1}))]
    clock.advance(seconds=1)
    originals.append(store.append("r1", Entry.step("steps/a", TARGET, 1)))
    clock.advance(seconds=60)
    eventlog.fork(store, "r1", originals[-1].seq or 0, "r1-fork")
    copied = {e.path: e.at for e in store.read_entries("r1-fork")}
    assert copied == {"inputs": originals[0].at, "steps/a": originals[1].at, eventlog.FORKED: clock.now_ms()}


def test_a_compacted_run_keeps_its_entries_times(store: Store, clock: FakeClock) -> None:
    _admit(store)
    times = {}
    for i in range(3):
        times[f"steps/s{i}"] = store.append("r1", Entry.step(f"steps/s{i}", TARGET, i)).at
        clock.advance(seconds=2)
    eventlog.compact(store, "r1", clock=clock)
    assert {p: e.at for p, e in eventlog.recover(store, "r1").entries.items()} == times


def _write_untimed_entry(harness: StoreHarness, run: str, path: str) -> None:
    """An entry as an older telo or the upstream runtime wrote it: no time (nor checksum) beside it."""
    where = harness.location
    if harness.kind == "sqlite":
        conn = sqlite3.connect(where["path"])
        conn.execute("INSERT INTO telo_durable_entries (run, path, seq, entry_kind, decision, target, value, "
                     "codec_version) VALUES (?, ?, 1, 'decision', 'value', NULL, '1', 2)", (run, path))
        conn.commit()
        conn.close()
    elif harness.kind == "file":
        line = {"type": "entry", "entry": {"path": path, "kind": "decision", "decision": "value", "v": 2,
                                           "value": "1"}}
        with open(Path(where["directory"]) / f"{file_stem(run)}.ndjson", "ab") as f:
            f.write(json.dumps(line, separators=(",", ":")).encode() + b"\n")
    else:
        import psycopg
        from psycopg import sql

        with psycopg.connect(where["url"], autocommit=True) as conn:
            conn.execute(sql.SQL("INSERT INTO {} (run, path, entry_kind, decision, value, codec_version) "
                                 "VALUES (%s, %s, 'decision', 'value', '1', 2)")
                         .format(sql.Identifier(f"{where['table']}_entries")), (run, path))


# (not the memory journal: nothing but itself ever writes its entries)
@pytest.mark.parametrize("harness", ["sqlite", "file", "postgres"], indirect=True)
def test_an_entry_written_without_a_time_reads_none(harness: StoreHarness, store: Store,
                                                    reopen: Callable[[], Store], clock: FakeClock) -> None:
    _admit(store)
    _write_untimed_entry(harness, "r1", "steps/old")
    after = store.append("r1", Entry.decided("steps/new", "value", 2))
    read = {e.path: e.at for e in reopen().read_entries("r1")}
    assert read == {"steps/old": None, "steps/new": clock.now_ms()} and after.at == clock.now_ms()
