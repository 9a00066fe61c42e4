"""An ordinary stop never turns an effect in flight into an operator task (issue 12, case 5).

Observed before: Ctrl-C on ``telo run`` during a 3 s non-idempotent charge waited for the charge, then exited
without writing its receipt; SIGTERM killed a worker at once. Either way the next execution found the charge
"may or may not have happened" and parked it for an operator.

Now SIGTERM or SIGINT drains (telo/durable/shutdown.py): the running charge finishes and its receipt is written,
nothing new starts (``notify`` is left to the next worker), the claim is released, and the process exits
128 + the signal. A second worker finishes the run at once — charging nothing again. A second signal stops at
once: that is the crash path, and the charge then is unconfirmed, exactly as after ``kill -9``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from telo.journal.sqlite import SqliteStore
from tests.faults.conftest import KINDS
from tests.faults.support import CHARGE, Payments, Proc

CHARGE_MS = "2000"


def _start_and_signal(flow: Payments, run: str, sig: int, *, worker: bool) -> Proc:
    env = {"FAULT_CHARGE_MS": CHARGE_MS}
    if worker:
        with flow.open() as store:  # admitted as a start would: a worker then takes it
            from telo.journal.model import Admission

            store.admit(Admission.of(run, workflow="pay", inputs={"id": run}))
        a = flow.worker(label="a", env=env, until_idle=False)
    else:
        a = flow.run(run, label="a", env=env)
    flow.wait_for_line("charge", a.pid)
    a.signal(sig)
    return a


@pytest.mark.parametrize(("kind", "sig", "worker"), [
    ("sqlite", signal.SIGINT, False), ("file", signal.SIGTERM, False), ("postgres", signal.SIGTERM, False),
    ("sqlite", signal.SIGTERM, True), ("file", signal.SIGINT, True), ("postgres", signal.SIGTERM, True),
])
def test_a_signal_lets_the_running_charge_finish_record_its_receipt_and_hand_the_run_over(
        kind: str, sig: int, worker: bool, payments: Callable[..., Payments]) -> None:
    flow = payments(kind)
    run = f"pay:{signal.Signals(sig).name.lower()}"
    began = time.monotonic()
    a = _start_and_signal(flow, run, sig, worker=worker)
    code = a.wait(30)
    ctx = f"[{kind} {'worker' if worker else 'run'} {signal.Signals(sig).name}]"
    assert code == 128 + sig, f"{ctx} exited {code}:\n{a.output()}"
    assert time.monotonic() - began < 15, f"{ctx} took too long to stop"
    record = flow.record(run)
    assert record.status == "running" and record.claim is None, f"{ctx} not handed over: {record!r}"
    with flow.open() as store:
        paths = {e.path for e in store.read_entries(run)}
    assert "steps/charge" in paths and "steps/notify" not in paths, f"{ctx} {sorted(paths)}"
    assert "finishing the effects in flight" in a.output(), a.output()
    if not worker:  # `telo run` names the run it left
        assert "ERR_DURABLE_SHUTTING_DOWN" in a.output(), a.output()
    b = flow.worker(label="b")
    assert b.wait(60) == 0, b.output()
    assert flow.record(run).status == "completed"
    steps = Counter((line.step, "a" if line.pid == a.pid else "b") for line in flow.lines())
    assert steps == {("prepare", "a"): 1, ("charge", "a"): 1, ("notify", "b"): 1}, f"{ctx} {flow.lines()}"


@pytest.mark.parametrize("kind", KINDS)
def test_a_drain_before_an_effect_that_must_not_repeat_leaves_no_operator_task(
        kind: str, payments: Callable[..., Payments]) -> None:
    # A second non-idempotent charge follows the one in flight. Draining, the execution recorded the second's
    # intent (its inputs, durable before such an effect starts) and stopped before it: the next worker found an
    # intent with no receipt and parked the run for an operator — for an effect that never ran (a walk-through on
    # PostgreSQL with three workers, 2026-12-04). Now the drain records that it never started.
    flow = payments(kind, body=CHARGE + "\n" + CHARGE.replace("name: charge,", "name: charge_again,"))
    run = "pay:drained"
    a = _start_and_signal(flow, run, signal.SIGTERM, worker=True)
    assert a.wait(30) == 128 + signal.SIGTERM, a.output()
    with flow.open() as store:
        paths = {e.path for e in store.read_entries(run)}
    assert "steps/charge" in paths and "steps/charge_again" not in paths, sorted(paths)
    b = flow.worker(label="b")
    assert b.wait(60) == 0, b.output()
    record = flow.record(run)
    assert record.status == "completed", f"{kind}: {record!r}"  # (it was parked at steps/charge_again)
    steps = [(line.step, "a" if line.pid == a.pid else "b") for line in flow.lines()]
    assert Counter(steps) == {("prepare", "a"): 1, ("charge", "a"): 1, ("charge", "b"): 1, ("notify", "b"): 1}, steps


@pytest.mark.parametrize("kind", KINDS)
def test_a_second_signal_stops_at_once_and_leaves_the_charge_unconfirmed(
        kind: str, payments: Callable[..., Payments]) -> None:
    flow = payments(kind)
    run = "pay:twice"
    a = _start_and_signal(flow, run, signal.SIGTERM, worker=False)
    time.sleep(0.3)
    stopped_at = time.monotonic()
    a.signal(signal.SIGTERM)
    assert a.wait(30) == 128 + signal.SIGTERM
    assert time.monotonic() - stopped_at < 1.5, "the second signal did not stop the process at once"
    assert "second signal" in a.output(), a.output()
    b = flow.worker(label="b")
    assert b.wait(60) == 0, b.output()
    record = flow.record(run)
    assert record.status == "parked" and record.parked is not None and "unconfirmed" in (record.parked.reason or "")
    assert [line.step for line in flow.lines()].count("charge") == 1  # never repeated blindly


RETRIED_COMPOSITE = """\
kind: Telo.Application
metadata: { name: Pay, version: 1.0.0 }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Py: python, Run: run }
targets:
  - name: start
    invoke: !ref flow
