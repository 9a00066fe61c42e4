"""Journals written by the upstream Node runtime read line for line, and stay continuable (reference §7, §8).

The four files in ``shared/compat/upstream-journals/`` are legacy format: no ``v``, plain JSON values, entry
key order ``path, kind, value, target``. Each is copied into a FileStore directory under the name the
upstream journal gives its run (``encodeURIComponent(run).ndjson``), read back in full, then appended to.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from telo.journal.file import FileStore
from telo.journal.file_format import file_stem
from telo.journal.model import NO_VALUE, Entry, Outcome, Parked
from telo.values import equal

UPSTREAM = Path(__file__).resolve().parents[2] / ".." / "shared" / "compat" / "upstream-journals"

ORDERS = "file:///telo/examples/durable-orders/scratch-orders-waited.yaml"
TESTS = "file:///telo/modules/durable-local/tests/"


def install(tmp_path: Path, name: str) -> tuple[FileStore, str, Path]:
    """Copy an upstream journal into a fresh store directory under its run's file name."""
    source = UPSTREAM / name
    run = json.loads(source.read_text(encoding="utf-8").splitlines()[0])["run"]
    directory = tmp_path / "journal"
    directory.mkdir()
    target = directory / (file_stem(run) + ".ndjson")
    shutil.copyfile(source, target)
    return FileStore(str(directory)), run, target


def read_all(store: FileStore, run: str) -> list[tuple[Any, ...]]:
    return [(e.path, e.seq, e.kind, e.decision, e.target, e.v, e.decode(run)) for e in store.read_entries(run)]


