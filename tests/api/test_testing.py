"""telo.testing: the pytest plugin's fixtures and helpers, used directly and from a user's test suite."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import telo
from telo.clock import FakeClock
from telo.testing import advance, assert_replayed, deliver, settle, track

pytest_plugins = ["pytester"]

ran: Counter[str] = Counter()


@telo.kind("PlugT.Work", idempotent=True)
def work(inputs: dict[str, Any]) -> str:
    ran[inputs["label"]] += 1
    return f"did {inputs['label']}"


MANIFEST = """\
kind: Telo.Application
metadata: { name: PluginTests }
imports: { P: PlugT, Local: durable-local, Durable: durable, Journal: durable-journal-sqlite }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./never-used.db
---
kind: P.Work
metadata: { name: work }
---
kind: Durable.Await
metadata: { name: approval }
token: !cel "'approve:' + inputs.id"
---
kind: Durable.Sleep
metadata: { name: coolOff }
for: 2h
---
kind: Local.Workflow
metadata: { name: order }
journal: !ref runs
runId: !cel "'order:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - { name: reserve, invoke: !ref work, inputs: { label: !cel "'reserve ' + inputs.id" } }
  - { name: approve, invoke: !ref approval, inputs: { id: !cel "inputs.id" } }
  - { name: nap, invoke: !ref coolOff }
  - { name: ship, invoke: !ref work, inputs: { label: !cel "'ship ' + inputs.id" } }
  - { name: nap2, invoke: !ref coolOff }
  - { name: done, invoke: !ref work, inputs: { label: !cel "'done ' + inputs.id" } }
"""


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ran.clear()


def test_the_fixtures_give_a_journal_a_clock_and_apps(telo_journal: str, telo_clock: FakeClock,
                                                      telo_app: Callable[..., telo.App]) -> None:
    assert telo_journal.endswith(".db") and not Path(telo_journal).exists()
    app = telo_app(MANIFEST)
    assert app.clock is telo_clock
    assert app.run("order", {"id": "1"}).status == "parked"
    assert Path(telo_journal).is_file() and not Path("never-used.db").exists()


def test_settle_fires_durable_sleeps_and_deliver_waits_for_rest(telo_app: Callable[..., telo.App],
                                                                telo_clock: FakeClock) -> None:
    app = telo_app(MANIFEST)
    start = telo_clock.now_ms()
    assert app.run("order", {"id": "2"}).status == "parked"
    after = deliver(app, "approve:2", {"ok": True})
    assert after.status == "parked" and after.due_at == start + 2 * 3_600_000  # the first sleep
    done = settle(app, "order:2")
    assert done.ok and done.step("done") == "did done 2"
    assert telo_clock.now_ms() == start + 4 * 3_600_000  # moved exactly to each due time
    assert ran == {"reserve 2": 1, "ship 2": 1, "done 2": 1}
    with pytest.raises(AssertionError, match="no run is parked"):
        deliver(app, "approve:2")


def test_advance_runs_what_became_due(telo_app: Callable[..., telo.App]) -> None:
    app = telo_app(MANIFEST)
    app.run("order", {"id": "3"})
    app.deliver("approve:3", {})
    assert app.wait("order:3").status == "parked"
    assert advance(app, seconds=60) == 0
    assert advance(app, seconds=2 * 3600) == 1
    assert app.status("order:3").due_at is not None and ran["ship 3"] == 1


def test_assert_replayed_after_a_restart(telo_app: Callable[..., telo.App]) -> None:
    first = telo_app(MANIFEST)
    first.run("order", {"id": "4"})
    first.close()  # the process "ends" while the run waits for its approval
    second = telo_app(MANIFEST)
    deliver(second, "approve:4", {"by": "ada"})
    assert_replayed(second, "order:4", "reserve", "approve")
    settle(second, "order:4")
    assert_replayed(second, "order:4", "reserve", "ship")
    assert ran["reserve 4"] == 1
    with pytest.raises(AssertionError, match="not among the steps"):
        assert_replayed(second, "order:4", "nosuchstep")


def test_deliver_waits_for_the_tracker_to_see_the_execution_end(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """When another executor of the app (its resumer) takes the delivered run, the status rests before that
    execution's end event reaches the tracker: assert_replayed right after deliver failed 'was not executed by
    this app' in a CI run under load. Here the delivery's own continue is refused and another thread executes
    the run a moment later."""
    import threading
    import time

    (tmp_path / "app.yaml").write_text(MANIFEST)
    with telo.load(tmp_path / "app.yaml", journal=str(tmp_path / "j.db"), clock=FakeClock()) as app:
        track(app)
        app.run("order", {"id": "6"})

        original, refused = type(app.aio)._continue, []

        async def taken_elsewhere(self: Any, run: str, *, background: bool) -> bool:
            if not refused:  # the delivery's own continue
                refused.append(run)
                return False
            return await original(self, run, background=background)

        monkeypatch.setattr(type(app.aio), "_continue", taken_elsewhere)
        other = threading.Thread(target=lambda: (time.sleep(0.1), app.run_due()))
        other.start()
        rested = deliver(app, "approve:6", {"by": "ada"})
        assert_replayed(app, "order:6", "reserve", "approve")
        assert rested.status == "parked" and rested.due_at is not None  # at its sleep, not the run before it ran
        other.join(10)


def test_assert_replayed_fails_for_a_run_that_re_ran(telo_app: Callable[..., telo.App]) -> None:
    app = telo_app(MANIFEST)
    app.run("order", {"id": "5"})
    app.restore("order:5", 0)  # back to the start: every step executes again
    assert app.wait("order:5").status == "parked"
    assert ran["reserve 5"] == 2
    with pytest.raises(AssertionError, match="re-ran instead of replaying"):
        assert_replayed(app, "order:5")


def test_helpers_refuse_what_they_cannot_do(tmp_path: Path) -> None:
    with telo.load(MANIFEST, journal="memory:") as app:
        with pytest.raises(TypeError, match="FakeClock"):
            settle(app, "x")
        with pytest.raises(AssertionError, match="tracked app"):
            assert_replayed(app, "x")
        assert track(app) is app and track(app) is app
        with pytest.raises(AssertionError, match="not executed by this app"):
            assert_replayed(app, "x")


def test_a_users_suite_gets_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", orders=MANIFEST_USER)
    pytester.makepyfile(test_orders='''
        import telo
        from telo.testing import assert_replayed, deliver, settle

        calls = []

        @telo.kind("PlugUser.Charge", key_consuming=True)
        def charge(inputs, ctx):
            calls.append(ctx.idempotency_key)
            return {"charged": inputs["amount"]}

        def test_an_order_charges_once(telo_app, telo_clock):
            app = telo_app("orders.yaml")
            assert app.run("order", {"id": "u1", "amount": 12.5}).status == "parked"
            after = deliver(app, "approve:u1", {"by": "ada"})
            assert after.status == "parked"  # cooling off, on the fake clock
            done = settle(app, "order:u1")
            assert done.ok and done.step("charge") == {"charged": 12.5}
            assert calls == ["order:u1/steps/charge"]
            assert_replayed(app, "order:u1", "charge")
    ''')
    result = pytester.runpytest("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


MANIFEST_USER = """\
kind: Telo.Application
metadata: { name: UserSuite }
imports: { Shop: PlugUser, Local: durable-local, Durable: durable, Journal: durable-journal-sqlite }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./orders.db
---
kind: Shop.Charge
metadata: { name: charge }
---
kind: Durable.Await
metadata: { name: approval }
token: !cel "'approve:' + inputs.id"
---
kind: Durable.Sleep
metadata: { name: coolOff }
for: 1d
---
kind: Local.Workflow
metadata: { name: order }
journal: !ref runs
runId: !cel "'order:' + inputs.id"
inputs: { id: !cel "inputs.id", amount: !cel "inputs.amount" }
steps:
  - { name: charge, invoke: !ref charge, inputs: { amount: !cel "inputs.amount" } }
  - { name: approve, invoke: !ref approval, inputs: { id: !cel "inputs.id" } }
  - { name: coolOff, invoke: !ref coolOff }
