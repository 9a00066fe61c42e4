"""telo.App / telo.AsyncApp: starting, waiting for, addressing and time-travelling durable runs."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import telo
from telo.clock import FakeClock
from telo.values import Timestamp

calls: Counter[str] = Counter()


@telo.kind("ApiShop.Work", idempotent=True)
def work(inputs: dict[str, Any]) -> dict[str, Any]:
    calls[str(inputs.get("label"))] += 1
    return {"did": inputs.get("label"), "n": 3, "x": 1.5}


@telo.kind("ApiShop.Fail")
def fail(inputs: dict[str, Any]) -> None:
    raise telo.TeloError("ERR_CARD_DECLINED", "card declined")


@telo.kind("ApiShop.Where")
async def where(inputs: dict[str, Any]) -> dict[str, Any]:
    # An async kind runs on the loop the app's coroutines run on: the caller's, for an AsyncApp.
    return {"thread": threading.current_thread().name}


gate = threading.Event()


@telo.kind("ApiShop.Slow")
def slow(inputs: dict[str, Any]) -> dict[str, Any]:
    calls["slow"] += 1
    assert gate.wait(30), "the test never opened the gate"
    return {"done": True}


MANIFEST = """\
kind: Telo.Application
metadata: { name: ApiTests, version: 1.0.0 }
imports:
  Local: durable-local
  Durable: durable
  Journal: durable-journal-sqlite
  Shop: ApiShop
---
kind: Journal.Journal
metadata: { name: runs }
path: ./.telo/runs.db
---
kind: Shop.Work
metadata: { name: work }
---
kind: Shop.Fail
metadata: { name: fail }
---
kind: Shop.Where
metadata: { name: where }
---
kind: Durable.Await
metadata: { name: approval }
token: !cel "'approve:' + inputs.order"
outputType:
  kind: Telo.JsonSchema
  schema: { type: object, required: [by], properties: { by: { type: string } } }
---
kind: Durable.Sleep
metadata: { name: nap }
for: !cel "inputs.for"
---
kind: Local.Workflow
metadata: { name: order }
journal: !ref runs
runId: !cel "'order:' + inputs.order"
inputs: { order: !cel "inputs.order" }
steps:
  - { name: reserve, invoke: !ref work, inputs: { label: !cel "'reserve ' + inputs.order" } }
  - { name: approve, invoke: !ref approval, inputs: { order: !cel "inputs.order" } }
  - { name: ship, invoke: !ref work, inputs: { label: !cel "'ship ' + steps.approve.result.by" } }
---
kind: Local.Workflow
metadata: { name: sleepy }
journal: !ref runs
runId: !cel "'sleepy:' + inputs.id"
inputs: { id: !cel "inputs.id", for: !cel "inputs.for" }
steps:
  - { name: before, invoke: !ref work, inputs: { label: !cel "'before ' + inputs.id" } }
  - { name: nap, invoke: !ref nap, inputs: { for: !cel "inputs.for" } }
  - { name: after, invoke: !ref work, inputs: { label: !cel "'after ' + inputs.id" } }
---
kind: Shop.Slow
metadata: { name: slow }
---
kind: Local.Workflow
metadata: { name: slowpay }
journal: !ref runs
runId: !cel "'slowpay:' + inputs.id"
steps:
  - { name: pay, invoke: !ref slow }
---
kind: Local.Workflow
metadata: { name: failing }
journal: !ref runs
steps:
  - { name: charge, invoke: !ref fail }
---
kind: Local.Workflow
metadata: { name: loop }
journal: !ref runs
steps:
  - { name: where, invoke: !ref where }
