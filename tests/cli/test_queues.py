"""A workflow in a ``Local.Queue`` started from the command line (issue 16), through the real ``telo`` command.

``telo run`` admits a queued run ``scheduled`` and waits for a slot the way it waits out a timed park: with a
slot free it runs the run and prints its outcome as before; with the queue full it waits — ``telo status``
says why (the queue, the key, what holds the slots) — and runs it once the slot frees. A queue on the file
journal, or on another journal than its workflow's, is refused at load with a clear error. Before this change
``Local.Queue`` was an unknown kind: every one of these manifests was refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from telo.journal.claims import Holder
from telo.journal.model import Admission, Parked
from telo.journal.postgres import PostgresStore
from telo.journal.sqlite import SqliteStore
from telo.journal.store import Store
from tests.pg_support import fresh_prefix, pg_url
from tests.process import telo
from tests.queue_manifests import POSTGRES, SQLITE, header, queue

FLOW = """\
---
kind: Py.Function
metadata: { name: work }
function: steps:work
---
kind: Local.Workflow
metadata: { name: flow }
journal: !ref runs
queue: !ref q
runId: !cel "'flow:' + inputs.id"
inputs: { id: !cel "inputs.id", tenant: !cel "inputs.tenant" }
steps:
  - { name: work, invoke: !ref work, inputs: { id: !cel "inputs.id" } }
"""

STEPS = """\
def work(inputs):
    return {"worked": inputs["id"]}
