"""Failures are receipts (event-log spec §1: the receipt carries the effect's outcome; issue 12, case 4).

A step whose effect raised records its outcome — code, message, data — at ``<step>/@failed``, durable under
the same rules as a success entry; a resumed run replays it: the effect is not executed again, and the error
raised — what a ``catch`` sees, what fails the run — is the same as without the crash. Before, a failure left
no entry: a process that died inside the ``catch`` compensating for a failed charge came back to a charge
"that may or may not have happened", parked for an operator, and ``--fail`` then gave the catch another error.
"""

from __future__ import annotations

from typing import Any

import pytest

from telo import paths
from telo.durable.effects import EffectPolicy
from telo.durable.execute import WorkflowBody
from telo.engine.steps import compile_steps
from telo.errors import TeloError
from telo.journal import eventlog
from telo.journal.store import Store
from tests.durable.test_execute import Crash, body, execute
from tests.unit.engine.fakes import DictCompiler, Target


def _declined(i: Any) -> Any:
    raise TeloError("ERR_CARD_DECLINED", "card declined", data={"card": "4242", "amount": 5})


def test_a_failed_step_records_its_outcome_as_its_receipt(store: Store) -> None:
    charge = Target("charge", fn=_declined)
    result = execute(store, "f", body([{"name": "charge", "invoke": charge}]))
    assert result.status == "failed" and result.error == {"code": "ERR_CARD_DECLINED", "message": "card declined"}
    entries = eventlog.recover(store, "f").entries
    receipt = entries[paths.failure_path("steps/charge")]
    assert receipt.kind == "decision" and receipt.decision == "failure"
    assert receipt.decode("f") == {"code": "ERR_CARD_DECLINED", "message": "card declined",
                                   "data": {"card": "4242", "amount": 5}}
    assert [e.kind for e in eventlog.events(store, "f") if e.path.startswith("steps/charge")] == [
        eventlog.EventKind.EFFECT_INTENT, eventlog.EventKind.EFFECT_RECEIPT]


def test_a_replayed_failure_raises_the_same_error_without_executing_again(store: Store) -> None:
    charge = Target("charge", fn=_declined)
    wf = body([{"name": "charge", "invoke": charge}])
    first = execute(store, "f", wf)
    store.update_run("f", status="running", error=None)  # run it again: the failure replays
    again = execute(store, "f", wf)
    assert len(charge.calls) == 1
    assert again.status == "failed" and again.error == first.error


def _saga(charge: Target, refund: Target, audit: Target) -> WorkflowBody:
    raw = [{"name": "pay", "try": [{"name": "charge", "invoke": charge}],
            "catch": [{"name": "refund", "invoke": refund, "inputs": lambda s: {"error": s["error"]}},
                      {"name": "audit", "invoke": audit, "inputs": lambda s: {"error": s["error"]}}]}]
    modes = {"charge": "park", "refund": "redrive", "audit": "redrive"}

    def policy(target: Any) -> EffectPolicy:
        return EffectPolicy(modes.get(target.get("name", ""), "redrive")) if target else EffectPolicy()

    return WorkflowBody("saga", compile_steps(raw, DictCompiler(), where="test"), effect_policy=policy)


def test_a_crash_inside_the_compensation_resumes_there_with_the_same_error(store: Store) -> None:
    """The charge (park policy: never repeated blindly) fails; the process dies inside the refund. The rerun
    neither parks on the charge nor executes it again: it replays its failure, and the catch — the refund,
    re-driven with its key, then the audit — sees the error it saw the first time."""
    charge = Target("charge", fn=_declined)
    died: list[bool] = []

    def refund_once(i: Any) -> Any:
        if not died:
            died.append(True)
            raise Crash()  # the process dies mid-refund: nothing after this runs, nothing settles the run
        return {"refunded": True}

    refund, audit = Target("refund", fn=refund_once), Target("audit", fn=lambda i: "noted")
    wf = _saga(charge, refund, audit)
    with pytest.raises(Crash):
        execute(store, "s", wf)
    done = execute(store, "s", wf)
    assert done.status == "completed", done
    assert len(charge.calls) == 1  # replayed: not unconfirmed, not executed again
    seen_first, seen_again = refund.calls[0]["error"], refund.calls[1]["error"]
    assert seen_first == seen_again == {"code": "ERR_CARD_DECLINED", "message": "card declined",
                                        "data": {"card": "4242", "amount": 5}, "step": "pay"}
    assert audit.calls == [{"error": seen_first}]


def test_a_python_exception_fails_identically_on_the_first_pass_and_on_replay(store: Store) -> None:
    def boom(i: Any) -> Any:
        raise ValueError("no such account")

    flaky = Target("lookup", fn=boom)
    wf = body([{"name": "lookup", "invoke": flaky}])
    first = execute(store, "p", wf)
    store.update_run("p", status="running", error=None)
    again = execute(store, "p", wf)
    assert first.status == again.status == "failed" and first.error == again.error
    assert first.error is not None and first.error["code"] == "ERR_EXECUTION_FAILED"
    assert "ValueError: no such account" in first.error["message"] and len(flaky.calls) == 1