"""


def test_the_fake_clock_starts_at_the_real_now(telo_clock: FakeClock, telo_journal: str) -> None:
    """It started at 2026-01-01: a run admitted under the real clock and continued under it settled before it
    was created (updated_at < created_at)."""
    from telo.clock import SYSTEM_CLOCK

    before = SYSTEM_CLOCK.now_ms()
    with telo.load(MANIFEST, journal=telo_journal) as real:  # admitted under the real clock
        assert real.run("order", {"id": "r"}).status == "parked"
    assert abs(telo_clock.now_ms() - before) < 60_000
    with telo.load(MANIFEST, journal=telo_journal, clock=telo_clock) as app:
        deliver(app, "approve:r", {})
        assert settle(app, "order:r").ok
        record = app.status("order:r")
    assert record.status == "completed", record
    assert record.updated_at is not None and record.created_at is not None
    assert record.updated_at >= record.created_at


def test_wait_parked_waits_for_a_run_started_elsewhere_and_for_its_token(telo_app: Callable[..., telo.App]) -> None:
    from telo.builder import invoke
    from telo.testing import wait_parked

    app = telo_app(MANIFEST)
    app.workflow("twice", [invoke("first", "approval", {"id": "t-1"}), invoke("second", "approval", {"id": "t-2"})],
                 run_id="twice")
    app.start("twice")  # returns at once: the run parks in the background
    first = wait_parked(app, "twice")
    assert first.parked is not None and first.parked.token == "approve:t-1"
    app.deliver("approve:t-1", {"ok": 1})  # continues in the background, parks again on the next token
    second = wait_parked(app, "twice", token="approve:t-2")
    assert second.status == "parked" and second.parked is not None and second.parked.path == "steps/second"
    with pytest.raises(AssertionError, match=r"not parked on token 'approve:nope' within 0.2 s: it is parked at "
                       r"steps/second \(token approve:t-2\)"):
        wait_parked(app, "twice", token="approve:nope", timeout=0.2)
    with pytest.raises(AssertionError, match=r"run nobody was not parked within 0\.1 s: it does not exist"):
        wait_parked(app, "nobody", timeout=0.1)
    app.cancel("twice")
    with pytest.raises(AssertionError, match="run twice cancelled without parking on token 'approve:t-3'"):
        wait_parked(app, "twice", token="approve:t-3")


def test_a_test_loads_the_manifest_under_test_and_adds_its_own_resources(tmp_path: Path,
                                                                         telo_app: Callable[..., telo.App]) -> None:
    """One way for a test to reuse the workflow manifest under test: load that file (its relative paths resolve
    against it) and add test-only workflows with the builder, which invoke its resources by name. (A test
    manifest may import it instead: tests/api/test_imported_application.py.)"""
    from telo.builder import cel, invoke
    from telo.testing import wait_parked

    (tmp_path / "app").mkdir()
    under_test = tmp_path / "app" / "orders.yaml"
    under_test.write_text(MANIFEST)
    app = telo_app(under_test)
    app.workflow("probe", [invoke("w", "work", {"label": cel("'probe ' + inputs.id")})],
                 inputs={"id": cel("inputs.id")})
    assert app.run("probe", {"id": "1"}).step("w") == "did probe 1"
    app.start("order", {"id": "p-1"})
    assert wait_parked(app, "order:p-1", token="approve:p-1").parked is not None