"""


def app(tmp_path: Path, journal: str = "sqlite", queue_journal: str = "runs") -> Path:
    module, location = {"sqlite": (SQLITE, "path: ./runs.db"),
                        "file": ("durable-journal-file", "directory: ./runs")}[journal]
    (tmp_path / "steps.py").write_text(STEPS)
    manifest = tmp_path / "flow.yaml"
    other = "---\nkind: Other.Journal\nmetadata: { name: elsewhere }\npath: ./elsewhere.db\n" \
        if queue_journal == "elsewhere" else ""
    manifest.write_text(header("Queued", module, location, imports={"Other": SQLITE, "Py": "python"}, start="flow",
                               start_inputs=["id", "tenant"]) + other
                        + queue("q", 'concurrency: 1\nconcurrencyKey: { key: !cel "inputs.tenant", limit: 1 }',
                                journal=queue_journal) + FLOW)
    return manifest


def test_a_queued_start_with_a_free_slot_runs_and_prints_its_outcome(tmp_path: Path) -> None:
    manifest = app(tmp_path)
    out = telo("run", str(manifest), "--input", "id=a", "--input", "tenant=acme", "--progress", "off", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "run 'flow:a': completed; result: " in out.stdout and '"worked": "a"' in out.stdout, out.stdout
    with SqliteStore(str(tmp_path / "runs.db")) as store:
        record = store.read_run("flow:a")
    assert record is not None and record.status == "completed"
    assert (record.queue, record.queue_key) == ("q", "acme")  # admitted to the queue, its key recorded
    again = telo("run", str(manifest), "--input", "id=b", "--input", "tenant=acme", "--progress", "off", "--json",
                 cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["start"]["status"] == "completed", again.stdout


def test_a_queued_start_waits_for_its_slot_and_status_says_why(tmp_path: Path) -> None:
    manifest = app(tmp_path)
    other = Holder("worker", "another-host", 7, 7).to_text()  # a live holder elsewhere: it holds the one slot
    with SqliteStore(str(tmp_path / "runs.db")) as store:
        store.admit(Admission.of("flow:busy", status="scheduled", due_at=0, inputs={"id": "busy", "tenant": "acme"},
                                 workflow="flow", queue="q", queue_key="acme"))
        assert store.claim("flow:busy", other, 600_000, int(time.time() * 1000)) is not None
        store.update_run("flow:busy", status="running", due_at=None)
    waiting = subprocess.Popen([sys.executable, "-m", "telo", "run", str(manifest), "--input", "id=w", "--input",
                                "tenant=acme", "--progress", "off"], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        status: dict[str, object] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            shown = telo("status", "flow:w", "--manifest", str(manifest), "--json", cwd=tmp_path)
            if shown.returncode == 0:
                status = json.loads(shown.stdout)
                break
            time.sleep(0.1)
        assert status.get("status") == "scheduled", status
        queue = status["queue"]
        assert {k: queue[k] for k in ("name", "key", "running", "runningWithKey", "parked", "position")} == \
            {"name": "q", "key": "acme", "running": 1, "runningWithKey": 1, "parked": 0, "position": 1}
        assert queue["heldBy"] == [{"limit": "concurrency", "holding": 1, "max": 1},
                                   {"limit": "concurrencyKey", "key": "acme", "holding": 1, "max": 1}]
        human = telo("status", "flow:w", "--manifest", str(manifest), cwd=tmp_path)
        assert ("queue: q (key acme); waiting for a slot, position 1 of 1: held by concurrency 1/1, key acme 1/1; "
                "1 running (1 with its key), 0 parked") in human.stdout, human.stdout
        shown = telo("runs", "show", "flow:w", "--manifest", str(manifest), "--json", cwd=tmp_path)
        assert json.loads(shown.stdout)["queue"] == status["queue"], shown.stdout + shown.stderr
        assert waiting.poll() is None  # still waiting for the slot
        with SqliteStore(str(tmp_path / "runs.db")) as store:
            store.release("flow:busy", other)
            store.update_run("flow:busy", status="cancelled")  # the slot frees
        stdout, stderr = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert waiting.returncode == 0, stdout + stderr
    assert "run 'flow:w': completed" in stdout, stdout


def test_a_queue_on_the_file_journal_is_refused(tmp_path: Path) -> None:
    out = telo("run", str(app(tmp_path, journal="file")), "--input", "id=a", "--input", "tenant=acme",
               "--progress", "off", cwd=tmp_path)
    assert out.returncode != 0
    assert "ERR_JOURNAL_CONFIG_INVALID" in out.stderr and "file journal" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert not list((tmp_path / "runs").glob("*.ndjson"))  # nothing admitted


def test_a_queue_on_another_journal_than_its_workflows_is_refused(tmp_path: Path) -> None:
    out = telo("run", str(app(tmp_path, queue_journal="elsewhere")), "--input", "id=a", "--input", "tenant=acme",
               "--progress", "off", cwd=tmp_path)
    assert out.returncode != 0
    assert "ERR_MANIFEST_VALIDATION_FAILED" in out.stderr and "'elsewhere'" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr + out.stdout


# --- telo queues list|show, and why a run waits (issue 16, "Visibility") ------------------------------------

PAY = """\
---
kind: Py.Function
metadata: { name: work }
function: steps:work
---
kind: Local.Workflow
metadata: { name: pay }
journal: !ref runs
queue: !ref payments
inputs: { id: !cel "inputs.id", tenant: !cel "inputs.tenant" }
steps:
  - { name: work, invoke: !ref work, inputs: { id: !cel "inputs.id" } }
