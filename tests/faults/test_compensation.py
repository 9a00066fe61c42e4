"""A crash inside a compensation resumes there, with the same error as without the crash (issue 12, case 4).

Observed before: a step that raised left no entry. When the process died inside the ``catch`` that
compensated for a failed charge (a refund), the rerun found the charge's intent without a receipt, parked on it
as "may or may not have happened", and needed ``telo resolve --fail``; ``--skip-with`` would have skipped the
refund; and after ``--fail`` the catch saw another ``error.message`` than without the crash. DBOS, under the
same crash, replays the recorded exception and re-runs the compensation by itself.

Here ``charge`` (never to be repeated blindly: the default ``park`` policy) fails; its failure is its receipt.
A control run settles without a crash. In the other run the process is SIGKILLed inside the refund; a plain
rerun — no operator — replays the charge's failure, re-drives the refund with its key, and completes with the
same result, the refund told the same error.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import pytest

from tests.faults.conftest import KINDS
from tests.faults.support import Payments

FAIL = {"FAULT_FAIL_CHARGE": "1"}


def _result(flow: Payments, run: str) -> Any:
    record = flow.record(run)
    assert record.status == "completed", f"{run}: {record!r}"
    steps = record.decoded_result()["steps"]
    because = steps["refund"]["result"]["because"]
    return {**because, "message": because["message"].replace(run, "<run>")}


@pytest.mark.parametrize("kind", KINDS)
def test_a_crash_inside_the_refund_resumes_with_the_same_error(kind: str, payments: Callable[..., Payments]) -> None:
    flow = payments(kind, saga=True)
    control = flow.run("pay:control", label="control", env=FAIL)
    assert control.wait(60) == 0, control.output()
    expected = _result(flow, "pay:control")
    assert expected["code"] == "ERR_EXECUTION_FAILED" and "card declined" in expected["message"], expected

    run = "pay:crashed"
    a = flow.run(run, label="a", env={**FAIL, "FAULT_REFUND_MS": "5000"})
    flow.wait_for_line("refund", a.pid)
    a.signal(signal.SIGKILL)
    a.wait(30)
    again = flow.run(run, label="again", env=FAIL)
    assert again.wait(60) == 0, again.output()
    ctx = f"[{kind}]"
    assert flow.record(run).status == "completed", f"{ctx} the rerun did not finish by itself: {flow.record(run)!r}"
    assert _result(flow, run) == expected, f"{ctx} the catch saw another error after the crash"
    steps = [line.step for line in flow.lines() if line.key.startswith(run)]
    assert steps.count("charge") == 1, f"{ctx} the failed charge ran again: {steps}"
    assert steps.count("refund") == 2 and steps.count("notify") == 1, f"{ctx} {steps}"
