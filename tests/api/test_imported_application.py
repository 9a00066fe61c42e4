"""A test manifest imports the application under test (issue 15; reference §1 ``imports``).

``imports: {App: ../app/orders.yaml}`` names a ``Telo.Application``: every resource it declares is reachable as
``!ref App.<name>`` and is created in the application's own namespace — its ``!ref`` names are its own, not the
importer's, and its module URL stays its own, so a run started through the import is the run the application's
own manifest continues. Its targets are never run by the importer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import telo
from telo.errors import TeloError

charged: list[tuple[str | None, Any]] = []


@telo.kind("ImpT.Charge", key_consuming=True)
def charge(inputs: dict[str, Any], ctx: telo.StepContext) -> dict[str, Any]:
    charged.append((ctx.idempotency_key, inputs["amount"]))
    return {"charged": inputs["amount"]}


APPLICATION = """\
kind: Telo.Application
metadata: { name: Orders }
imports: { Imp: ImpT, Local: durable-local, Durable: durable, Journal: durable-journal-sqlite }
targets:
  - { name: demo, invoke: !ref order, inputs: { id: demo, amount: 1 } }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./orders.db
---
kind: Imp.Charge
metadata: { name: charge }
---
kind: Durable.Await
metadata: { name: approval }
token: !cel "'approve:' + inputs.id"
---
kind: Local.Workflow
metadata: { name: order }
journal: !ref runs
runId: !cel "'order:' + inputs.id"
inputs: { id: !cel "inputs.id", amount: !cel "inputs.amount" }
steps:
  - { name: charge, invoke: !ref charge, inputs: { amount: !cel "inputs.amount" } }
  - { name: approve, invoke: !ref approval, inputs: { id: !cel "inputs.id" } }
"""

# The test's own `charge` has the application's effect's name: the imported workflow must not see it.
TEST_MANIFEST = """\
kind: Telo.Application
metadata: { name: OrdersTest }
imports: { App: ../app/orders.yaml, Run: run }
---
kind: Run.Value
metadata: { name: charge }
value: the test's charge, not the application's
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    charged.clear()
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "orders.yaml").write_text(APPLICATION)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "orders_test.yaml").write_text(TEST_MANIFEST)
    return tmp_path


def test_an_imported_workflow_runs_in_its_applications_namespace_and_identity(tree: Path) -> None:
    with telo.load(tree / "tests" / "orders_test.yaml") as app:
        started = app.run("App.order", {"id": "1", "amount": 5}, wait=10)
        assert started.status == "parked" and started.parked is not None and started.parked.token == "approve:1"
        assert charged == [("order:1/steps/charge", 5)]  # the application's charge, not the test's Run.Value
        with pytest.raises(TeloError, match="no run 'order:demo'"):  # the application's targets did not run
            app.status("order:demo")
    # the run lives in the application's own journal (its relative path resolves against its manifest) ...
    assert (tree / "app" / "orders.db").is_file() and not list((tree / "tests").glob("*.db"))
    # ... and is the run the application's own manifest continues: same target identity, no mismatch
    with telo.load(tree / "app" / "orders.yaml") as own:
        assert own.deliver("approve:1", {"ok": True}).delivered
        done = own.wait("order:1", timeout=10)
    assert done.status == "completed", done
    assert charged == [("order:1/steps/charge", 5)]  # replayed, never charged again


def test_a_worker_continues_the_runs_of_an_imported_workflow(tree: Path, telo_journal: str) -> None:
    with telo.load(tree / "tests" / "orders_test.yaml", journal=telo_journal) as app:  # replaces its journal
        app.schedule("App.order", {"id": "2", "amount": 3}, after=0)
        assert app.status("order:2").status == "scheduled"
        app.serve(until_idle=True)
        assert app.status("order:2").status == "parked"
    assert charged == [("order:2/steps/charge", 3)]
    assert not (tree / "app" / "orders.db").exists()  # the given journal replaced the application's


def test_a_workflow_not_found_names_the_imported_ones(tree: Path, telo_journal: str) -> None:
    with telo.load(tree / "tests" / "orders_test.yaml", journal=telo_journal) as app, \
            pytest.raises(TeloError) as caught:
        app.start("order", {"id": "3", "amount": 1})
    assert caught.value.code == "ERR_WORKFLOW_NOT_FOUND"
    assert "App.order" in (caught.value.hint or "")


def test_two_journals_in_reach_need_the_journal_named(tree: Path) -> None:
    """The test's own journal beside the imported application's: which one `status` reads is not guessed."""
    (tree / "tests" / "orders_test.yaml").write_text(
        TEST_MANIFEST.replace("imports: { App: ../app/orders.yaml, Run: run }",
                              "imports: { App: ../app/orders.yaml, Run: run, Journal: durable-journal-sqlite }")
        + "---\nkind: Journal.Journal\nmetadata: { name: runs }\npath: ./test.db\n")
    with telo.load(tree / "tests" / "orders_test.yaml") as app, pytest.raises(TeloError) as caught:
        app.status("order:1")
    assert caught.value.code == "ERR_JOURNAL_AMBIGUOUS" and "2 journals" in caught.value.message
