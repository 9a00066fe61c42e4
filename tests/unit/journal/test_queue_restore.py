"""A restore that would make a settled run live again while another live run of its queue holds its dedup key
(issue 16 step 4; docs/proposals/admission-control.md, "Not done"): refused with ``ERR_DURABLE_RUN_EXISTS`` naming
the run, the one holding the key, the queue and the key, with a hint — before anything is written — on memory,
SQLite and PostgreSQL; once the key is free the restore goes through and the run holds its key again.

Before the fix (telo.journal.keyed.refuse_taken_key, called by telo.journal.eventlog.restore) SQLite raised
``sqlite3.IntegrityError: UNIQUE constraint failed: …_runs.queue, …_runs.dedup_key``, PostgreSQL
``ERR_JOURNAL_WRITE_FAILED`` on the unique violation (its hint about NUL characters), both after the restore's
``@restore[1]`` entry was appended to the settled run; memory restored it, two live runs holding one key.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from telo.clock import FakeClock
from telo.errors import TeloError
from telo.journal.model import Admission, Entry, Outcome
from telo.journal.store import Store
from telo.operations import actions
from tests.pg_support import fresh_prefix, pg_url


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    clock = FakeClock()
    opened: Store
    if request.param == "memory":
        from telo.journal.memory import MemoryStore

        opened = MemoryStore(clock=clock)
    elif request.param == "sqlite":
        from telo.journal.sqlite import SqliteStore

        opened = SqliteStore(str(tmp_path / "journal.db"), clock=clock)
    else:
        from telo.journal.postgres import PostgresStore

        opened = PostgresStore(pg_url(), table=fresh_prefix(), clock=clock)
    with opened:
        yield opened


def keyed(run: str, key: str = "acme") -> Admission:
    return Admission.of(run, status="scheduled", due_at=0, workflow="w", queue="q", inputs={"order": run},
                        dedup_key=key)


def settled_then_taken(store: Store) -> None:
    """``r1`` ran and completed holding the key ``acme`` of queue ``q``; then ``r2`` was admitted with it."""
    assert store.admit(keyed("r1")).admitted
    store.update_run("r1", status="running", due_at=None)
    store.append("r1", Entry.decided("steps/work", "step", {"did": 1}))
    store.complete("r1", Outcome.completed({"did": 1}))
    assert store.admit(keyed("r2")).admitted  # the key was free: r1 had settled


def test_a_restore_refused_by_a_live_holder_of_the_key_names_it_and_writes_nothing(store: Store) -> None:
    settled_then_taken(store)
    before = [e.path for e in store.read_entries("r1")]
    with pytest.raises(TeloError) as exc:
        actions.restore(store, "r1", 0)
    error = exc.value
    assert error.code == "ERR_DURABLE_RUN_EXISTS", error
    assert error.message == ("run 'r1' (completed) cannot be restored: run 'r2' (scheduled) holds its dedup key "
                             "'acme' of queue 'q', and one live run at a time may hold a queue's dedup key")
    assert error.hint is not None and "telo cancel r2" in error.hint and "telo result r2" in error.hint
    assert error.data == {"run": "r1", "status": "completed", "queue": "q", "dedupKey": "acme", "heldBy": "r2",
                          "heldByStatus": "scheduled"}
    record = store.read_run("r1")
    assert record is not None and record.status == "completed" and record.dedup_key == "acme"
    assert [e.path for e in store.read_entries("r1")] == before  # no @restore entry: nothing written
    r2 = store.read_run("r2")
    assert r2 is not None and r2.status == "scheduled"


def test_once_the_key_is_free_the_restore_goes_through_and_the_run_holds_it_again(store: Store) -> None:
    settled_then_taken(store)
    store.complete("r2", Outcome.cancelled("cancelled by operator"))
    restored = actions.restore(store, "r1", 0)
    assert (restored.run, restored.epoch, restored.status) == ("r1", 1, "running")
    record = store.read_run("r1")
    assert record is not None and (record.status, record.queue, record.dedup_key) == ("running", "q", "acme")
    again = store.admit(keyed("r3"))
    assert not again.admitted and again.record.run == "r1"  # live again: it holds its key


def test_a_live_run_or_one_of_another_key_is_restored_as_before(store: Store) -> None:
    settled_then_taken(store)
    assert store.admit(keyed("r4", key="bolt")).admitted
    store.update_run("r4", status="running", due_at=None)
    store.complete("r4", Outcome.completed(None))
    assert actions.restore(store, "r4", 0).status == "running"  # its key ('bolt') is free
    assert actions.restore(store, "r2", 0).status == "running"  # live already: it holds 'acme' itself


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_a_holder_admitted_between_the_check_and_the_write_is_named_too(store: Store,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The key taken after the restore looked (its write then refused by the unique index): the same error."""
    assert store.admit(keyed("r1")).admitted
    store.update_run("r1", status="running", due_at=None)
    store.complete("r1", Outcome.completed(None))
    real = store.update_run

    def racing(run: str, **changes: Any) -> Any:
        if run == "r1" and changes.get("status") == "running":
            assert store.admit(keyed("r2")).admitted  # another process's start, just now
        return real(run, **changes)

    monkeypatch.setattr(store, "update_run", racing)
    with pytest.raises(TeloError) as exc:
        actions.restore(store, "r1", 0)
    assert exc.value.code == "ERR_DURABLE_RUN_EXISTS" and "run 'r2' (scheduled) holds" in exc.value.message
    record = store.read_run("r1")
    assert record is not None and record.status == "completed"
