"""Racing starts of one key, in real processes, on SQLite and PostgreSQL (issue 16, step 4 of
docs/proposals/admission-control.md: ``dedupKey`` + ``onDuplicate``, ``debounce``, ``singleton``).

Four racer processes (workflows/keyed_racer.py) load one manifest whose six queues each have one rule, and at
the same wall-clock instants start runs of each queue's workflow with one key — the journal decides each
admission in one transaction (the SQLite writer's; on PostgreSQL one under the key's advisory lock). Judged from
the journal, the racers' answers and the step's ledger (workflows/queued_work.py):

- ``dedupKey`` (attach): one run; every start names it; its step ran once; every racer saw it complete;
- ``dedupKey`` + ``onDuplicate: reject``: one run; the three other starts refused with ERR_DURABLE_RUN_EXISTS
  naming it;
- ``singleton`` ``skip``: one run; the other starts answered ``skipped``, naming it;
- ``singleton`` ``cancel-running``: four runs, each admitted, and at the end one not cancelled — each cancelled
  one names the run that replaced it;
- ``singleton`` ``queue``: four runs, their steps never overlapping;
- ``debounce``: each racer starts five times in a row; one run, holding the inputs of some racer's LAST start
  (each racer's earlier starts were overwritten by its later ones); a start after the race moves it once more,
  and the run executes once, with that start's inputs.

Before this change the queues' fields were unknown (the manifest did not load) and every start admitted a run.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from telo.journal.model import RunRecord
from tests.crash.support import REPO_ROOT
from tests.faults.support import JOURNALS, WORKFLOWS, Payments, Proc
from tests.queue_manifests import fault_header, queue, queued_work_flow

KINDS = ("sqlite", "postgres")
RACERS = 4
RULES = {  # workflow: its queue's rule
    "wa": 'dedupKey: !cel "inputs.tenant"',
    "wr": 'dedupKey: !cel "inputs.tenant"\nonDuplicate: reject',
    "ws": 'singleton: { key: !cel "inputs.tenant", mode: skip }',
    "wc": 'singleton: { key: !cel "inputs.tenant", mode: cancel-running }',
    "wq": 'singleton: { key: !cel "inputs.tenant", mode: queue }',
    "wd": 'debounce: { period: !cel "variables.period", key: !cel "inputs.tenant" }',
}


@pytest.fixture
def flows(tmp_path: Path) -> Iterator[list[Payments]]:
    made: list[Payments] = []
    yield made
    for flow in made:
        flow.close()


def keyed_flow(kind: str, tmp_path: Path, made: list[Payments]) -> Payments:
    flow = Payments(kind, tmp_path / kind)
    module, location = JOURNALS[kind]
    flow.manifest.write_text(fault_header("KeyedRace", module, location, variables={"period": "DEBOUNCE_PERIOD"})
                             + "".join(queue(f"q_{wf}", rule) + queued_work_flow(wf, f"q_{wf}", run_id=False)
                                       for wf, rule in RULES.items()))
    flow.env.update(QUEUE_LEDGER=str(flow.ledger), QUEUE_WORK_MS="400", DEBOUNCE_PERIOD="6s")
    made.append(flow)
    return flow


def racer(flow: Payments, label: str, plan: list[dict[str, Any]], env: dict[str, str] | None = None) -> Proc:
    out = flow.tmp / f"{label}.out"
    with open(out, "wb") as f:
        popen = subprocess.Popen([sys.executable, str(WORKFLOWS / "keyed_racer.py"), str(flow.manifest), label,
                                  json.dumps(plan)], cwd=REPO_ROOT, env={**flow.env, **(env or {})},
                                 stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
    proc = Proc(label, popen, out)
    flow.procs.append(proc)
    return proc


def answers(procs: list[Proc]) -> dict[str, list[dict[str, Any]]]:
    by_workflow: dict[str, list[dict[str, Any]]] = {}
    for proc in procs:
        assert proc.wait(60) == 0, proc.output()
        for line in proc.out.read_text().splitlines():
            if line.startswith("ANSWER "):
                answer = json.loads(line.removeprefix("ANSWER "))
                if answer["id"].startswith("warm-"):
                    assert answer.get("final") == "completed", answer
                    continue
                by_workflow.setdefault(answer["workflow"], []).append(answer)
    return by_workflow


def runs_of(flow: Payments, workflow: str) -> list[RunRecord]:
    """The runs of ``workflow`` with the raced key (not the racers' warm-up runs)."""
    with flow.open() as store:
        return [r for r in store.iter_all_runs() if r.workflow == workflow and r.decoded_inputs()["tenant"] == "acme"]


def executions(flow: Payments, prefix: str) -> list[tuple[int, int, str]]:
    """(start ns, end ns, input id) of each step of a run whose input id starts with ``prefix``."""
    opened: dict[tuple[str, str], int] = {}
    out = []
    for raw in flow.ledger.read_text().splitlines():
        ident, _, what, pid, ns = raw.split(" ")
        if not ident.startswith(prefix):
            continue
        if what == "start":
            opened[(ident, pid)] = int(ns)
        else:
            out.append((opened.pop((ident, pid)), int(ns), ident))
    return sorted(out)


@pytest.mark.parametrize("kind", KINDS)
def test_racing_starts_of_one_key(kind: str, tmp_path: Path, flows: list[Payments]) -> None:
    flow = keyed_flow(kind, tmp_path, flows)
    t0 = time.time() + 5  # every racer loaded by then (each prints when), so the starts meet
    plan = [{"at": t0 + 0.3 * i, "workflow": wf, "wait": wf != "wd"} for i, wf in enumerate(RULES)]
    procs = []
    for n in range(RACERS):
        mine = [{**step, "ids": [f"{step['workflow']}-{n}"]} for step in plan]
        mine[-1]["ids"] = [f"wd-{n}-{k}" for k in range(5)]  # (the debounce: five starts in a row)
        # a start of another key first: a process's first start costs it ~0.5 s more than the next ones, and
        # the race is of starts that meet
        warm = {"at": 0, "workflow": "wq", "ids": [f"warm-{n}"], "tenant": f"warm-{n}", "wait": True}
        procs.append(racer(flow, f"r{n}", [warm, *mine]))
    got = answers(procs)
    late = [p.label for p in procs if float(p.output().split("LOADED ")[1].split()[1]) > t0]
    assert not late, f"racers loaded after the race began: {late}"

    # dedupKey, attach: one run, named by every start, executed once, seen completed by all
    (one,) = runs_of(flow, "wa")
    assert {a["run"] for a in got["wa"]} == {one.run} and sum(a["started"] for a in got["wa"]) == 1
    assert [a["final"] for a in got["wa"]] == ["completed"] * RACERS and one.dedup_key == "acme"
    assert len(executions(flow, "wa-")) == 1

    # dedupKey, reject: one run; the others refused naming it
    (one,) = runs_of(flow, "wr")
    refused = [a for a in got["wr"] if "error" in a]
    assert len(refused) == RACERS - 1 and {a["error"] for a in refused} == {"ERR_DURABLE_RUN_EXISTS"}
    assert {a["run"] for a in got["wr"]} == {one.run} and one.status == "completed"

    # singleton skip: one run; the others skipped naming it
    (one,) = runs_of(flow, "ws")
    assert Counter(a["status"] for a in got["ws"]) == Counter({"skipped": RACERS - 1, "scheduled": 1})
    assert {a["run"] for a in got["ws"]} == {one.run} and one.status == "completed"

    # singleton cancel-running: every start admitted, one left not cancelled, each cancelled one replaced
    runs = runs_of(flow, "wc")
    assert len(runs) == RACERS and all(a["started"] for a in got["wc"])
    assert Counter(r.status for r in runs) == Counter({"cancelled": RACERS - 1, "completed": 1})
    ids = {r.run for r in runs}
    for r in runs:
        if r.status == "cancelled":
            assert r.error is not None and any(f"run {other!r}" in r.error["message"] for other in ids - {r.run})

    # singleton queue: four runs, one at a time
    runs = runs_of(flow, "wq")
    assert len(runs) == RACERS and {r.status for r in runs} == {"completed"} and {r.queue_key for r in runs} == {"acme"}
    spans = executions(flow, "wq-")
    assert len(spans) == RACERS and all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans

    # debounce: one run, holding some racer's last start's inputs, not started yet (its period is 6 s)
    (one,) = runs_of(flow, "wd")
    assert {a["run"] for a in got["wd"]} == {one.run} and sum(a["started"] for a in got["wd"]) == 1
    assert one.status == "scheduled" and one.started_at is None
    assert one.decoded_inputs()["id"] in {f"wd-{n}-4" for n in range(RACERS)}, one.decoded_inputs()
    assert executions(flow, "wd-") == []
    # a start after the race (its queue's period shorter here) moves it once more, and it runs once, with those
    final = racer(flow, "final", [{"at": 0, "workflow": "wd", "ids": ["wd-final"], "wait": True}],
                  env={"DEBOUNCE_PERIOD": "200ms"})
    (answer,) = answers([final])["wd"]
    assert (answer["run"], answer["started"], answer["final"]) == (one.run, False, "completed")
    (one,) = runs_of(flow, "wd")
    assert one.decoded_inputs()["id"] == "wd-final" and one.status == "completed"
    assert [ident for _, _, ident in executions(flow, "wd-")] == ["wd-final"]
