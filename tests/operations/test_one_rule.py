"""One rule per operator question, whichever front end asks (issue 13): the CLI, the Python API and the
dashboard each disagreed with another before the operations layer (a)-(d)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import telo
from telo.durable.operator import resolve_unconfirmed
from telo.journal.model import Entry, Outcome
from telo.journal.sqlite import SqliteStore
from telo.operations import actions
from telo.operations.journals import open_journal
from telo.values import to_plain
from tests.operations.support import ORIGIN, api, cli_json, dashboard, parked_with_schema, telo_cli
from tests.server.support import parked_run

FORK_ID = r"flow:f:fork:[0-9a-f]{8}"  # docs/cli.md: <run>:fork:<8 hex>


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return tmp_path / "journal.db"


@pytest.fixture
def store(journal: Path) -> SqliteStore:
    return SqliteStore(str(journal))


# (a) a fork's default id: `<run>~fork-<hex>` from the API, `<run>:fork:<hex>` from the CLI.

def test_a_forks_default_id_is_the_same_from_the_api_and_the_cli(tmp_path: Path, journal: Path,
                                                                   store: SqliteStore) -> None:
    parked_run(store, "flow:f", "go:f")
    from_cli = cli_json("fork", "flow:f", "0", "--journal", str(journal))["run"]
    with api(tmp_path, journal) as app:
        from_api = app.fork("flow:f", app.checkpoints("flow:f")[0], continue_run=False).run_id
    assert re.fullmatch(FORK_ID, from_cli) and re.fullmatch(FORK_ID, from_api), (from_cli, from_api)
    assert re.fullmatch(FORK_ID, actions.fork_id("flow:f"))


# (b) a journal path that does not exist: `telo status` created it, `telo runs list` refused it.

READ_AND_OPERATE = [
    ["status", "r"], ["result", "r"], ["deliver", "tok"], ["cancel", "r"], ["resume", "r"],
    ["resolve", "r", "steps/x", "--redrive"], ["runs", "list"], ["runs", "show", "r"], ["runs", "journal", "r"],
    ["runs", "checkpoints", "r"], ["restore", "r", "0"], ["fork", "r", "0"],
]


@pytest.mark.parametrize("command", READ_AND_OPERATE, ids=lambda c: " ".join(c[:2]))
def test_every_read_or_operate_command_refuses_a_missing_journal_and_creates_nothing(
        tmp_path: Path, command: list[str]) -> None:
    typo = tmp_path / "typo.db"
    out = telo_cli(*command, "--journal", str(typo))
    assert out.exit_code == 1 and "error: ERR_JOURNAL_NOT_FOUND" in out.stderr, out.output
    assert not typo.exists() and list(tmp_path.iterdir()) == []


def test_a_manifests_journal_that_does_not_exist_is_refused_too(tmp_path: Path) -> None:
    from tests.server.support import MANIFEST

    (tmp_path / "m.yaml").write_text(MANIFEST)
    out = telo_cli("status", "r", "--manifest", str(tmp_path / "m.yaml"))
    assert out.exit_code == 1 and "error: ERR_JOURNAL_NOT_FOUND" in out.stderr, out.output
    assert not (tmp_path / "journal.db").exists()


def test_the_dashboard_refuses_a_missing_journal(tmp_path: Path) -> None:
    import io

    from telo.server.serve import serve

    with pytest.raises(telo.TeloError, match="ERR_JOURNAL_NOT_FOUND"):
        serve(str(tmp_path / "typo.db"), port=0, out=io.StringIO())
    assert list(tmp_path.iterdir()) == []


def test_only_what_creates_runs_may_create_the_journal(tmp_path: Path) -> None:
    with pytest.raises(telo.TeloError, match="ERR_JOURNAL_NOT_FOUND"):
        open_journal(str(tmp_path / "a.db"))
    open_journal(str(tmp_path / "a.db"), create=True).close()
    assert (tmp_path / "a.db").exists()
    with api(tmp_path, tmp_path / "new.db") as app:  # telo.load(journal=…) starts runs: it may create it
        assert app.manifest is not None
    assert (tmp_path / "new.db").exists()


# (c) a delivered payload is checked against the awaiting resource's schema by every front end.

def test_a_wrong_payload_is_refused_alike_by_the_cli_the_api_and_the_dashboard(tmp_path: Path, journal: Path,
                                                                                store: SqliteStore) -> None:
    parked_with_schema(store, "flow:p", "go:p")
    cli_out = telo_cli("deliver", "go:p", "--payload", '{"by": 42}', "--journal", str(journal))
    assert cli_out.exit_code == 3 and "ERR_DURABLE_PAYLOAD_INVALID" in cli_out.stderr, cli_out.output
    with api(tmp_path, journal) as app, pytest.raises(telo.TeloError, match="ERR_DURABLE_PAYLOAD_INVALID"):
        app.deliver("go:p", {"by": 42}, continue_run=False)
    with dashboard(store) as client:
        r = client.post("/api/deliver", json={"token": "go:p", "payload": {"by": 42}}, headers=ORIGIN)
        assert r.status_code == 400 and r.json()["error"]["code"] == "ERR_DURABLE_PAYLOAD_INVALID"
    record = store.read_run("flow:p")
    assert record is not None and record.status == "parked"  # nothing was delivered
    assert cli_json("deliver", "go:p", "--payload", '{"by": "ada"}', "--journal", str(journal))["delivered"]


# (d) the unconfirmed-effects list of a settled run: `telo status` showed it, `App.status()` dropped it.

def test_a_settled_runs_unconfirmed_effects_are_listed_alike_everywhere(tmp_path: Path, journal: Path,
                                                                        store: SqliteStore) -> None:
    parked_run(store, "flow:u", "go:u")
    store.append("flow:u", Entry.decided("steps/charge/inputs", "inputs", {"amount": 5}))  # an intent, no receipt
    resolve_unconfirmed(store, "flow:u", "steps/charge", "skip", {"charged": "by hand"})
    store.complete("flow:u", Outcome.completed({"steps": {}}))
    expected = [{"step": "steps/charge",
                 "resolution": {"action": "skip", "by": "operator", "value": {"charged": "by hand"}}}]
    assert cli_json("status", "flow:u", "--journal", str(journal))["unconfirmedEffects"] == expected
    with api(tmp_path, journal) as app:
        status = app.status("flow:u")
        assert status.settled and [to_plain(dict(u)) for u in status.unconfirmed_effects] == expected
    with dashboard(store) as client:
        shown = client.get("/api/runs/flow%3Au").json()["unconfirmedEffects"]
        assert [{"step": u["step"], "resolution": u["value"]} for u in shown] == expected
