"""Deliveries are exactly-once and typed on every path (issue 12, case 3).

Observed before: two concurrent ``telo deliver`` calls to one token were both answered ``delivered: true``
while the journal kept one payload (file 6/20 rounds, PostgreSQL 8/20, SQLite 1/25); and ``telo deliver``
(even with ``--manifest``) and the dashboard never checked the payload against the Await's ``outputType``:
``{"approvedBy": 42}`` on the shipped orders example spent the token and the run shipped "approved by 42".

- the shipped example, driven by the real CLI: a payload of the wrong type is refused, names the field, and
  leaves the token usable; the right one is delivered and the run ships with it;
- 100 rounds of racing deliveries per store: four ``deliverer`` processes (workflows/deliverer.py) deliver to
  the same 100 parked tokens in the same order, each recording what it was told; every token is won exactly
  once, and the payload in the journal is the winner's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from telo.journal.model import Admission, Parked
from tests.crash.support import REPO_ROOT, make_spec
from tests.faults.conftest import KINDS
from tests.process import telo

ORDERS = REPO_ROOT / "examples" / "orders"
ROUNDS = 100
DELIVERERS = 4


def test_a_payload_of_the_wrong_type_is_refused_and_the_token_stays_usable(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    shop = tmp_path / "orders"
    shutil.copytree(ORDERS, shop, ignore=shutil.ignore_patterns(".telo"))
    monkeypatch.setenv("ORDERS_PACK_SECONDS", "0")  # (the telo subprocesses inherit the environment)
    monkeypatch.setenv("ORDERS_CHARGE_SECONDS", "0")
    started = telo("run", "orders.yaml", "--input", "order=B-7", "--progress", "off", cwd=shop)
    assert started.returncode == 4, started.stderr  # parked for the approval: not settled
    journal = str(shop / ".telo" / "orders.db")
    wrong = telo("deliver", "approve:B-7", "--journal", journal, "--payload", '{"approvedBy": 42}', cwd=shop)
    assert wrong.returncode == 3, wrong.stdout + wrong.stderr
    assert "ERR_DURABLE_PAYLOAD_INVALID" in wrong.stderr and "approvedBy" in wrong.stderr, wrong.stderr
    assert "Traceback" not in wrong.stderr
    status = json.loads(telo("status", "order:B-7", "--journal", journal, "--json", cwd=shop).stdout)
    assert status["status"] == "parked" and status["parked"]["token"] == "approve:B-7"
    right = telo("deliver", "approve:B-7", "--journal", journal, "--payload", '{"approvedBy": "ada"}',
                 "--json", cwd=shop)
    assert right.returncode == 0 and json.loads(right.stdout)["delivered"] is True, right.stderr
    again = telo("deliver", "approve:B-7", "--journal", journal, "--payload", '{"approvedBy": "bob"}',
                 "--json", cwd=shop)
    assert again.returncode == 1 and json.loads(again.stdout)["delivered"] is False
    finished = telo("run", "orders.yaml", "--input", "order=B-7", "--progress", "off", cwd=shop, timeout=120)
    assert finished.returncode == 0, finished.stderr
    result = json.loads(telo("result", "order:B-7", "--journal", journal, "--json", cwd=shop).stdout)
    assert result["status"] == "completed"
    ledger = (shop / ".telo" / "ledger.txt").read_text()
    assert "approved by ada" in ledger and "approved by 42" not in ledger and "bob" not in ledger, ledger


@pytest.mark.parametrize("kind", KINDS)
def test_of_racing_deliverer_processes_exactly_one_wins_each_token(kind: str, tmp_path: Path) -> None:
    spec = make_spec(kind, tmp_path)
    with spec.open() as store:
        for i in range(ROUNDS):
            run = f"race-{i}"
            assert store.admit(Admission.of(run)).admitted
            store.park(run, Parked("steps/approve", "approval", f"approve:{i}"))
    go = tmp_path / "go"
    procs = []
    for n in range(DELIVERERS):
        out = tmp_path / f"deliverer-{n}.json"
        procs.append((out, subprocess.Popen(
            [sys.executable, "-m", "tests.faults.workflows.deliverer", *spec.argv(), "--name", f"d{n}",
             "--tokens", str(ROUNDS), "--go", str(go), "--out", str(out)],
            cwd=REPO_ROOT, stdin=subprocess.DEVNULL)))
    go.touch()  # every deliverer waits for this file, then delivers to approve:0 … approve:99 in order
    for _, proc in procs:
        assert proc.wait(120) == 0
    told: dict[str, list[str]] = {}
    for out, _ in procs:
        for token, payload in json.loads(out.read_text()).items():
            told.setdefault(token, []).append(payload)
    ctx = f"[{kind}]"
    wins = Counter({token: len(payloads) for token, payloads in told.items()})
    assert set(wins) == {f"approve:{i}" for i in range(ROUNDS)}, f"{ctx} tokens nobody won: {ROUNDS - len(wins)}"
    assert max(wins.values()) == 1, f"{ctx} tokens won twice: {[t for t, c in wins.items() if c > 1]}"
    with spec.open() as store:
        for i in range(ROUNDS):
            [entry] = store.read_entries(f"race-{i}")
            assert json.loads(entry.value or "null") == json.loads(told[f"approve:{i}"][0]), (
                f"{ctx} race-{i} holds {entry.value}, but {told[f'approve:{i}']} was told it delivered")


def test_a_payload_that_bypassed_validation_fails_the_await_on_replay(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A payload written by a deliverer that did not check it (an upstream process, an older telo) reaches the
    journal; the Await's step refuses it when the run continues, before anything downstream sees it."""
    from telo.journal.sqlite import SqliteStore

    shop = tmp_path / "orders"
    shutil.copytree(ORDERS, shop, ignore=shutil.ignore_patterns(".telo"))
    monkeypatch.setenv("ORDERS_PACK_SECONDS", "0")
    monkeypatch.setenv("ORDERS_CHARGE_SECONDS", "0")
    assert telo("run", "orders.yaml", "--input", "order=C-3", "--progress", "off", cwd=shop).returncode == 4
    with SqliteStore(shop / ".telo" / "orders.db") as store:
        assert store.deliver("approve:C-3", '{"approvedBy":{"$telo":"int","value":"42"}}', 2) == "order:C-3"
    rerun = telo("run", "orders.yaml", "--input", "order=C-3", "--progress", "off", cwd=shop, timeout=120)
    assert "ERR_DURABLE_PAYLOAD_INVALID" in rerun.stderr, rerun.stderr
    result = json.loads(telo("result", "order:C-3", "--journal", str(shop / ".telo" / "orders.db"), "--json",
                             cwd=shop).stdout)
    assert result["status"] == "failed" and result["error"]["code"] == "ERR_DURABLE_PAYLOAD_INVALID", result
    assert "shipped" not in (shop / ".telo" / "ledger.txt").read_text()