---
kind: Journal.Journal
metadata: { name: runs }
path: ./j.db
---
kind: Py.Function
metadata: { name: chargeCard }
function: shop:charge
---
kind: Run.Sequence
metadata: { name: pay }
steps:
  - { name: charge, invoke: !ref chargeCard }
---
kind: Local.Workflow
metadata: { name: flow }
journal: !ref runs
runId: "r1"
steps:
  - { name: pay, invoke: !ref pay, timeout: 300, retry: { attempts: 2, initialDelay: 50 } }
"""
SHOP = """\
import time


def charge(inputs):
    with open("ledger.txt", "a") as f:
        f.write("charge\\n")
    time.sleep(1.0)  # past the step's timeout: the attempt is cut short, its outcome unknown
    return {"charged": True}
"""
# SIGTERM just after the retry marks attempt 1 started, before its charge: what a signal at that moment does.
DRIVER = """\
import signal, sys
from telo.durable import handle, shutdown
decide = handle.LocalRunHandle.decide
async def marked(self, path, kind, compute, *, wait=False):
    value = await decide(self, path, kind, compute, wait=wait)
    if kind == "attempt":
        shutdown.request(signal.SIGTERM)
    return value
handle.LocalRunHandle.decide = marked
from telo.cli.main import cli
cli.main(sys.argv[1:], prog_name="telo")
"""


def test_a_drain_does_not_call_an_effect_that_began_in_this_execution_never_started(tmp_path: Path) -> None:
    # A review of the drain fix above: a retried composite re-enters its non-idempotent step, whose first attempt
    # a timeout cut short (outcome unknown). Drained before the second attempt's effect, the execution recorded
    # "never started" for it, and the next run charged again without asking — worse than kill -9.
    (tmp_path / "m.yaml").write_text(RETRIED_COMPOSITE)
    (tmp_path / "shop.py").write_text(SHOP)
    (tmp_path / "drive.py").write_text(DRIVER)
    first = subprocess.run([sys.executable, "drive.py", "run", "m.yaml", "--progress", "off"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert first.returncode == 4 and "ERR_DURABLE_SHUTTING_DOWN" in first.stdout + first.stderr, first
    with SqliteStore(str(tmp_path / "j.db")) as store:
        paths = [e.path for e in store.read_entries("r1")]
    assert "steps/pay/@attempt[1]" in paths and "steps/pay/charge/@unconfirmed[0]" not in paths, paths
    again = subprocess.run([sys.executable, "-m", "telo", "run", "m.yaml", "--progress", "off"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert again.returncode == 4 and "unconfirmed effect" in again.stdout, again  # asked, as after a crash
    assert (tmp_path / "ledger.txt").read_text().count("charge") == 1  # never repeated blindly
