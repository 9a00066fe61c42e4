"""The manifest digest (spec §5.2, §9): a run never silently replays against changed code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from telo.durable.digest import digest_of
from telo.manifest import load_manifest
from tests.greeting_manifest import APPROVAL, GREET_AND_WAIT, manifest
from tests.process import telo

MANIFEST = manifest("Digest", APPROVAL, "kind: Run.Value\nmetadata: { name: unrelated }\nvalue: 1\n", GREET_AND_WAIT)


def status(cwd: Path, run: str) -> dict[str, object]:
    out = telo("status", run, "--journal", "journal.db", "--json", cwd=cwd)
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_digest_covers_the_reachable_resources_only(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(MANIFEST)
    before = digest_of(load_manifest(tmp_path / "m.yaml"), "flow")
    assert set(before.resources) == {"flow", "runs", "greet", "approval"} and before.scope == "reachable"
    (tmp_path / "m.yaml").write_text(MANIFEST.replace("value: 1", "value: 2") + "# a comment\n")
    assert digest_of(load_manifest(tmp_path / "m.yaml"), "flow").value == before.value
    (tmp_path / "m.yaml").write_text(MANIFEST.replace("'hello ' + inputs.who", "'hi ' + inputs.who"))
    assert digest_of(load_manifest(tmp_path / "m.yaml"), "flow").value != before.value


@pytest.mark.timeout(120)
def test_a_changed_manifest_holds_the_run_until_forced(tmp_path: Path) -> None:
    m = tmp_path / "m.yaml"
    m.write_text(MANIFEST)
    assert telo("run", "m.yaml", "--input", "id=a1", cwd=tmp_path).returncode == 4  # parked: not settled
    first = status(tmp_path, "flow:a1")
    assert first["status"] == "parked"
    # a cosmetic change outside the reachable set does not hold the run
    m.write_text(MANIFEST.replace("value: 1", "value: 2"))
    assert telo("deliver", "go:a1", "--journal", "journal.db", "--payload", '{"by": "eve"}',
                cwd=tmp_path).returncode == 0
    # ... but a change to a reachable resource does
    m.write_text(MANIFEST.replace("'hello ' + inputs.who", "'hi ' + inputs.who"))
    assert telo("run", "m.yaml", "--input", "id=a1", cwd=tmp_path).returncode == 4  # held
    held = status(tmp_path, "flow:a1")
    assert held["status"] == "parked"
    parked = held["parked"]
    assert isinstance(parked, dict) and parked["path"] == "@manifest[0]"
    assert "ERR_DURABLE_MANIFEST_CHANGED" in parked["reason"] and "changed: greet" in parked["reason"]
    assert "telo resume flow:a1 --force" in parked["reason"]
    refused = telo("resume", "flow:a1", "--journal", "journal.db", cwd=tmp_path)
    assert refused.returncode != 0 and "ERR_DURABLE_MANIFEST_CHANGED" in refused.stderr
    assert telo("resume", "flow:a1", "--force", "--journal", "journal.db", cwd=tmp_path).returncode == 0
    assert telo("run", "m.yaml", "--input", "id=a1", cwd=tmp_path).returncode == 0
    done = status(tmp_path, "flow:a1")
    assert done["status"] == "completed"
    result = done["result"]
    assert isinstance(result, dict)
    assert result["steps"]["first"]["result"] == "hello ada"  # replayed from the journal
    assert result["steps"]["last"]["result"] == "hi eve"  # executed by the new manifest


@pytest.mark.timeout(120)
def test_a_journaled_target_outside_the_reachable_set_widens_the_digest_to_the_manifest(tmp_path: Path) -> None:
    from telo.journal import eventlog, open_store

    m = tmp_path / "m.yaml"
    m.write_text(MANIFEST)
    assert telo("run", "m.yaml", "--input", "id=w1", cwd=tmp_path).returncode == 4  # parked
    # `greet` (journaled at steps/first) is no longer reachable once both steps invoke `unrelated` instead:
    # the reachable set alone cannot say what the run depends on, so the whole manifest is compared.
    m.write_text(MANIFEST.replace("invoke: !ref greet", "invoke: !ref unrelated"))
    assert telo("run", "m.yaml", "--input", "id=w1", cwd=tmp_path).returncode == 4  # held
    with open_store(str(tmp_path / "journal.db")) as store:
        held = eventlog.recover(store, "flow:w1").entries["@held[0]"].decode("flow:w1")
    assert held["scope"] == "manifest" and "flow" in held["changed"]
    assert held["digest"] == digest_of(load_manifest(m), "flow").widened().value
