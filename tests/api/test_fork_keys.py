"""``App.fork(..., keep_keys=True)`` — the Python API's ``telo fork --keep-keys`` (issue 15, "The CLI tells the
truth"; event-log spec §2, §6): the fork's effects receive the ORIGINAL run's idempotency keys, decided in the
fork's journal, so another application continuing the fork over the same journal hands out the same keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import telo

keys: list[str] = []  # the idempotency key each execution of the effect received, in order


@telo.kind("ForkKeys.Charge")
def charge(inputs: dict[str, Any], ctx: telo.StepContext) -> dict[str, Any]:
    assert ctx.idempotency_key is not None
    keys.append(ctx.idempotency_key)
    return {"charged": inputs["label"]}


MANIFEST = """\
kind: Telo.Application
metadata: { name: ForkKeysApi, version: 1.0.0 }
imports: { Local: durable-local, Journal: durable-journal-sqlite, K: ForkKeys }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./.telo/runs.db
---
kind: K.Charge
metadata: { name: charge }
---
kind: Local.Workflow
metadata: { name: pay }
journal: !ref runs
runId: !cel "'pay:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - { name: reserve, invoke: !ref charge, inputs: { label: reserve } }
  - { name: charge, invoke: !ref charge, inputs: { label: charge } }
  - { name: ship, invoke: !ref charge, inputs: { label: ship } }
"""


def _journal(tmp_path: Path, kind: str) -> str:
    if kind == "sqlite":
        return str(tmp_path / "runs.db")
    return str(tmp_path / "journal") + "/"  # a file journal: a directory


@pytest.mark.parametrize("kind", ["sqlite", "file"])
def test_a_fork_keeping_the_keys_hands_its_effects_the_originals_even_in_another_application(
        tmp_path: Path, kind: str) -> None:
    journal = _journal(tmp_path, kind)
    keys.clear()
    with telo.load(MANIFEST, journal=journal) as app:
        assert app.run("pay", {"id": "A"}).ok
        assert keys == ["pay:A/steps/reserve", "pay:A/steps/charge", "pay:A/steps/ship"]
        after_reserve = next(c for c in app.checkpoints("pay:A") if c.path == "steps/reserve")
        kept = app.fork("pay:A", after_reserve, "pay:A-kept", keep_keys=True, continue_run=False)
        own = app.fork("pay:A", after_reserve, "pay:A-own", continue_run=False)
        assert kept.run_id == "pay:A-kept" and own.run_id == "pay:A-own"
        status = app.status(kept)
        assert (status.forked_from, status.keeps_keys_of) == ("pay:A", "pay:A")
        assert (app.status(own).forked_from, app.status(own).keeps_keys_of) == ("pay:A", None)
        assert app.status("pay:A").forked_from is None  # the original is no fork
    keys.clear()
    # Another application over the same journal (another store object) continues both forks: the decision is
    # read back from the journal, not remembered by the application that made the fork.
    with telo.load(MANIFEST, journal=journal) as again:
        assert again.run_due() == 2
        assert again.result("pay:A-kept").ok and again.result("pay:A-own").ok
    assert sorted(keys) == ["pay:A-own/steps/charge", "pay:A-own/steps/ship",
                            "pay:A/steps/charge", "pay:A/steps/ship"]


def test_a_fork_of_a_fork_keeps_the_roots_keys_and_the_journal_shows_them() -> None:
    keys.clear()
    with telo.load(MANIFEST, journal="memory:") as app:
        assert app.run("pay", {"id": "B"}).ok
        start = app.checkpoints("pay:B")[0]
        assert start.path == "(start)"
        app.fork("pay:B", start, "pay:B-1", keep_keys=True, continue_run=False)
        first = next(c for c in app.checkpoints("pay:B-1") if c.path == "(start)")
        app.fork("pay:B-1", first, "pay:B-2", keep_keys=True)
        assert app.wait("pay:B-2", 10).ok
        assert app.status("pay:B-2").keeps_keys_of == "pay:B"  # the root's, not the fork it was made from
        forked = next(e for e in app.journal("pay:B-2") if e.path == "@forked")
        assert forked.value == {"from": "pay:B-1", "checkpoint": first.seq, "keys": "pay:B"}
    assert keys == ["pay:B/steps/reserve", "pay:B/steps/charge", "pay:B/steps/ship"] * 2