"""


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    calls.clear()


def test_resubmitting_a_run_this_process_executes_attaches_to_it(tmp_path: Path) -> None:
    """A second start of a run id whose body this process is executing — a manifest's second target, another
    run's step — must attach: re-claiming it (the same holder is granted a claim) would fence the live
    execution out in the middle of its effect, which the next execution would then find unconfirmed."""
    from telo.kinds.workflow import Workflow

    gate.clear()
    with telo.load(MANIFEST) as app:

        async def start_twice() -> tuple[Any, Any]:
            await app.aio._ready()
            wf = app.aio.application.resources["slowpay"]
            assert isinstance(wf, Workflow)
            first = await wf.invoke({"id": "1"})
            while not calls["slow"]:
                await asyncio.sleep(0.01)
            again = await wf.invoke({"id": "1"})  # while the first execution is inside `pay`
            gate.set()
            return first, again

        first, again = app._call(start_twice())
        done = app.result("slowpay:1", wait=30)
        record = app.aio.application.resources["runs"].store.read_run("slowpay:1")  # type: ignore[attr-defined]
    assert first["started"] is True and again == {"runId": "slowpay:1", "attached": True, "status": "running"}
    assert done.ok and calls["slow"] == 1
    assert record is not None and record.fence == 1  # the one execution's claim, never taken again


def test_a_run_parks_for_a_delivery_and_completes_once_delivered(tmp_path: Path) -> None:
    with telo.load(MANIFEST) as app:
        parked = app.run("order", {"order": "A-1"})
        assert parked.status == "parked" and not parked.ok and not parked.settled
        assert parked.parked is not None and parked.parked.token == "approve:A-1"
        status = app.status("order:A-1")
        assert (status.status, status.workflow, status.parked) == ("parked", "order", parked.parked)
        assert app.deliver("approve:A-2", {"by": "ada"}).delivered is False
        delivery = app.deliver("approve:A-1", {"by": "ada"})
        assert delivery.delivered and delivery.run_id == "order:A-1" and delivery.continued
        done = app.result("order:A-1", wait=10)
    assert done.ok and done.settled and done.replayed_steps == 2  # reserve and the delivered approval
    assert done.step("ship") == {"did": "ship ada", "n": 3, "x": 1.5}
    assert type(done.step("ship")["n"]) is int and type(done.step("ship")["x"]) is float  # domain values
    assert calls == {"reserve A-1": 1, "ship ada": 1}
    assert (tmp_path / ".telo" / "runs.db").is_file()  # relative to the cwd: the YAML text's directory


def test_start_returns_at_once_and_a_second_start_attaches(tmp_path: Path) -> None:
    with telo.load(MANIFEST, journal=str(tmp_path / "j.db")) as app:
        ref = app.start("order", {"order": "B-1"})
        assert ref == telo.RunRef("order:B-1", "order", True, "running") and str(ref) == "order:B-1"
        assert app.run("order", {"order": "B-1"}).status == "parked"
        again = app.start("order", {"order": "B-1"})  # attaching to a parked run continues it (it parks again)
        assert again.run_id == "order:B-1"
        assert app.wait(again).status == "parked"  # waits for that continuation to rest
        assert app.deliver("approve:B-1", {"by": "bo"}).delivered
        assert app.result(ref, wait="10s").ok
        settled = app.start("order", {"order": "B-1"})
        assert settled == telo.RunRef("order:B-1", "order", False, "completed")
        attached = app.run("order", {"order": "B-1"})  # a settled run answers with its outcome
        assert attached.ok and attached.step("ship")["did"] == "ship bo"
    assert not (tmp_path / ".telo").exists()  # journal= replaced the manifest's journal


def test_a_durable_sleep_is_waited_through_in_process() -> None:
    with telo.load(MANIFEST) as app:
        result = app.run("sleepy", {"id": "s1", "for": "200ms"}, wait=30)
    assert result.ok and isinstance(result.step("nap")["wokeAt"], int)


def test_under_a_fake_clock_a_sleep_parks_and_run_due_continues_it(tmp_path: Path) -> None:
    clock = FakeClock()
    with telo.load(MANIFEST, clock=clock) as app:
        parked = app.run("sleepy", {"id": "s2", "for": "1h"})
        assert parked.status == "parked" and parked.due_at == clock.now_ms() + 3_600_000
        assert app.run_due() == 0  # not due yet
        clock.advance(seconds=3600)
        assert app.run_due() == 1
        done = app.result("sleepy:s2")
    assert done.ok and done.replayed_steps == 1 and calls["before s2"] == 1 and calls["after s2"] == 1


def test_resume_force_continues_a_run_held_by_a_manifest_change(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    with telo.load(MANIFEST, journal=journal) as app:
        assert app.run("order", {"order": "R-1"}).status == "parked"
    changed = MANIFEST.replace("'ship ' + steps.approve.result.by", "'shipped ' + steps.approve.result.by")
    with telo.load(changed, journal=journal) as app:
        assert app.deliver("approve:R-1", {"by": "ra"}).continued
        held = app.run("order", {"order": "R-1"})  # waits for the continuation: held, not re-run
        assert held.status == "parked" and held.parked is not None and "@manifest[" in held.parked.path
        assert "ERR_DURABLE_MANIFEST_CHANGED" in (held.parked.reason or "")
        with pytest.raises(telo.TeloError, match="ERR_DURABLE_MANIFEST_CHANGED"):
            app.resume("order:R-1")
        assert app.resume("order:R-1", force=True, reason="the new label is fine")
        done = app.result("order:R-1", wait=10)
        assert done.ok and done.step("ship")["did"] == "shipped ra"
        assert app.resume("order:R-1") is False  # settled
    assert calls["reserve R-1"] == 1


def test_resuming_a_sleeping_run_continues_it_and_it_sleeps_on() -> None:
    with telo.load(MANIFEST, clock=FakeClock()) as app:
        assert app.run("sleepy", {"id": "s3", "for": "1d"}).status == "parked"
        assert app.resume("sleepy:s3", reason="look again")
        again = app.run("sleepy", {"id": "s3", "for": "1d"})
        assert again.status == "parked" and calls["before s3"] == 1  # replayed; the sleep's wake time is kept
        assert any(e.path.startswith("override/resume/") for e in app.journal("sleepy:s3"))


def test_cancel_and_failure_are_reported_as_results() -> None:
    with telo.load(MANIFEST) as app:
        assert app.run("order", {"order": "C-1"}).status == "parked"
        assert app.cancel("order:C-1", reason="customer changed their mind")
        assert app.cancel("order:C-1") is False
        assert app.result("order:C-1").status == "cancelled"
        failed = app.run("failing")
        assert failed.status == "failed" and failed.error == telo.RunError("ERR_CARD_DECLINED", "card declined")
        assert app.status(failed.run_id).error == failed.error


def test_fork_and_restore_travel_back_to_a_checkpoint() -> None:
    with telo.load(MANIFEST) as app:
        app.run("order", {"order": "D-1"})
        app.deliver("approve:D-1", {"by": "di"})
        assert app.result("order:D-1", wait=10).ok
        checkpoints = app.checkpoints("order:D-1")
        after_reserve = next(c for c in checkpoints if c.path == "steps/reserve")
        forked = app.fork("order:D-1", after_reserve, "order:D-1-copy")
        assert forked.run_id == "order:D-1-copy" and forked.workflow == "order"
        copy = app.run("order", {"order": "D-1"})  # the original is untouched
        assert copy.ok and copy.run_id == "order:D-1"
        assert app.wait("order:D-1-copy", 10).status == "parked"  # the copy waits for its approval again
        status = app.restore("order:D-1", after_reserve)
        assert status.status in ("running", "parked")
        assert any(e.path == "@restore[1]" for e in app.journal("order:D-1"))
        assert app.wait("order:D-1", timeout=10).status == "parked"
        app.deliver("approve:D-1", {"by": "again"})
        assert app.result("order:D-1", wait=10).step("ship")["did"] == "ship again"
    assert calls["reserve D-1"] == 1  # never re-run: every copy and epoch replayed it


def test_the_journal_is_read_back_decoded() -> None:
    with telo.load(MANIFEST) as app:
        app.run("order", {"order": "E-1"})
        entries = app.journal("order:E-1")
    by_path = {e.path: e for e in entries}
    reserve = by_path["steps/reserve"]
    assert reserve.kind == "step" and reserve.target == {"kind": "ApiShop.Work", "name": "work",
                                                         "module": reserve.target["module"]}
    assert reserve.value == {"did": "reserve E-1", "n": 3, "x": 1.5} and reserve.has_value
    assert by_path["inputs"].decision == "inputs" and by_path["inputs"].value == {"order": "E-1"}
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)


def test_errors_name_what_is_wrong(tmp_path: Path) -> None:
    with telo.load(MANIFEST) as app:
        with pytest.raises(telo.TeloError) as caught:
            app.start("work")
        assert caught.value.code == "ERR_WORKFLOW_NOT_FOUND" and "order" in (caught.value.hint or "")
        with pytest.raises(telo.TeloError, match="ERR_DURABLE_RUN_NOT_FOUND"):
            app.status("nope")
        app.run("order", {"order": "F-1"})
        with pytest.raises(telo.TeloError, match="ERR_DURABLE_PAYLOAD_INVALID"):
            app.deliver("approve:F-1", {"by": 42})
        assert app.status("order:F-1").status == "parked"  # nothing was delivered
    with pytest.raises(telo.TeloError, match="ERR_APP_CLOSED"):
        app.status("order:F-1")
    two = MANIFEST + "---\nkind: Journal.Journal\nmetadata: { name: other }\npath: ./other.db\n"
    with telo.load(two) as app2, pytest.raises(telo.TeloError, match="ERR_JOURNAL_AMBIGUOUS"):
        app2.status("x")


def test_a_manifest_file_path_loads_too(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "app.yaml"
    path.write_text(MANIFEST)
    with telo.load(path) as app:
        assert app.run("order", {"order": "G-1"}).status == "parked"
    assert (tmp_path / "sub" / ".telo" / "runs.db").is_file()  # relative to the manifest's directory


def test_async_app_runs_on_the_callers_loop(tmp_path: Path) -> None:
    async def main() -> tuple[telo.RunResult, telo.RunStatus, str]:
        async with telo.AsyncApp.load(MANIFEST, journal=str(tmp_path / "a.db")) as app:
            result = await app.run("loop")
            await app.run("order", {"order": "H-1"})
            await app.deliver("approve:H-1", {"by": "async"})
            done = await app.result("order:H-1", wait=10)
            assert done.ok
            return result, await app.status("order:H-1"), threading.current_thread().name

    result, status, caller = asyncio.run(main())
    assert result.ok and status.status == "completed"
    # async kinds run on the awaiting loop's thread; sync kinds in worker threads
    assert result.step("where")["thread"] == caller


def test_the_sync_app_refuses_calls_from_its_own_loop() -> None:
    with telo.load(MANIFEST) as app:
        async def inside() -> None:
            with pytest.raises(RuntimeError, match="own event loop"):
                app.status("x")

        asyncio.run_coroutine_threadsafe(inside(), app._loop).result()
        assert app.aio.manifest is app.manifest


def test_values_cross_the_api_as_domain_values() -> None:
    @telo.kind("ApiShop.Stamp")
    def stamp(inputs: dict[str, Any]) -> dict[str, Any]:
        return {"at": Timestamp.from_epoch_millis(1_767_225_600_000), "big": 2**40}

    manifest = MANIFEST.replace("---\nkind: Shop.Where", "---\nkind: Shop.Stamp\nmetadata: { name: stamp }\n"
                                "---\nkind: Shop.Where")
    with telo.load(manifest) as app:
        from telo.builder import invoke

        app.workflow("stamped", [invoke("s", "stamp")])
        result = app.run("stamped")
    assert result.step("s") == {"at": Timestamp.from_epoch_millis(1_767_225_600_000), "big": 2**40}