"""


def queues_manifest(module: str, location: str, rate: int) -> str:
    """The queues ``payments`` (every limit; ``rate`` starts an hour) and ``refunds`` (none), and the workflow
    ``pay`` of ``payments``."""
    payments = ('concurrency: 2\nworkerConcurrency: 2\nconcurrencyKey: { key: !cel "inputs.tenant", limit: 1 }\n'
                f"rateLimit: {{ limit: {rate}, period: 1h }}\npriority: !cel \"inputs.tenant == 'gold' ? 0 : 10\"")
    return header("Queues", module, location, imports={"Py": "python"},
                  queues={"payments": payments, "refunds": ""}) + PAY

ELSEWHERE = Holder("worker", "worker-host", 4121, 7).to_text()  # a live worker on another host


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def journal(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def queues_app(tmp_path: Path, journal: str, rate: int = 100) -> tuple[Path, Store]:
    """The manifest above on ``journal``, and its store, with: pay:0 (acme) and pay:2 (bolt) running under the
    live claims of a worker elsewhere, started a minute ago; pay:1, pay:3 (acme) and pay:4 (corp) waiting, due
    now; pay:later (acme) due in an hour; pay:parked (corp) parked."""
    if journal == "sqlite":
        module, location, store = SQLITE, "path: ./runs.db", None
    else:
        table = fresh_prefix()
        module, location = POSTGRES, f"url: {json.dumps(pg_url())}\ntable: {table}"
        store = PostgresStore(pg_url(), table=table)
    (tmp_path / "steps.py").write_text(STEPS)
    manifest = tmp_path / "queues.yaml"
    manifest.write_text(queues_manifest(module, location, rate))
    if store is None:
        store = SqliteStore(str(tmp_path / "runs.db"))
    now = int(time.time() * 1000)
    for i, tenant in enumerate(["acme", "acme", "bolt", "acme", "corp"]):
        store.admit(Admission.of(f"pay:{i}", status="scheduled", due_at=now - 100 + i, workflow="pay",
                                 inputs={"id": str(i), "tenant": tenant}, queue="payments", queue_key=tenant,
                                 priority=10))
    store.admit(Admission.of("pay:later", status="scheduled", due_at=now + 3_600_000, workflow="pay",
                             queue="payments", queue_key="acme", priority=10))
    store.admit(Admission.of("pay:parked", status="scheduled", due_at=now, workflow="pay", queue="payments",
                             queue_key="corp", priority=10))
    store.park("pay:parked", Parked("steps/wait", "approval", "tok"))
    for run in ("pay:0", "pay:2"):
        assert store.claim(run, ELSEWHERE, 600_000, now) is not None
        store.update_run(run, status="running", due_at=None, started_at=now - 60_000)
    return manifest, store


def test_queues_list_shows_each_queues_limits_holders_and_depth(tmp_path: Path, journal: str) -> None:
    manifest, store = queues_app(tmp_path, journal)
    try:
        out = telo("queues", "list", str(manifest), "--json", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        payments, refunds = json.loads(out.stdout)["queues"]
        assert payments["queue"] == "payments" and payments["journal"] == "runs"
        assert payments["limits"] == {"concurrency": 2, "workerConcurrency": 2,
                                      "concurrencyKey": {"key": "inputs.tenant", "limit": 1},
                                      "holdSlotWhileParked": False, "rateLimit": {"limit": 100, "period": "1h"},
                                      "priority": "inputs.tenant == 'gold' ? 0 : 10"}
        assert (payments["holding"], payments["running"], payments["parked"], payments["unclaimed"]) == (2, 2, 1, 0)
        assert payments["depth"] == {"dueNow": 3, "dueLater": 1, "total": 4}
        assert payments["keys"] == [
            {"key": "acme", "holding": 1, "running": 1, "waiting": 2, "later": 1, "parked": 0},
            {"key": "bolt", "holding": 1, "running": 1, "waiting": 0, "later": 0, "parked": 0},
            {"key": "corp", "holding": 0, "running": 0, "waiting": 1, "later": 0, "parked": 1}]
        assert payments["processes"] == [{"process": "worker-host:4121", "running": 2}]
        assert payments["rate"] == {"started": 2, "limit": 100, "period": "1h", "freesAt": None}
        assert "oldest" not in payments
        assert refunds["holding"] == 0 and refunds["depth"]["total"] == 0 and refunds["limits"]["concurrency"] is None
        human = telo("queues", "list", str(manifest), cwd=tmp_path)
        lines = human.stdout.splitlines()
        assert lines[0].split() == ["QUEUE", "JOURNAL", "HOLDING", "WAITING", "LATER", "PARKED", "KEYS", "LIMITS"]
        assert lines[1].startswith("payments  runs     2/2      3        1      1       3     concurrency 2, "
                                   "workerConcurrency 2, key inputs.tenant ≤ 1, rate 100/1h"), human.stdout
        assert lines[2].split() == ["refunds", "runs", "0", "0", "0", "0", "0", "none"]
    finally:
        store.close()


def test_queues_show_lists_keys_processes_and_the_oldest_waiting_runs_in_grant_order(tmp_path: Path,
                                                                                      journal: str) -> None:
    manifest, store = queues_app(tmp_path, journal)
    try:
        now = int(time.time() * 1000)
        store.admit(Admission.of("pay:gold", status="scheduled", due_at=now, workflow="pay", queue="payments",
                                 queue_key="gold", priority=0))  # admitted last, granted first
        out = telo("queues", "show", str(manifest), "payments", "--json", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        shown = json.loads(out.stdout)
        assert [(o["position"], o["run"], o["key"], o["priority"]) for o in shown["oldest"]] == [
            (1, "pay:gold", "gold", 0), (2, "pay:1", "acme", 10), (3, "pay:3", "acme", 10), (4, "pay:4", "corp", 10)]
        assert shown["waitingForSlot"] == 4 and shown["depth"]["dueNow"] == 4
        human = telo("queues", "show", str(manifest), "payments", "--oldest", "2", cwd=tmp_path)
        assert human.returncode == 0, human.stderr
        text = human.stdout
        assert "holding: 2/2 (2 running; 1 parked, which do not hold a slot)" in text, text
        assert "waiting: 4 due now, 1 due later" in text and "processes: worker-host:4121 runs 2" in text
        assert "concurrencyKey: inputs.tenant, at most 1 per key" in text
        assert "rate: 2 of 100 started in the last 1h" in text
        assert "acme  1/1      1        2        1      0" in text, text
        rows = [line.split()[:3] for line in text.splitlines() if line[:1].isdigit()]
        assert rows == [["1", "pay:gold", "scheduled"], ["2", "pay:1", "scheduled"]]  # --oldest 2
    finally:
        store.close()


def test_an_unknown_queue_is_not_found_and_names_the_queues(tmp_path: Path) -> None:
    manifest, store = queues_app(tmp_path, "sqlite")
    store.close()
    out = telo("queues", "show", str(manifest), "paymnets", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert out.stderr.splitlines() == [f"error: ERR_QUEUE_NOT_FOUND: 'paymnets' is not a Local.Queue of {manifest}",
                                       "hint: its queues: payments, refunds"]
    assert out.stdout == ""


def test_queues_never_create_a_missing_journal(tmp_path: Path) -> None:
    (tmp_path / "steps.py").write_text(STEPS)
    manifest = tmp_path / "queues.yaml"
    manifest.write_text(queues_manifest(SQLITE, "path: ./runs.db", rate=1))
    out = telo("queues", "list", str(manifest), cwd=tmp_path)
    assert out.returncode == 1 and "ERR_JOURNAL_NOT_FOUND" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "runs.db").exists()


def test_status_says_which_limit_holds_a_waiting_run_and_its_position(tmp_path: Path, journal: str) -> None:
    manifest, store = queues_app(tmp_path, journal, rate=2)  # the rate window is full: 2 starts in the hour
    try:
        out = telo("status", "pay:3", "--manifest", str(manifest), "--json", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        queue = json.loads(out.stdout)["queue"]
        assert {k: queue[k] for k in ("name", "key", "priority", "running", "runningWithKey", "parked", "position",
                                      "waitingForSlot", "holding")} == {
            "name": "payments", "key": "acme", "priority": 10, "running": 2, "runningWithKey": 1, "parked": 1,
            "position": 2, "waitingForSlot": 3, "holding": 2}
        held = queue["heldBy"]
        assert held[:2] == [{"limit": "concurrency", "holding": 2, "max": 2},
                            {"limit": "concurrencyKey", "key": "acme", "holding": 1, "max": 1}]
        assert held[2]["limit"] == "rateLimit" and (held[2]["started"], held[2]["max"]) == (2, 2)
        assert held[2]["freesAt"].endswith("Z")  # an hour after the older start: RFC 3339, like every JSON time
        human = telo("status", "pay:3", "--manifest", str(manifest), cwd=tmp_path)
        assert ("queue: payments (key acme, priority 10); waiting for a slot, position 2 of 3: held by concurrency "
                "2/2, key acme 1/1, rate 2/1h, frees at ") in human.stdout, human.stdout
        shown = telo("runs", "show", "pay:4", "--manifest", str(manifest), "--json", cwd=tmp_path)
        assert json.loads(shown.stdout)["queue"]["position"] == 3, shown.stderr
        if journal == "sqlite":  # a journal named directly: no limits known, the counts and position are
            bare = telo("status", "pay:3", "--journal", "runs.db", cwd=tmp_path)
            assert ("queue: payments (key acme, priority 10); waiting for a slot, position 2 of 3; 2 running (1 with "
                    "its key), 1 parked (which limit holds it: name the manifest, --manifest, whose Local.Queue "
                    "declares them)") in bare.stdout, bare.stdout
    finally:
        store.close()


# --- telo queues set: limits changed in the journal, without restarting workers (issue 16, "Visibility") -------


def test_queues_set_overrides_limits_and_show_gives_the_manifests_the_override_and_the_effective(
        tmp_path: Path, journal: str) -> None:
    """``telo queues set`` writes an override row: ``show`` then gives the limit in effect, the manifest's beside
    it and who set it; a second ``set`` changes only what it names; ``telo status`` explains a waiting run by the
    limits in effect; ``--reset`` drops the row and the manifest's limits hold again. Before this change there was
    no ``set`` command (click: "No such command", exit 2) and no table to hold an override."""
    manifest, store = queues_app(tmp_path, journal)
    try:
        held = json.loads(telo("status", "pay:3", "--manifest", str(manifest), "--json", cwd=tmp_path).stdout)
        assert {"limit": "concurrency", "holding": 2, "max": 2} in held["queue"]["heldBy"]  # (the manifest's 2)
        out = telo("queues", "set", str(manifest), "payments", "--concurrency", "3", "--rate-limit", "none",
                   "--by", "alice", "--json", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        done = json.loads(out.stdout)
        assert done["limits"]["concurrency"] == 3 and "rateLimit" not in done["limits"]
        assert done["manifestLimits"]["concurrency"] == 2
        assert done["manifestLimits"]["rateLimit"] == {"limit": 100, "period": "1h"}
        assert {k: v for k, v in done["override"].items() if k != "setAt"} == {
            "concurrency": 3, "rateLimit": None, "setBy": "alice"}
        assert done["override"]["setAt"].endswith("Z")
        row = store.queue_overrides()["payments"]  # the row itself, as every worker reads it
        assert (row.concurrency, row.rate_limit, row.key_limit, row.set_by) == (3, 0, None, "alice")
        again = telo("queues", "set", str(manifest), "payments", "--key-limit", "2", "--rate-limit", "5/90s",
                     "--by", "bob", cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert "override: concurrency 3 (manifest: 2), keyLimit 2 (manifest: 1), rateLimit 5/90s (manifest: " \
               "100/1h); set by bob at " in again.stdout, again.stdout
        shown = json.loads(telo("queues", "show", str(manifest), "payments", "--json", cwd=tmp_path).stdout)
        assert shown["limits"]["concurrency"] == 3 and shown["limits"]["concurrencyKey"]["limit"] == 2
        assert shown["limits"]["rateLimit"] == {"limit": 5, "period": "90s"}
        assert shown["manifestLimits"]["concurrency"] == 2 and shown["manifestLimits"]["concurrencyKey"]["limit"] == 1
        assert shown["override"]["setBy"] == "bob" and shown["override"]["concurrency"] == 3  # (kept)
        human = telo("queues", "show", str(manifest), "payments", cwd=tmp_path).stdout
        assert "concurrency: 3 (override; manifest: 2)" in human, human
        assert "concurrencyKey: inputs.tenant, at most 2 per key (override; manifest: 1)" in human
        assert "rateLimit: 5/90s (override; manifest: 100/1h)" in human and "override: set by bob at " in human
        assert "holding: 2/3 " in human
        listed = telo("queues", "list", str(manifest), cwd=tmp_path).stdout
        assert "concurrency 3, workerConcurrency 2, key inputs.tenant ≤ 2, rate 5/90s (overridden)" in listed, listed
        held = json.loads(telo("status", "pay:3", "--manifest", str(manifest), "--json", cwd=tmp_path).stdout)
        queue = held["queue"]
        assert queue["limits"]["concurrency"] == 3  # explained by the limits in effect
        assert not [h for h in queue["heldBy"] if h["limit"] in ("concurrency", "concurrencyKey")], queue["heldBy"]
        reset = telo("queues", "set", str(manifest), "payments", "--reset", "--json", cwd=tmp_path)
        assert reset.returncode == 0, reset.stderr
        dropped = json.loads(reset.stdout)
        assert dropped["override"] is None and dropped["reset"] is True and dropped["dropped"]["concurrency"] == 3
        assert dropped["limits"] == dropped["manifestLimits"] and dropped["limits"]["concurrency"] == 2
        assert dict(store.queue_overrides()) == {}
        held = json.loads(telo("status", "pay:3", "--manifest", str(manifest), "--json", cwd=tmp_path).stdout)
        assert {"limit": "concurrency", "holding": 2, "max": 2} in held["queue"]["heldBy"]
    finally:
        store.close()


@pytest.mark.parametrize(("args", "message", "hint"), [
    (["payments", "--concurrency", "0"], "--concurrency must be ≥ 1, got 0", "hint: write --concurrency none"),
    (["payments", "--worker-concurrency", "1.5"], "--worker-concurrency must be an integer ≥ 1 or none, got '1.5'",
     "hint: e.g. --worker-concurrency 3"),
    (["payments", "--rate-limit", "10/0s"], "--rate-limit's PERIOD must be a whole number of milliseconds, 1ms or "
     "more", "hint: write N/PERIOD, e.g. --rate-limit 100/1m (PERIOD: "),
    (["payments", "--rate-limit", "10/soon"], "--rate-limit's PERIOD is not a duration", "hint: write N/PERIOD"),
    (["payments", "--rate-limit", "10"], "--rate-limit must be N/PERIOD or none, got '10'", "hint: write N/PERIOD"),
    (["refunds", "--key-limit", "2"], "queue 'refunds' declares no concurrencyKey", "hint: declare concurrencyKey"),
    (["payments"], "nothing to change for queue 'payments'", "hint: give --concurrency, --worker-concurrency"),
    (["payments", "--reset", "--concurrency", "2"], "--reset drops every override", "hint: reset first, then set"),
])
def test_queues_set_refuses_a_bad_limit_with_a_hint_and_writes_nothing(tmp_path: Path, journal: str, args: list[str],
                                                                      message: str, hint: str) -> None:
    manifest, store = queues_app(tmp_path, journal)
    try:
        out = telo("queues", "set", str(manifest), *args, cwd=tmp_path)
        assert out.returncode == 3, out.stdout + out.stderr
        first, second = out.stderr.splitlines()[:2]
        assert first.startswith(f"error: ERR_INVALID_VALUE: {message}"), out.stderr
        assert second.startswith(hint), out.stderr
        assert "Traceback" not in out.stderr and out.stdout == ""
        assert dict(store.queue_overrides()) == {}
    finally:
        store.close()


def test_queues_set_of_an_unknown_queue_is_not_found(tmp_path: Path) -> None:
    manifest, store = queues_app(tmp_path, "sqlite")
    store.close()
    out = telo("queues", "set", str(manifest), "paymnets", "--concurrency", "3", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert out.stderr.splitlines() == [f"error: ERR_QUEUE_NOT_FOUND: 'paymnets' is not a Local.Queue of {manifest}",
                                       "hint: its queues: payments, refunds"]