def assert_entries(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> None:
    assert [g[:4] for g in got] == [(w[0], i + 1, *w[1:3]) for i, w in enumerate(want)]
    for g, w in zip(got, want, strict=True):
        assert g[4] == w[3], g  # target
        assert g[5] is None, g  # legacy: no codec version
        assert (g[6] is NO_VALUE) == (w[4] is NO_VALUE) and (w[4] is NO_VALUE or equal(g[6], w[4])), (g, w)


def test_the_upstream_journals_are_there() -> None:
    assert sorted(p.name for p in UPSTREAM.glob("*.ndjson")) == [
        "example-orders-A4-kill9-mid-charge.ndjson",
        "test-collapses-idempotent-region.ndjson",
        "test-parks-and-resumes.ndjson",
        "test-replays-recorded-steps-ada.ndjson",
    ]


def test_killed_mid_charge_reads_as_running_up_to_the_charge_inputs(tmp_path: Path) -> None:
    store, run, path = install(tmp_path, "example-orders-A4-kill9-mid-charge.ndjson")
    assert run == "order:A-4" and path.name == "order%3AA-4.ndjson"
    rec = store.read_run(run)
    assert rec is not None and rec.status == "running" and not rec.terminal
    assert (rec.inputs, rec.result, rec.due_at, rec.parked, rec.claim, rec.created_at) == (None,) * 6
    assert store.due_runs(0, 10) == [run], "a running run whose process died is due (reference §7)"

    def inputs(p: str, value: Any) -> tuple[str, str, str, None, Any]:
        return (p, "decision", "inputs", None, value)

    def step(p: str, kind: str, name: str, value: Any) -> tuple[str, str, None, dict[str, str], Any]:
        return (p, "step", None, {"kind": kind, "name": name, "module": ORDERS}, value)

    say = {"kind": "Console.WriteLine", "name": "say", "module": ORDERS}
    assert_entries(read_all(store, run), [
        inputs("inputs", {"order": "A-4"}),
        inputs("steps/reserve/inputs", {"order": "A-4"}),
        inputs("steps/reserve/announce/inputs", {"output": "  {yellow reserving stock} for order A-4…"}),
        ("steps/reserve/announce", "step", None, say, "  {yellow reserving stock} for order A-4…"),
        inputs("steps/reserve/work/inputs", {"duration": "2s"}),
        step("steps/reserve/work", "Timer.Delay", "pause", {"value": None}),
        inputs("steps/reserve/done/inputs", {"output": "  {green ✓ stock reserved}"}),
        ("steps/reserve/done", "step", None, say, "  {green ✓ stock reserved}"),
        step("steps/reserve", "Run.Sequence", "reserveStock", {"reserved": True}),
        inputs("steps/charge/inputs", {"order": "A-4"}),
        inputs("steps/charge/announce/inputs", {"output": "  {yellow charging card} for order A-4…"}),
        ("steps/charge/announce", "step", None, say, "  {yellow charging card} for order A-4…"),
        inputs("steps/charge/work/inputs", {"duration": "4s"}),
    ])
    # a legacy value that is an object reads as a plain dict (no frame decoding)
    work = store.read_entries(run)[5].decode(run)
    assert type(work) is dict and work == {"value": None}


def test_parks_and_resumes_reads_completed(tmp_path: Path) -> None:
    store, run, _ = install(tmp_path, "test-parks-and-resumes.ndjson")
    assert run == "park:t1795990995710"
    rec = store.read_run(run)
    assert rec is not None and rec.status == "completed" and rec.result_v is None
    assert equal(rec.decoded_result(), {"steps": {"opened": {"result": {"stage": "before"}},
                                                  "waitForApproval": {"result": {"approvedBy": "ada"}},
                                                  "closed": {"result": {"stage": "after"}}}})
    assert rec.collapsed_regions == 0 and rec.collapse_reasons == () and rec.replayed_steps is None
    assert rec.parked is None and rec.due_at is None and rec.error is None
    assert store.run_parked_on("approve:t1795990995710") is None  # the park line is no longer the last
    module = TESTS + "parks-and-resumes.yaml"
    assert_entries(read_all(store, run), [
        ("inputs", "decision", "inputs", None, {"ticket": "t1795990995710"}),
        ("steps/opened/inputs", "decision", "inputs", None, {}),
        ("steps/opened", "step", None, {"kind": "Run.Value", "name": "before", "module": module},
         {"stage": "before"}),
        ("steps/waitForApproval/inputs", "decision", "inputs", None, {"ticket": "t1795990995710"}),
        ("steps/waitForApproval/token", "decision", "value", None, "approve:t1795990995710"),
        ("steps/waitForApproval", "step", None, None, {"approvedBy": "ada"}),  # the delivery: no target
        ("steps/closed/inputs", "decision", "inputs", None, {}),
        ("steps/closed", "step", None, {"kind": "Run.Value", "name": "after", "module": module},
         {"stage": "after"}),
    ])


def test_parks_and_resumes_cut_at_the_park_is_parked(tmp_path: Path) -> None:
    store, run, path = install(tmp_path, "test-parks-and-resumes.ndjson")
    kept = path.read_bytes().split(b"\n")[:7]  # through the park line
    path.write_bytes(b"\n".join(kept) + b"\n")
    store = FileStore(str(path.parent))
    rec = store.read_run(run)
    assert rec is not None and rec.status == "parked"
    assert rec.parked == Parked("steps/waitForApproval", "approval", "approve:t1795990995710")
    found = store.run_parked_on("approve:t1795990995710")
    assert found is not None and found.run == run
    assert store.due_runs(0, 10) == []
    # a delivery appended, then the crash before unpark: the run is due (reference §7 "due")
    store.append(run, Entry.step("steps/waitForApproval", None, {"approvedBy": "ada"}))
    assert store.due_runs(0, 10) == [run]


def test_collapsed_region_reads_one_entry_for_the_region(tmp_path: Path) -> None:
    store, run, _ = install(tmp_path, "test-collapses-idempotent-region.ndjson")
    assert run == "import:b1795990988540"
    rec = store.read_run(run)
    assert rec is not None and rec.status == "completed" and rec.collapsed_regions == 1
    assert rec.collapse_reasons == (
        "Durable.Idempotent (idempotent): the author asserts re-running this region is observably a no-op; "
        "this resource's `reason:` states why",
    )
    ok = {"result": {"ok": True}}
    assert equal(rec.decoded_result(), {"steps": {"prepare": ok, "bulk": {"result": {"steps": {
        "writeOne": ok, "writeTwo": ok}}}}})
    module = TESTS + "collapses-idempotent-region.yaml"
    assert_entries(read_all(store, run), [
        ("inputs", "decision", "inputs", None, {}),
        ("steps/prepare/inputs", "decision", "inputs", None, {}),
        ("steps/prepare", "step", None, {"kind": "Run.Value", "name": "upsert", "module": module}, {"ok": True}),
        ("steps/bulk/inputs", "decision", "inputs", None, {}),
        ("steps/bulk", "step", None, {"kind": "Durable.Idempotent", "name": "importAll", "module": module},
         {"steps": {"writeOne": ok, "writeTwo": ok}}),
    ])


def test_replays_recorded_steps_reads_the_branch(tmp_path: Path) -> None:
    store, run, path = install(tmp_path, "test-replays-recorded-steps-ada.ndjson")
    assert run == "onboard:ada+1795990985534@example.com"
    assert path.name == "onboard%3Aada%2B1795990985534%40example.com.ndjson"
    rec = store.read_run(run)
    assert rec is not None and rec.status == "completed"
    assert equal(rec.decoded_result(), {"steps": {"createAccount": {"result": {"charged": True}},
                                                  "welcome": {"result": {"sent": True}}}})
    module = TESTS + "replays-recorded-steps.yaml"
    assert_entries(read_all(store, run), [
        ("inputs", "decision", "inputs", None, {"email": "ada+1795990985534@example.com"}),
        ("steps/gate/if", "decision", "predicate", None, True),
        ("steps/gate/then/createAccount/inputs", "decision", "inputs", None, {}),
        ("steps/gate/then/createAccount", "step", None,
         {"kind": "Run.Value", "name": "chargeCard", "module": module}, {"charged": True}),
        ("steps/welcome/inputs", "decision", "inputs", None, {}),
        ("steps/welcome", "step", None, {"kind": "Run.Value", "name": "sendMail", "module": module}, {"sent": True}),
    ])


@pytest.mark.parametrize("name", sorted(p.name for p in UPSTREAM.glob("*.ndjson")))
def test_appending_continues_an_upstream_file_readably(tmp_path: Path, name: str) -> None:
    store, run, path = install(tmp_path, name)
    original = path.read_bytes()
    before = store.read_entries(run)
    first = store.append(run, before[0])  # first writer wins against the upstream line
    assert first == before[0]
    added = store.append(run, Entry.step("steps/telo/after", None, {"n": 1}))
    assert added.seq == len(original.splitlines()) - sum(1 for ln in original.splitlines() if b'"type":"run"' in ln) + 1
    store.complete(run, Outcome.completed({"done": True}))
    data = path.read_bytes()
    assert data.startswith(original), "upstream lines are never rewritten"
    for line in data.splitlines():
        obj = json.loads(line)
        assert obj["type"] in ("run", "entry")  # nothing an upstream reader would not know here
    fresh = FileStore(str(path.parent))
    assert fresh.read_entries(run) == [*before, added]
    rec = fresh.read_run(run)
    assert rec is not None and rec.status == "completed" and equal(rec.decoded_result(), {"done": True})
