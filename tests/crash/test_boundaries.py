"""A real ``telo`` process is SIGKILLed at each named crash boundary, then the run is recovered and checked.

Each case arms one fault point (``TELO_FAULT=<point>@<n>``, telo/faults.py: the process SIGKILLs itself the
n-th time it reaches the point) in ONE process — ``telo run`` of the crash workflow (workflows/), ``telo
deliver``, or a child compacting the run — and asserts that process died with SIGKILL. Then, without the
fault, the run is driven to completion the way an operator would: re-running ``telo run`` with the same run
id (resubmission) or ``telo worker --until-idle``, delivering the approval with ``telo deliver`` when the run
waits for it. Afterwards:

- the run completed with the delivered payload, and ``telo status --json`` read the journal after the kill;
- the ledger (one fsynced line per effect execution, by the effects themselves) holds every recorded
  effect's idempotency key, exactly once — except the step the kill interrupted, which may appear twice
  with the same key (the exact set of such steps is asserted where the point determines it); on SQLite and
  PostgreSQL, where a redriven step's entries are deferred by default (docs/guarantees.md), up to
  ``DEFERRED_STEPS`` finished steps whose entries were not durable yet may appear twice as well — so every
  SQLite case, and PostgreSQL's core ones, run twice, deferred and with ``durability: eager`` (exact);
- the journal folds (:func:`telo.journal.eventlog.recover`) to exactly the workflow's effects.

Every point runs on SQLite; the core subset (after an inputs decision, after the effect before its entry,
after the entry, after the park record) also on the file journal and PostgreSQL.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from telo import faults
from telo.clock import SYSTEM_CLOCK
from telo.durable.handle import DEFERRED_STEPS
from telo.journal import eventlog
from telo.journal.claims import Holder
from telo.journal.store import Store
from tests.crash.support import make_spec
from tests.crash.workflows.harness import (
    WORKFLOWS,
    Flow,
    check_completed,
    check_ledger,
    payload_for,
)

LEGS = frozenset(f"steps/fan[{i}]/leg" for i in range(5))


@dataclass(frozen=True)
class Case:
    point: str
    n: int = 1
    # Steps (paths) the kill must leave executed twice; None: any fan-out legs that were in flight, each ≤ 2.
    repeats: frozenset[str] | None = frozenset()
    recover: str = "rerun"  # "rerun" (telo run again) | "worker" (telo worker --until-idle)
    env: dict[str, str] = field(default_factory=dict)
    core: bool = False  # also on the file journal and PostgreSQL
    parked_at: str | None = None  # after the kill, the run is parked here (the park record was durable)

    @property
    def id(self) -> str:
        return f"{self.point}@{self.n}-{self.recover}"


FIRST = frozenset({"steps/first"})
CASES = [
    Case("before-admit"),
    # Regression: the record carries the call inputs, so a worker can continue a run whose starter died
    # before the body's inputs decision (it used to fail the run evaluating `inputs.id` against {}).
    Case("after-admit", recover="worker"),
    Case("after-inputs-decision", 2, recover="worker", core=True),  # steps/first's intent, no effect yet
    Case("after-inputs-decision", 9, repeats=None),  # leg b's intent; leg a may be executing
    Case("before-effect", 1, recover="worker"),
    Case("inside-effect", 1, repeats=FIRST),
    Case("inside-effect", 7, repeats=None, recover="worker"),
    Case("after-effect-before-entry", 1, repeats=FIRST, core=True),
    Case("after-effect-before-entry", 7, repeats=None),
    Case("after-entry", 1, recover="worker", core=True),
    Case("after-entry", 8, repeats=None, recover="worker"),
    Case("before-park-record", 1, recover="worker"),  # the durable sleep's park
    Case("before-park-record", 2),  # the await's park (after the sleep, continued in the same process)
    Case("after-park-record", 1, recover="worker", core=True, parked_at="steps/nap"),
    Case("after-park-record", 2, parked_at="steps/approve"),
]
# Armed by other tests: before-journal-commit by tests/faults/test_one_executor.py (a stop, not a kill).
SPECIAL = ("after-delivery-append", "after-snapshot-append", "before-claim-renewal", "before-journal-commit")


def test_every_fault_point_is_exercised() -> None:
    assert {c.point for c in CASES} | set(SPECIAL) == faults.POINTS


def test_the_three_manifests_differ_only_in_their_journal() -> None:
    """sqlite.yaml, file.yaml and postgres.yaml are one workflow: only the journal (and its variables) differ."""

    def strip(kind: str) -> list[object]:
        text = (WORKFLOWS / f"{kind}.yaml").read_text().replace("!cel", "").replace("!ref", "")
        docs = list(yaml.safe_load_all(text))
        app = docs[0]
        app["imports"].pop("Journal")
        app.pop("variables")
        return [d for d in docs if d.get("kind") != "Journal.Journal"]

    assert strip("sqlite") == strip("file") == strip("postgres")


def _params() -> Iterator[object]:
    for case in CASES:
        yield pytest.param("sqlite", case, None, id=f"sqlite-{case.id}")
        yield pytest.param("sqlite", case, "eager", id=f"sqlite-eager-{case.id}")
    for kind in ("file", "postgres"):
        for case in CASES:
            if case.core:
                yield pytest.param(kind, case, None, id=f"{kind}-{case.id}")
                if kind == "postgres":
                    yield pytest.param(kind, case, "eager", id=f"{kind}-eager-{case.id}")


@pytest.fixture
def flow_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Flow, Store]]:
    kind = request.node.callspec.params["kind"]
    spec = make_spec(kind, tmp_path)
    flow = Flow(spec, tmp_path, durability=request.node.callspec.params.get("durability"))
    store = spec.open()
    try:
        yield flow, store
    finally:
        flow.close()
        store.close()


def _run_id(case: Case) -> str:
    return f"b-{case.point}-{case.n}"


def _branch_input(case: Case) -> int:
    return 2  # even: the `then` branch (steps/branch/then/even)


def _status_after_kill(flow: Flow, store: Store, run: str, ctx: str) -> None:
    """The CLI and recovery both read the journal the kill left."""
    if store.read_run(run) is None:  # killed before admission: nothing was written
        proc = flow.telo("status", run, "--manifest", str(flow.manifest), "--json", expect=None)
        assert proc.returncode != 0 and "ERR_DURABLE_RUN_NOT_FOUND" in proc.output(), f"{ctx}: {proc.output()}"
        return
    status = flow.status(run)
    assert status["status"] in ("running", "parked"), f"{ctx}: after the kill: {status}"
    eventlog.recover(store, run)


def _drive(flow: Flow, store: Store, run: str, n: int, recover: str, ctx: str) -> None:
    """Continue ``run`` until it completes: re-run or work it, deliver its approval when it waits for it."""
    for _ in range(8):
        record = store.read_run(run)
        if record is not None and record.status == "completed":
            return
        if record is not None and record.status == "parked" and record.parked is not None \
                and record.parked.token is not None:
            assert record.parked.path == "steps/approve", f"{ctx}: parked at {record.parked!r}"
            if "steps/approve" not in eventlog.recover(store, run).entries:
                flow.deliver(run)
                continue
        if record is None or recover == "rerun":
            flow.telo(*flow.run_args(run, n))
        else:
            flow.telo(*flow.worker_args())
    record = store.read_run(run)
    raise AssertionError(f"{ctx}: run {run} did not complete: {record!r}")


def _check(flow: Flow, store: Store, run: str, repeats: frozenset[str] | None, ctx: str) -> None:
    check_completed(store, [run], ctx)
    report = check_ledger(flow, store, [run], ctx, max_runs=1)
    assert all(times == 2 for times in report.repeated.values()), f"{ctx}: {report.repeated}"
    repeated = {key.removeprefix(run + "/") for key in report.repeated}
    allowed = LEGS if repeats is None else repeats
    if flow.spec.kind in ("sqlite", "postgres") and flow.durability != "eager":
        # Deferred entries (docs/guarantees.md): besides the steps the kill interrupted, up to DEFERRED_STEPS
        # finished steps whose entries were not durable yet run again, each with its own key.
        extra = repeated - allowed
        assert len(extra) <= DEFERRED_STEPS, f"{ctx}: repeated {sorted(repeated)}; beyond {sorted(allowed)} " \
            f"at most {DEFERRED_STEPS} finished steps may repeat"
        assert repeats is None or repeats <= repeated, f"{ctx}: {sorted(repeats)} was interrupted, yet not redriven"
    elif repeats is None:
        assert repeated <= LEGS, f"{ctx}: repeated {sorted(repeated)}; only in-flight fan-out legs may repeat"
    else:
        assert repeated == repeats, f"{ctx}: repeated {sorted(repeated)}, expected {sorted(repeats)}"
    assert len(flow.killed_procs()) == 1, f"{ctx}: {[p.label for p in flow.killed_procs()]}"


@pytest.mark.parametrize(("kind", "case", "durability"), list(_params()))
def test_kill_at_boundary(kind: str, case: Case, durability: str | None, flow_store: tuple[Flow, Store]) -> None:
    flow, store = flow_store
    run, n = _run_id(case), _branch_input(case)
    ctx = f"[{kind}{' ' + durability if durability else ''} TELO_FAULT={case.point}@{case.n}, " \
          f"recovered by {case.recover}]"
    proc = flow.start(*flow.run_args(run, n), env={"TELO_FAULT": f"{case.point}@{case.n}", **case.env})
    code = flow.wait(proc)
    assert code == -9, f"{ctx}: `telo run` exited {code}, not by SIGKILL at the point:\n{proc.output()}"
    _status_after_kill(flow, store, run, ctx)
    record = store.read_run(run)
    if case.parked_at is not None:
        assert record is not None and record.parked is not None and record.parked.path == case.parked_at, (
            f"{ctx}: {record!r}"
        )
    elif case.point == "before-park-record":  # the process died before its park record: still running
        assert record is not None and record.status == "running" and record.parked is None, f"{ctx}: {record!r}"
    _drive(flow, store, run, n, case.recover, ctx)
    _check(flow, store, run, case.repeats, ctx)


def _run_to_approval(flow: Flow, store: Store, run: str, ctx: str) -> None:
    flow.telo(*flow.run_args(run, 3))
    record = store.read_run(run)
    assert record is not None and record.status == "parked" and record.parked is not None, f"{ctx}: {record!r}"
    assert record.parked.token == "approve:" + run, f"{ctx}: {record.parked!r}"


@pytest.mark.parametrize("kind", ["sqlite"])
def test_kill_deliver_after_its_append(kind: str, flow_store: tuple[Flow, Store]) -> None:
    """``telo deliver`` dies after its delivery is durable, before it answers. A delivery stores the payload
    and unparks the run in one transaction (Store.deliver), so the run is running and due with that payload —
    never parked with its payload beside it, the state a two-step deliverer (upstream's) can leave, which
    stores still treat as due (the conformance suite) — and a worker continues it."""
    flow, store = flow_store
    run, ctx = "b-delivery", f"[{kind} TELO_FAULT=after-delivery-append]"
    _run_to_approval(flow, store, run, ctx)
    flow.deliver(run, env={"TELO_FAULT": "after-delivery-append"}, expect=-9)
    record = store.read_run(run)
    assert record is not None and record.status == "running" and record.parked is None, f"{ctx}: {record!r}"
    assert eventlog.recover(store, run).entries["steps/approve"].decode(run) == payload_for(run)
    assert run in store.due_runs(SYSTEM_CLOCK.now_ms(), 100), f"{ctx}: the delivered run is not due"
    assert flow.status(run)["status"] == "running"
    flow.telo(*flow.worker_args())  # no second delivery: the one that was cut short is enough
    _check(flow, store, run, frozenset(), ctx)


@pytest.mark.parametrize("kind", ["sqlite", "file", "postgres"])
def test_kill_compaction_after_its_snapshot(kind: str, flow_store: tuple[Flow, Store], tmp_path: Path) -> None:
    """Compaction dies after appending its snapshot, before truncating: recovery equals the state before
    compaction, compaction can be repeated, and the run continues from the compacted journal."""
    flow, store = flow_store
    run, ctx = "b-compact", f"[{kind} TELO_FAULT=after-snapshot-append]"
    _run_to_approval(flow, store, run, ctx)
    before = eventlog.recover(store, run)
    argv = [sys.executable, "-m", "tests.crash.workflows.compact_child", *flow.spec.argv(), "--run", run]
    proc = flow.start(argv=argv, label="compact", env={"TELO_FAULT": "after-snapshot-append"})
    assert flow.wait(proc) == -9, f"{ctx}: compaction exited {proc.returncode}:\n{proc.output()}"
    assert any(e.kind is eventlog.EventKind.SNAPSHOT for e in eventlog.events(store, run)), ctx
    after = eventlog.recover(store, run)
    assert after.hash == before.hash and after.entries.keys() == before.entries.keys(), ctx
    assert after.epoch == before.epoch
    assert flow.status(run)["status"] == "parked"
    # Compacting again (no fault) completes the truncation; still the same state.
    done = flow.start(argv=argv, label="compact")
    assert flow.wait(done) == 0 and done.output().startswith("compacted "), f"{ctx}: {done.output()}"
    assert eventlog.recover(store, run).hash == before.hash, ctx
    assert len(store.read_entries(run)) < len(before.entries), f"{ctx}: nothing was truncated"
    _drive(flow, store, run, 3, "worker", ctx)
    _check(flow, store, run, frozenset(), ctx)
    assert check_completed(store, [run], ctx)[run].decoded_result()["steps"]["odd"]["result"]["step"] == "odd"


@pytest.mark.parametrize("kind", ["sqlite"])
def test_kill_before_a_claim_renewal(kind: str, flow_store: tuple[Flow, Store]) -> None:
    """A process dies while its running body renews its claim (every 100 ms here, TELO_CLAIM_RENEW_MS): its
    claim still reads live for ~60 s, yet a worker takes the run over at once (the holder process is gone)."""
    flow, store = flow_store
    run, ctx = "b-renewal", f"[{kind} TELO_FAULT=before-claim-renewal]"
    env = {"TELO_FAULT": "before-claim-renewal", "TELO_CLAIM_RENEW_MS": "100", "CRASH_EFFECT_MS": "300"}
    proc = flow.start(*flow.run_args(run, 2), env=env)
    assert flow.wait(proc) == -9, f"{ctx}: `telo run` exited {proc.returncode}:\n{proc.output()}"
    record = store.read_run(run)
    assert record is not None and record.status == "running" and record.claim is not None, f"{ctx}: {record!r}"
    holder = Holder.parse(record.claim.holder)
    assert holder is not None and holder.pid == proc.pid, f"{ctx}: claimed by {record.claim.holder}"
    lapses_at = record.claim.until
    assert lapses_at > SYSTEM_CLOCK.now_ms() + 30_000, f"{ctx}: the dead holder's claim is not live: {record!r}"
    began = time.monotonic()
    worker = flow.telo(*flow.worker_args())
    took = time.monotonic() - began
    assert SYSTEM_CLOCK.now_ms() < lapses_at, ctx
    assert took < 20, f"{ctx}: the worker needed {took:.1f} s"
    assert flow.status(run)["status"] == "parked", worker.output()
    _drive(flow, store, run, 2, "worker", ctx)
    # The kill lands during the first effect (300 ms, the renewal after 100 ms): that effect may be re-driven.
    check_completed(store, [run], ctx)
    report = check_ledger(flow, store, [run], ctx, max_runs=1)
    assert set(report.repeated) <= {f"{run}/steps/first"} and all(t == 2 for t in report.repeated.values()), ctx
