"""``dedupKey`` + ``onDuplicate``, ``debounce`` and ``singleton`` of a ``Local.Queue`` from Python (issue 16, step 4
of docs/proposals/admission-control.md; telo.kinds.queue_keys), on a memory, SQLite and PostgreSQL journal: what a
second start of a key answers and what runs. Before this change the fields were unknown to the schema and the
manifests did not load."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import telo
from telo.errors import TeloError
from telo.journal.model import RunRecord
from tests.pg_support import fresh_prefix, pg_url
from tests.queue_manifests import POSTGRES, SQLITE, header

EXECUTED: list[tuple[str, int]] = []
_LOCK = threading.Lock()


@telo.kind("KeyShop.Work", idempotent=True)
def work(inputs: dict[str, Any]) -> dict[str, Any]:
    with _LOCK:
        EXECUTED.append((inputs["order"], inputs["n"]))
    time.sleep(inputs["hold"])
    return {"order": inputs["order"], "n": inputs["n"]}


FLOW = """\
---
kind: Shop.Work
metadata: { name: doWork }
---
kind: Local.Workflow
metadata: { name: order }
journal: !ref runs
queue: !ref orders
inputs: { order: !cel "inputs.order", n: !cel "inputs.n", hold: !cel "inputs.hold" }
steps:
  - name: work
    invoke: !ref doWork
    inputs: { order: !cel "inputs.order", n: !cel "inputs.n", hold: !cel "inputs.hold" }
