"""Version gates (issue 17; docs/changing-workflows.md): a workflow changes while runs are in flight. A run that
had gone past the gate's position before the change keeps the old branch; a new run, or one parked before the
gate's position, takes the new one; all of them complete. The effects count themselves."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import telo

effects: Counter[str] = Counter()


@telo.kind("GateShop.Work")
def work(inputs: dict[str, Any]) -> dict[str, Any]:
    effects[f"{inputs['what']} {inputs['order']}"] += 1
    return {"did": inputs["what"]}


@pytest.fixture(autouse=True)
def _clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    effects.clear()
    monkeypatch.chdir(tmp_path)


HEAD = """\
kind: Telo.Application
metadata: { name: Gates, version: 1.0.0 }
imports: { Local: durable-local, Durable: durable, Journal: durable-journal-sqlite, Shop: GateShop }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Shop.Work
metadata: { name: work }
---
kind: Durable.Await
metadata: { name: approval }
token: !cel "'approve:' + inputs.order"
---
kind: Durable.Patched
metadata: { name: fraudGate }
patch: add-fraud-check
---
kind: Local.Workflow
metadata: { name: order }
journal: !ref runs
runId: !cel "'order:' + inputs.order"
inputs: { order: !cel "inputs.order" }
steps:
"""


def step(name: str, what: str | None = None, extra: str = "") -> str:
    if what is None:  # the approval
        return f"  - {{ name: {name}, invoke: !ref approval, inputs: {{ order: !cel \"inputs.order\" }}{extra} }}\n"
    return (f"  - {{ name: {name}, invoke: !ref work, inputs: {{ what: {what}, order: !cel \"inputs.order\" }}"
            f"{extra} }}\n")


GATE = "  - { name: gate, invoke: !ref fraudGate }\n"
FRAUD = step("fraud", "fraud", ', when: !cel "steps.gate.result.patched"')


def test_a_run_past_the_gate_keeps_the_old_branch_and_a_new_run_takes_the_new_one() -> None:
    v1 = HEAD + step("charge", "charge") + step("approve") + step("ship", "ship")
    v2 = HEAD + GATE + FRAUD + step("charge", "charge") + step("approve") + step("ship", "ship")
    with telo.load(v1) as app:
        assert app.run("order", {"order": "A"}).status == "parked"  # charged, waiting for its approval
    with telo.load(v2) as app:
        assert app.run("order", {"order": "B"}).status == "parked"  # a new run: through the new branch
        for order in ("A", "B"):
            app.deliver(f"approve:{order}", {"by": "ana"})
        app.serve(until_idle=True)
        assert app.status("order:A").status == "parked"  # held: its manifest changed under it (spec §9)
        assert app.resume("order:A", force=True, reason="deployed the fraud check")
        app.serve(until_idle=True)
        assert app.status("order:A").status == "completed" and app.status("order:B").status == "completed"
        gates = {r: next(e.value for e in app.journal(r) if e.path == "steps/gate") for r in ("order:A", "order:B")}
    assert gates == {"order:A": {"patched": False, "patch": "add-fraud-check"},
                     "order:B": {"patched": True, "patch": "add-fraud-check"}}
    assert effects == Counter({"charge A": 1, "ship A": 1, "fraud B": 1, "charge B": 1, "ship B": 1})


def test_a_run_parked_before_the_gates_position_takes_the_new_branch() -> None:
    v1 = HEAD + step("approve") + step("charge", "charge")
    v2 = HEAD + step("approve") + GATE + FRAUD + step("charge", "charge")
    with telo.load(v1) as app:
        assert app.run("order", {"order": "C"}).status == "parked"  # waiting before anything was charged
    with telo.load(v2) as app:
        app.deliver("approve:C", {"by": "ana"})
        app.serve(until_idle=True)  # (held: its manifest changed)
        assert app.resume("order:C", force=True, reason="deployed the fraud check")
        app.serve(until_idle=True)
        assert app.status("order:C").status == "completed"
    assert effects == Counter({"fraud C": 1, "charge C": 1})


def test_a_gate_replays_its_decision() -> None:
    """A run decided at the gate and parked after it replays the same decision on every later execution."""
    v2 = HEAD + GATE + FRAUD + step("approve") + step("charge", "charge")
    with telo.load(v2) as app:
        assert app.run("order", {"order": "D"}).status == "parked"
        app.deliver("approve:D", {"by": "ana"})
        app.serve(until_idle=True)
        assert app.status("order:D").status == "completed"
        decisions = {e.path: e.value for e in app.journal("order:D") if e.path.startswith("steps/gate")}
    assert decisions["steps/gate"] == {"patched": True, "patch": "add-fraud-check"}
    assert decisions["steps/gate/value"] is True  # (the gate's own decision: what any replay reads)
    assert effects == Counter({"fraud D": 1, "charge D": 1})  # (the fraud check ran once, not again on replay)


def test_a_deprecated_gate_says_patched_to_every_run() -> None:
    v1 = HEAD + step("charge", "charge") + step("approve") + step("ship", "ship")
    v3 = (HEAD.replace("patch: add-fraud-check", "patch: add-fraud-check\ndeprecated: true")
          + GATE + FRAUD + step("charge", "charge") + step("approve") + step("ship", "ship"))
    with telo.load(v1) as app:
        app.run("order", {"order": "E"})
    with telo.load(v3) as app:
        app.deliver("approve:E", {"by": "ana"})
        app.serve(until_idle=True)
        assert app.resume("order:E", force=True)
        app.serve(until_idle=True)
        assert app.status("order:E").status == "completed"
    assert effects["fraud E"] == 1  # deprecated: even a run past it takes the new branch


# --- which changes are safe for a held run (telo.durable.safe_change), and resuming only those -----------------

WORK2 = "---\nkind: Shop.Work\nmetadata: { name: work2 }\n"


def held_with(v2: str, tmp_path: Path) -> list[Any]:
    """Run A (v1: charge, approve, ship) charged and parked at its approval; delivered under ``v2``, it is held;
    the held runs as ``v2`` assesses them."""
    from telo.manifest import load_manifest
    from telo.operations import held

    v1 = HEAD + step("charge", "charge") + step("approve") + step("ship", "ship")
    with telo.load(v1) as app:
        app.run("order", {"order": "A"})
    (tmp_path / "v2.yaml").write_text(v2)
    with telo.load(v2) as app:
        app.deliver("approve:A", {"by": "ana"})
        app.serve(until_idle=True)
        store = app.application.resources["runs"].store  # type: ignore[attr-defined]
        return held.held_runs(store, "order", load_manifest(str(tmp_path / "v2.yaml")))


@pytest.mark.parametrize(("v2", "safe"), [
    (HEAD + GATE + FRAUD + step("charge", "charge") + step("approve") + step("ship", "ship"), True),
    (HEAD + step("charge", "charge") + step("approve") + step("ship", "ship") + step("ship2", "ship2"), True),
    (HEAD + step("charge", "charge", ', when: !cel "true"') + step("approve") + step("ship", "ship"), True),
])
def test_a_change_after_the_runs_position_or_behind_a_gate_is_safe(tmp_path: Path, v2: str, safe: bool) -> None:
    [run] = held_with(v2, tmp_path)
    assert run.safety is not None and run.safety.safe and run.to_json()["safe"] is True


@pytest.mark.parametrize(("v2", "reason"), [
    (HEAD + step("fraud", "fraud") + step("charge", "charge") + step("approve") + step("ship", "ship"),
     "steps/fraud: a new step before where the run is, not behind a Durable.Patched gate"),
    (HEAD + step("approve") + step("ship", "ship"),
     "steps/charge: the run recorded entries under this step; the new workflow has no step 'charge' there"),
    (HEAD + step("charge", "charge").replace("!ref work", "!ref work2") + step("approve") + step("ship", "ship")
     + WORK2, "steps/charge: the run recorded GateShop.Work 'work'; the new workflow invokes GateShop.Work 'work2'"),
])
def test_a_change_before_the_runs_position_is_not_safe_and_says_why(tmp_path: Path, v2: str, reason: str) -> None:
    [run] = held_with(v2, tmp_path)
    assert run.safety is not None and not run.safety.safe
    assert any(r.startswith(reason) for r in run.safety.reasons), run.safety.reasons


def test_resume_safe_resumes_only_the_held_runs_the_change_is_safe_for(tmp_path: Path) -> None:
    """P waits at its first approval (nothing done); Q got past it and charged, and waits at the second. A new
    fraud check before the charge, ungated, is safe for P and not for Q: `--safe` resumes P alone."""
    from click.testing import CliRunner

    from telo.cli.main import cli

    first = step("first").replace("!ref approval", "!ref approval1")
    head = HEAD.replace("---\nkind: Durable.Patched", "---\nkind: Durable.Await\nmetadata: { name: approval1 }\n"
                        "token: !cel \"'first:' + inputs.order\"\n---\nkind: Durable.Patched")  # (a second await)
    v1 = head + first + step("charge", "charge") + step("approve") + step("ship", "ship")
    v2 = head + first + step("fraud", "fraud") + step("charge", "charge") + step("approve") + step("ship", "ship")
    with telo.load(v1) as app:
        app.run("order", {"order": "P"})
        app.run("order", {"order": "Q"})
        app.deliver("first:Q", {"by": "ana"})
        app.serve(until_idle=True)
        assert app.status("order:Q").status == "parked"
    (tmp_path / "m.yaml").write_text(v2)
    with telo.load(v2) as app:
        app.deliver("first:P", {"by": "ana"})
        app.deliver("approve:Q", {"by": "ana"})
        app.serve(until_idle=True)
    out = CliRunner().invoke(cli, ["resume", "--workflow", "order", "--safe", "--manifest", "m.yaml"])
    assert out.exit_code == 1, out.output  # (one held run was not resumed)
    lines = sorted(out.output.splitlines()[:2])
    assert lines[0].startswith("run 'order:P' (order): changed: order — safe — resumed")
    assert lines[1].startswith("run 'order:Q' (order): changed: order — not safe: steps/fraud: a new step before")
    assert "not resumed: the change is not safe for it" in lines[1]
    with telo.load(v2) as app:
        app.serve(until_idle=True)
        assert app.status("order:P").status == "parked"  # (resumed: on to its second approval)
        assert app.status("order:P").parked is not None and "approve" in str(app.status("order:P").parked)
        assert "@manifest" in str(app.status("order:Q").parked)  # still held
    assert effects == Counter({"charge Q": 1, "fraud P": 1, "charge P": 1})


def test_telo_check_says_when_no_live_run_needs_the_old_branch(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from telo.cli.main import cli

    v1 = HEAD + step("charge", "charge") + step("approve") + step("ship", "ship")
    v2 = HEAD + GATE + FRAUD + step("charge", "charge") + step("approve") + step("ship", "ship")
    (tmp_path / "m.yaml").write_text(v2)

    def gate_warnings() -> list[str]:
        out = CliRunner().invoke(cli, ["check", "m.yaml"])
        assert out.exit_code == 0, out.output
        return [line for line in out.output.splitlines() if "GATE_DEPRECATABLE" in line]

    assert gate_warnings() == []  # (no journal yet: nothing in flight, nothing said)
    with telo.load(v1) as app:
        app.run("order", {"order": "A"})  # started before the gate: it needs the old branch
    with telo.load(v2) as app:
        app.run("order", {"order": "B"})
    assert gate_warnings() == []
    with telo.load(v2) as app:
        app.deliver("approve:A", {"by": "ana"})
        app.serve(until_idle=True)
        app.resume("order:A", force=True)
        app.serve(until_idle=True)
        assert app.status("order:A").status == "completed"
    [warning] = gate_warnings()  # B is live, but it recorded the gate: it replays its own decision
    assert "version gate 'fraudGate' (patch 'add-fraud-check'): none needs its old branch" in warning
    assert "deprecated: true" in warning


def guarded(body: str) -> str:
    """``body`` (step lines) inside a try step ``guarded``."""
    return "  - name: guarded\n    try:\n" + "".join("    " + line + "\n" for line in body.splitlines())


@pytest.mark.parametrize(("v1", "v2", "reason"), [
    # (a review found each of these called safe before; the last one then charged twice under --safe)
    (guarded(step("charge", "charge") + step("approve")), step("fraud", "fraud") + guarded(
        step("charge", "charge") + step("approve")), "steps/fraud: a new step before where the run is"),
    (guarded(step("charge", "charge") + step("approve")), guarded(step("charge2", "charge") + step("approve")),
     "steps/guarded/try/charge: the run recorded entries under this step; the new workflow has no step 'charge'"),
    (step("charge", "charge") + step("approve"), GATE + step("fraud", "fraud", ', when: !cel '
     '"!steps.gate.result.patched"') + step("charge", "charge") + step("approve"), "steps/fraud: a new step before"),
    (step("charge", "charge") + step("approve"), step("charge", "charge") + step("fraud", "fraud") + step("approve"),
     "steps/fraud: a new step before where the run is"),  # (its position is its await, not its last receipt)
])
def test_a_change_inside_a_branch_or_before_a_wait_is_not_safe(tmp_path: Path, v1: str, v2: str,
                                                              reason: str) -> None:
    from telo.durable.safe_change import assess
    from telo.journal import eventlog
    from telo.manifest import load_manifest

    with telo.load(HEAD + v1) as app:
        assert app.run("order", {"order": "A"}).status == "parked"
        store = app.application.resources["runs"].store  # type: ignore[attr-defined]
        entries = eventlog.recover(store, "order:A", store.read_run("order:A")).entries
    (tmp_path / "v2.yaml").write_text(HEAD + v2)
    verdict = assess(load_manifest(str(tmp_path / "v2.yaml")), "order", entries)
    assert not verdict.safe and any(r.startswith(reason) for r in verdict.reasons), verdict.reasons


flaky_calls: Counter[str] = Counter()


@telo.kind("GateShop.Flaky")
def flaky(inputs: dict[str, Any]) -> dict[str, Any]:
    flaky_calls[inputs["what"]] += 1
    if flaky_calls[inputs["what"]] == 1:
        raise telo.TeloError("ERR_TRANSIENT", "try again later")
    effects[f"{inputs['what']} {inputs['order']}"] += 1
    return {"ok": True}


def test_a_run_waiting_out_a_retry_before_the_gate_takes_the_new_branch() -> None:
    """The run parked in its first step's retry backoff: its journal holds that step's attempt records, which a
    replay reads only by entering the step — they say nothing about having gone past the gate (a review found
    the gate answering `false` here)."""
    from telo.clock import FakeClock

    flaky_calls.clear()
    reserve = ('  - { name: reserve, invoke: !ref flaky, inputs: { what: reserve, order: !cel "inputs.order" }, '
               'retry: { attempts: 3, initialDelay: 1h, jitter: none } }\n')
    head = HEAD + reserve
    head = head.replace("---\nkind: Durable.Patched", "---\nkind: Shop.Flaky\nmetadata: { name: flaky }\n"
                        "---\nkind: Durable.Patched")
    clock = FakeClock()
    with telo.load(head + step("charge", "charge"), clock=clock) as app:
        assert app.run("order", {"order": "R"}).status == "parked"  # reserve failed once: waiting an hour
    clock.advance(seconds=3700)
    with telo.load(head + GATE + FRAUD + step("charge", "charge"), clock=clock) as app:
        app.serve(until_idle=True)  # held: its manifest changed
        assert app.resume("order:R", force=True)
        app.serve(until_idle=True)
        assert app.status("order:R").status == "completed"
        gate = next(e.value for e in app.journal("order:R") if e.path == "steps/gate")
    assert gate == {"patched": True, "patch": "add-fraud-check"}
    assert effects == Counter({"reserve R": 1, "fraud R": 1, "charge R": 1})
