"""A workflow in a ``Local.Queue`` from Python (issue 16): ``App.start`` admits the run ``scheduled`` and
answers so; the process waits for a slot and executes the run itself; ``App.run`` returns its outcome as for
any run. Before this change ``Local.Queue`` was an unknown kind and the manifest did not load."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import telo
from telo.errors import TeloError
from telo.journal.claims import Holder
from telo.journal.model import Admission
from telo.journal.sqlite import SqliteStore
from tests.queue_manifests import SQLITE, header


@telo.kind("QueueShop.Work", idempotent=True)
def work(inputs: dict[str, Any]) -> dict[str, Any]:
    return {"did": inputs.get("order")}


MANIFEST = header("QueueApi", SQLITE, "path: ./.telo/runs.db", imports={"Shop": "QueueShop"}, queues={
    "orders": 'concurrency: 1\nworkerConcurrency: 1\nconcurrencyKey: { key: !cel "inputs.shop", limit: 1 }'}) + """\
---
kind: Shop.Work
metadata: { name: doWork }
---
kind: Local.Workflow
metadata: { name: order }
journal: !ref runs
queue: !ref orders
runId: !cel "'order:' + inputs.order"
inputs: { order: !cel "inputs.order" }
steps:
  - { name: work, invoke: !ref doWork, inputs: { order: !cel "inputs.order" } }
"""


def test_a_queued_start_is_scheduled_then_runs_here_to_its_outcome(tmp_path: Path) -> None:
    with telo.load(MANIFEST, journal=str(tmp_path / "j.db")) as app:
        refs = [app.start("order", {"order": f"A-{i}", "shop": "north"}) for i in range(3)]
        assert [r.status for r in refs] == ["scheduled"] * 3 and all(r.started for r in refs)
        results = [app.wait(r) for r in refs]  # one at a time (concurrency 1), all in this process
        assert [r.status for r in results] == ["completed"] * 3
        assert [r.step("work")["did"] for r in results] == ["A-0", "A-1", "A-2"]
        assert app.run("order", {"order": "A-0", "shop": "north"}).ok  # attaching to a settled one
    with telo.load(MANIFEST, journal=str(tmp_path / "j.db")) as app:
        shown = app.status("order:A-1")
    assert shown.status == "completed"


STARTED: list[str] = []


@telo.kind("QueueShop.Note", idempotent=True)
def note(inputs: dict[str, Any]) -> dict[str, Any]:
    STARTED.append(inputs["order"])
    return {"noted": inputs["order"]}


PRIORITY_FLOW = """\
---
kind: Shop.Note
metadata: { name: noteIt }
---
kind: Local.Workflow
metadata: { name: order }
journal: !ref runs
queue: !ref orders
runId: !cel "'order:' + inputs.order"
inputs: { order: !cel "inputs.order" }
steps:
  - { name: note, invoke: !ref noteIt, inputs: { order: !cel "inputs.order" } }
"""


def priority_manifest(more: str = "") -> str:
    """The queue ``orders`` of one slot, ``priority`` its inputs' ``rank``, with ``more`` rules."""
    rules = 'concurrency: 1\npriority: !cel "inputs.rank"' + (f"\n{more}" if more else "")
    return header("QueuePriority", SQLITE, "path: ./.telo/runs.db", imports={"Shop": "QueueShop"},
                  queues={"orders": rules}) + PRIORITY_FLOW


def test_runs_waiting_in_one_process_start_in_priority_order(tmp_path: Path) -> None:
    """``priority`` is evaluated at each start and recorded; the runs waiting for the one slot in this process
    ask for it together, so the journal grants them lowest priority first, ties in admission order — not in
    whichever order their waits happened to ask."""
    journal = str(tmp_path / "j.db")
    busy = Holder("worker", "another-host", 7, 7).to_text()  # a live holder elsewhere holds the one slot
    with SqliteStore(journal) as store:
        store.admit(Admission.of("order:busy", status="scheduled", due_at=0, workflow="order", queue="orders"))
        assert store.claim("order:busy", busy, 600_000, int(time.time() * 1000)) is not None
        store.update_run("order:busy", status="running", due_at=None)
    STARTED.clear()
    with telo.load(priority_manifest(), journal=journal) as app:
        ranks = [5, 1, 3, 0, 1]
        refs = [app.start("order", {"order": f"B-{i}", "rank": rank}) for i, rank in enumerate(ranks)]
        assert [r.status for r in refs] == ["scheduled"] * 5
        time.sleep(0.6)  # every wait has asked at least once: the slot is held
        with SqliteStore(journal) as store:
            assert [store.read_run(f"order:B-{i}").priority for i in range(5)] == ranks  # type: ignore[union-attr]
            store.release("order:busy", busy)
            store.update_run("order:busy", status="cancelled")  # the slot frees
        assert [app.wait(r).status for r in refs] == ["completed"] * 5
    assert STARTED == ["B-3", "B-1", "B-4", "B-2", "B-0"]