"""


def manifest(rules: str, module: str = SQLITE, location: str = "path: ./.telo/runs.db") -> str:
    """The queue ``orders`` with ``rules`` on the journal ``module`` at ``location``, and the workflow ``order``."""
    return header("Keyed", module, location, imports={"Shop": "KeyShop"}, queues={"orders": rules}) + FLOW


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def load(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    kind = request.param

    def make(rules: str) -> telo.App:
        if kind == "postgres":
            location = f"url: {pg_url()}\ntable: {fresh_prefix()}"
            return telo.load(manifest(rules, POSTGRES, location))
        return telo.load(manifest(rules), journal="memory:" if kind == "memory" else str(tmp_path / "j.db"))

    EXECUTED.clear()
    yield make


def record(app: telo.App, run: str) -> RunRecord:
    found = app.aio._store().read_run(run)  # (the journal's own record: its queue columns)
    assert found is not None
    return found


def start(app: telo.App, n: int, *, order: str = "A", hold: float = 0.4) -> Any:
    return app.start("order", {"order": order, "n": n, "hold": hold})


def test_dedup_attach_answers_every_start_with_the_live_run(load: Any) -> None:
    with load('dedupKey: !cel "inputs.order"') as app:
        refs = [start(app, n) for n in range(3)]
        assert len({r.run_id for r in refs}) == 1  # one run; the handles all name it
        assert [r.started for r in refs] == [True, False, False]
        assert [app.wait(r).value["steps"]["work"]["result"]["n"] for r in refs] == [0, 0, 0]
        other = start(app, 7, order="B", hold=0)
        assert other.run_id != refs[0].run_id  # another key: another run
        again = start(app, 9, hold=0)  # the first settled: a new start admits a new run
        assert again.started and again.run_id != refs[0].run_id
        assert app.wait(again).ok and app.wait(other).ok
        assert record(app, again.run_id).dedup_key == "A"  # recorded with the run
    assert EXECUTED.count(("A", 0)) == 1 and ("A", 9) in EXECUTED and ("A", 1) not in EXECUTED


def test_dedup_reject_refuses_a_start_while_the_key_is_live(load: Any) -> None:
    with load('dedupKey: !cel "inputs.order"\nonDuplicate: reject') as app:
        first = start(app, 0)
        with pytest.raises(TeloError) as exc:
            start(app, 1)
        assert exc.value.code == "ERR_DURABLE_RUN_EXISTS" and exc.value.data["run"] == first.run_id
        assert "dedup key 'A'" in exc.value.message and exc.value.hint and "onDuplicate: attach" in exc.value.hint
        assert app.wait(first).ok
        free = start(app, 2, hold=0)  # settled: the key is free again
        assert free.started and app.wait(free).ok
    assert [n for _, n in EXECUTED] == [0, 2]


def test_debounce_runs_once_with_the_latest_inputs(load: Any) -> None:
    with load('debounce: { period: 600ms, key: !cel "inputs.order" }') as app:
        t0 = time.time() * 1000
        refs = [start(app, n, hold=0) for n in range(4)]
        assert len({r.run_id for r in refs}) == 1 and [r.status for r in refs] == ["scheduled"] * 4
        stored = record(app, refs[0].run_id)
        assert stored.due_at is not None and stored.due_at >= t0 + 600  # moved by each start
        assert stored.decoded_inputs()["n"] == 3 and stored.debounce_key == "A"
        result = app.wait(refs[0])
        assert result.value["steps"]["work"]["result"]["n"] == 3
        later = start(app, 5, hold=0)  # the run started (and settled): a new debounce
        assert later.run_id != refs[0].run_id and app.wait(later).ok
    assert EXECUTED == [("A", 3), ("A", 5)]


def test_singleton_skip_admits_nothing_and_names_the_live_run(load: Any) -> None:
    with load('singleton: { key: !cel "inputs.order", mode: skip }') as app:
        first = start(app, 0)
        skipped = start(app, 1)
        assert (skipped.run_id, skipped.started, skipped.status) == (first.run_id, False, "skipped")
        ran = app.run("order", {"order": "A", "n": 2, "hold": 0})
        assert (ran.run_id, ran.status) == (first.run_id, "skipped")  # not waited for: nothing of it was admitted
        assert app.wait(first).ok
        assert len(list(app.runs(workflow="order"))) == 1
    assert EXECUTED == [("A", 0)]


def test_singleton_cancel_running_cancels_the_live_run_and_admits(load: Any) -> None:
    with load('singleton: { key: !cel "inputs.order", mode: cancel-running }') as app:
        first = start(app, 0, hold=0.8)
        time.sleep(0.3)  # executing its step
        second = start(app, 1, hold=0)
        assert second.started and second.run_id != first.run_id
        old = app.wait(first)
        assert old.status == "cancelled" and old.error is not None and second.run_id in old.error.message
        assert app.wait(second).value["steps"]["work"]["result"]["n"] == 1


def test_singleton_queue_runs_one_run_of_a_key_at_a_time(load: Any) -> None:
    with load('singleton: { key: !cel "inputs.order", mode: queue }') as app:
        refs = []
        for n in range(3):  # FIFO is by admission time, then id within one millisecond: a millisecond apart
            refs.append(start(app, n, hold=0.2))
            time.sleep(0.002)
        refs.append(start(app, 9, order="B", hold=0.2))
        assert len({r.run_id for r in refs}) == 4 and all(r.started for r in refs)
        assert all(app.wait(r).ok for r in refs)
        records = [record(app, r.run_id) for r in refs]
    assert [r.queue_key for r in records] == ["A", "A", "A", "B"]
    spans = sorted((r.started_at or 0, r.updated_at or 0) for r in records[:3])
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))  # one at a time
    assert [n for order, n in EXECUTED if order == "A"] == [0, 1, 2]


@pytest.mark.parametrize(("rules", "says"), [
    ('dedupKey: !cel "inputs.order"\nsingleton: { key: !cel "inputs.order" }', "at most one of dedupKey"),
    ('debounce: { period: 1s, key: !cel "inputs.order" }\ndedupKey: !cel "inputs.order"', "at most one of dedupKey"),
    ("onDuplicate: reject", "onDuplicate is set without dedupKey"),
    ('singleton: { key: !cel "inputs.order", mode: queue }\nconcurrencyKey: { key: !cel "inputs.order", limit: 2 }',
     "singleton mode queue and concurrencyKey"),
    ('debounce: { period: 0s, key: !cel "inputs.order" }', "positive duration"),
])
def test_contradicting_rules_are_refused_at_load(tmp_path: Path, rules: str, says: str) -> None:
    with pytest.raises(TeloError) as exc, telo.load(manifest(rules), journal=str(tmp_path / "j.db")) as app:
        start(app, 0)
    assert exc.value.code == "ERR_MANIFEST_VALIDATION_FAILED" and says in exc.value.message, exc.value.message
    assert exc.value.hint


def test_a_key_that_is_not_a_scalar_refuses_the_start(tmp_path: Path) -> None:
    with telo.load(manifest('dedupKey: !cel "[inputs.order]"'), journal=str(tmp_path / "j.db")) as app:
        with pytest.raises(TeloError) as exc:
            start(app, 0)
        assert exc.value.code == "ERR_INPUT_INVALID" and "dedup key must be" in exc.value.message
        assert list(app.runs(workflow="order")) == []