def test_a_retried_step_records_only_its_final_failure(store: Store) -> None:
    calls: list[int] = []

    def always(i: Any) -> Any:
        calls.append(1)
        raise TeloError("ERR_DOWN", f"down ({len(calls)})")

    wf = body([{"name": "call", "invoke": Target("call", fn=always),
                "retry": {"attempts": 2, "initialDelay": 0, "jitter": "none"}}])
    result = execute(store, "r", wf)
    assert result.status == "failed" and len(calls) == 3
    entries = eventlog.recover(store, "r").entries
    assert entries[paths.failure_path("steps/call")].decode("r")["message"] == "down (3)"
    assert {p for p in entries if "@retry" in p} == {"steps/call/@retry[0]", "steps/call/@retry[1]"}


def test_an_error_whose_data_cannot_be_journaled_is_recorded_and_raised_without_it(store: Store) -> None:
    class Opaque:
        pass

    def odd(i: Any) -> Any:
        raise TeloError("ERR_ODD", "odd failure", data={"thing": Opaque()})

    wf = _catching(Target("odd", fn=odd))
    first = execute(store, "o", wf)
    store.update_run("o", status="running")
    again = execute(store, "o", wf)
    assert first.result == again.result
    assert first.result is not None
    seen = first.result["steps"]["seen"]["result"]
    assert seen["code"] == "ERR_ODD" and seen["message"] == "odd failure" and "thing" not in str(seen)


def _catching(target: Target) -> WorkflowBody:
    raw = [{"name": "t", "try": [{"name": "odd", "invoke": target}],
            "catch": [{"name": "seen", "value": lambda s: s["error"]}]}]
    return WorkflowBody("c", compile_steps(raw, DictCompiler(), where="test"))


def test_a_step_list_with_a_duplicate_name_is_refused_inside_a_durable_run(store: Store) -> None:
    """A Run.Sequence target may repeat a name (upstream: the later result overwrites); invoked inside a durable
    run, its second step would replay the first's receipt, so the list is refused before either runs."""
    first, second = Target("first"), Target("second")
    result = execute(store, "d", body([{"name": "pay", "invoke": first}, {"name": "pay", "invoke": second}]))
    assert result.status == "failed" and result.error is not None
    assert result.error["code"] == "ERR_DUPLICATE_STEP_NAME" and "'pay'" in result.error["message"]
    assert first.calls == second.calls == []


class _Sequence:
    """A composite target (as Run.Sequence): its steps continue the dispatching step's path."""

    kind, module = "Test.Sequence", "file:///test.yaml"

    def __init__(self, name: str, raw: list[dict[str, Any]]) -> None:
        self.name = name
        self.steps = compile_steps(raw, DictCompiler(), where=name)

    async def invoke(self, inputs: Any) -> Any:
        from telo.engine.interpreter import Services, run_steps

        scope: dict[str, Any] = {"inputs": inputs, "steps": {}}
        await run_steps(self.steps, scope, Services())
        return {"done": True}


def test_inside_a_retried_step_a_failure_is_no_receipt_so_the_next_attempt_runs_it_again(store: Store) -> None:
    """Found in review: a failure receipt recorded inside a retried composite was replayed by its next attempt —
    but only in a resumed execution (a fresh one skipped the lookup), so the run failed or completed depending on
    whether it had been interrupted. Inside a retried step, failures are not receipts; its final outcome is."""
    flaky_calls: list[int] = []

    def flaky(i: Any) -> Any:
        flaky_calls.append(1)
        if len(flaky_calls) == 1:
            raise TeloError("ERR_FLAKY", "first time")
        return "ok"

    crashed: list[bool] = []

    def crash_once(i: Any) -> Any:
        if not crashed:
            crashed.append(True)
            raise Crash()
        return "before"

    outer = _Sequence("outer", [{"name": "inner", "invoke": Target("inner", fn=flaky)}])
    wf = body([{"name": "before", "invoke": Target("before", fn=crash_once)},
               {"name": "outer", "invoke": outer, "retry": {"attempts": 1, "initialDelay": 0, "jitter": "none"}}])
    with pytest.raises(Crash):
        execute(store, "rt", wf)
    done = execute(store, "rt", wf)  # resumed: the journal holds the first execution's entries
    assert done.status == "completed", done.error
    assert len(flaky_calls) == 2
    assert paths.failure_path("steps/outer/inner") not in eventlog.recover(store, "rt").entries


def test_an_effects_own_error_with_a_journal_code_fails_the_body_and_replays(store: Store) -> None:
    """Found in review: an effect raising, say, ERR_JOURNAL_WRITE_FAILED (its own journal failed) was taken
    for a halt of this execution, on its first pass and on every replay of its receipt — the run was never
    settled. Who raised it decides: an effect's error is the body's failure."""
    calls: list[int] = []

    def child_journal_full(i: Any) -> Any:
        calls.append(1)
        raise TeloError("ERR_JOURNAL_WRITE_FAILED", "the child's journal is full")

    wf = body([{"name": "spawn", "invoke": Target("spawn", fn=child_journal_full)}])
    first = execute(store, "h", wf)
    assert first.status == "failed" and first.error is not None and first.error["code"] == "ERR_JOURNAL_WRITE_FAILED"
    store.update_run("h", status="running", error=None)
    again = execute(store, "h", wf)
    assert again.status == "failed" and again.error == first.error and len(calls) == 1