def test_a_priority_that_is_not_an_integer_refuses_the_start(tmp_path: Path) -> None:
    with telo.load(priority_manifest(), journal=str(tmp_path / "j.db")) as app:
        with pytest.raises(TeloError) as exc:
            app.start("order", {"order": "C-1", "rank": "high"})
        assert exc.value.code == "ERR_INPUT_INVALID" and "priority must be an integer" in exc.value.message
        assert list(app.runs(workflow="order")) == []  # refused before anything was admitted


@pytest.mark.parametrize(("rate", "says"), [("{ limit: 2, period: 0s }", "positive duration (1ms or more)"),
                                             ("{ limit: !cel \"0\", period: 1m }", "integer ≥ 1, got 0"),
                                             ("{ limit: 0, period: 1m }", "less than the minimum of 1")])
def test_a_bad_rate_limit_is_refused_at_load(tmp_path: Path, rate: str, says: str) -> None:
    """``rateLimit.limit`` an integer ≥ 1 and ``period`` a positive duration, checked by the schema and — for a
    value CEL computes or a zero duration the schema's pattern admits — when the queue loads."""
    with pytest.raises(TeloError) as exc, telo.load(priority_manifest(f"rateLimit: {rate}"),
                                                    journal=str(tmp_path / "j.db")) as app:
        app.start("order", {"order": "D-1", "rank": 1})
    assert exc.value.code == "ERR_MANIFEST_VALIDATION_FAILED" and says in exc.value.message, exc.value.message


def test_set_queue_limits_overrides_them_in_the_journal_and_this_app_applies_them_at_once(tmp_path: Path) -> None:
    """``App.set_queue_limits`` is ``telo queues set`` (issue 16): the override row is in the journal, ``App.queue``
    gives the limits in effect, the manifest's and the override, this app's own claims use them at once, a bad
    value is ``ERR_INVALID_VALUE`` with nothing written, and ``reset=True`` drops it. Before this change there was
    neither method."""
    from telo.kinds.queue import Queue

    journal = str(tmp_path / "j.db")
    with telo.load(MANIFEST, journal=journal) as app:
        shown = app.set_queue_limits("orders", concurrency=3, key_limit=None, rate_limit="10/1m", by="ops")
        assert shown["limits"]["concurrency"] == 3 and shown["limits"]["concurrencyKey"]["limit"] is None
        assert shown["limits"]["rateLimit"] == {"limit": 10, "period": "1m"}
        assert shown["manifestLimits"]["concurrency"] == 1 and shown["manifestLimits"]["concurrencyKey"]["limit"] == 1
        assert {k: v for k, v in shown["override"].items() if k != "setAt"} == {
            "concurrency": 3, "keyLimit": None, "rateLimit": {"limit": 10, "period": "1m"}, "setBy": "ops"}
        queue = app.application.resources["orders"]
        assert isinstance(queue, Queue)
        limits = queue.limits()  # what this app's next claim passes to the journal
        assert (limits.concurrency, limits.key_limit, limits.rate_limit, limits.rate_period_ms) == (3, None, 10,
                                                                                                     60_000)
        with pytest.raises(TeloError) as exc:
            app.set_queue_limits("orders", worker_concurrency=0)
        assert exc.value.code == "ERR_INVALID_VALUE" and "worker_concurrency must be ≥ 1" in exc.value.message
        assert exc.value.hint == "write worker_concurrency=None for no limit"
        with pytest.raises(TeloError) as exc:
            app.queue("nope")
        assert exc.value.code == "ERR_QUEUE_NOT_FOUND"
        refs = [app.start("order", {"order": f"E-{i}", "shop": "north"}) for i in range(3)]
        assert [app.wait(r).status for r in refs] == ["completed"] * 3  # (no per-key limit any more)
    with SqliteStore(journal) as store:
        row = store.queue_overrides()["orders"]
        assert (row.concurrency, row.worker_concurrency, row.key_limit, row.set_by) == (3, None, 0, "ops")
    with telo.load(MANIFEST, journal=journal) as app:  # a new process reads it at start
        assert app.queue("orders")["limits"]["concurrency"] == 3
        back = app.set_queue_limits("orders", reset=True)
        assert back["override"] is None and back["limits"] == back["manifestLimits"]
        assert app.application.resources["orders"].limits().concurrency == 1  # type: ignore[attr-defined]


def test_a_queued_start_with_room_is_granted_in_its_admissions_operation(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 16's overhead row (BENCHMARKS.md "Queues"): a start whose queue has room is granted by its admission's
    own journal operation (``Store.admit_granted``) and executes at once — no separate ask for a slot. Before,
    every queued start admitted alone, then asked ``claim_due`` for its slot."""
    asks: list[object] = []
    real = SqliteStore.claim_due_async

    def counted(self: SqliteStore, *args: Any, **kwargs: Any) -> Any:
        asks.append(kwargs.get("only"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SqliteStore, "claim_due_async", counted)
    with telo.load(MANIFEST, journal=str(tmp_path / "j.db")) as app:
        ref = app.start("order", {"order": "B-1", "shop": "south"})
        assert ref.status == "scheduled" and ref.started  # (the documented answer: admitted `scheduled`)
        assert app.wait(ref).status == "completed"
    assert asks == []
