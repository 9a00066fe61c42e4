"""Issue 15, "The CLI tells the truth": a journal is found without `--journal` — `TELO_JOURNAL`, `TELO_MANIFEST`,
or the nearest project file (`telo.toml`, `[tool.telo]` in pyproject.toml) — an error says which of them named a
journal that is not there, and the commands telo's own hints print work as pasted (the real `telo` command)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from telo.journal.model import Admission, Outcome, Parked
from telo.journal.sqlite import SqliteStore
from tests.cli.support import Env

pytestmark = pytest.mark.timeout(240)


def hinted(stderr: str) -> list[str]:
    """The backquoted ``telo …`` commands of the hint lines."""
    return [c for line in stderr.splitlines() if line.startswith("hint:")
            for c in re.findall(r"`(telo [^`]*)`", line)]


def paste(env: Env, command: str, cwd: Path | None = None, env_vars: dict[str, str] | None = None) -> int:
    """Run a hinted command as a shell would read it, in the same place; its exit code."""
    argv = ["null" if a == "JSON" else a for a in shlex.split(command)]  # the placeholder, filled in
    assert argv[0] == "telo"
    return env.telo(*argv[1:], cwd=cwd, env=env_vars).returncode


def test_telo_journal_and_telo_manifest_name_the_journal(sqlite_env: Env) -> None:
    env = sqlite_env
    env.run("a")
    bare = env.telo("status", "flow:a")
    assert bare.returncode == 2 and "TELO_JOURNAL" in bare.stderr and "telo.toml" in bare.stderr, bare.stderr

    by_env = env.telo("status", "flow:a", "--json", env={"TELO_JOURNAL": "journal.db"})
    assert by_env.returncode == 0 and '"status": "completed"' in by_env.stdout, by_env.stderr
    listed = env.telo("runs", "list", env={"TELO_MANIFEST": "m.yaml"})
    assert listed.returncode == 0 and "flow:a" in listed.stdout, listed.stderr

    missing = env.telo("status", "flow:a", env={"TELO_JOURNAL": str(env.root / "nope.db")})
    assert missing.returncode == 1, missing.stderr
    assert f"error: ERR_JOURNAL_NOT_FOUND: the journal named by TELO_JOURNAL, '{env.root / 'nope.db'}', does not " \
        "exist" in missing.stderr
    assert "hint: fix TELO_JOURNAL" in missing.stderr
    assert not (env.root / "nope.db").exists()  # refused, never created
    gone = env.telo("runs", "list", env={"TELO_MANIFEST": "gone.yaml"})
    assert gone.returncode == 1 and "the manifest named by TELO_MANIFEST, 'gone.yaml', does not exist" in gone.stderr
    ui = env.telo("ui", env={"TELO_JOURNAL": "nope.db"})
    assert ui.returncode == 1 and "the journal named by TELO_JOURNAL, 'nope.db', does not exist" in ui.stderr

    # A flag beats the environment: --journal names the journal even when TELO_JOURNAL names another.
    flagged = env.telo("status", "flow:a", "--journal", "journal.db", env={"TELO_JOURNAL": "nope.db"})
    assert flagged.returncode == 0, flagged.stderr


def test_the_nearest_project_file_names_the_journal(sqlite_env: Env) -> None:
    env = sqlite_env
    env.run("a")
    sub = env.root / "deep" / "er"
    sub.mkdir(parents=True)
    (env.root / "telo.toml").write_text('journal = "journal.db"\n')  # relative to telo.toml, not the cwd
    found = env.telo("status", "flow:a", "--json", cwd=sub)
    assert found.returncode == 0 and '"completed"' in found.stdout, found.stderr
    # TELO_JOURNAL beats the project file.
    assert env.telo("status", "flow:a", cwd=sub, env={"TELO_JOURNAL": "x.db"}).returncode == 1

    # [tool.telo] in pyproject.toml, naming the manifest (whose journal is meant); a nearer telo.toml wins.
    (env.root / "telo.toml").unlink()
    (env.root / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.telo]\nmanifest = "m.yaml"\n')
    listed = env.telo("runs", "list", cwd=sub)
    assert listed.returncode == 0 and "flow:a" in listed.stdout, listed.stderr
    (sub / "telo.toml").write_text('journal = "missing.db"\n')
    wrong = env.telo("runs", "list", cwd=sub)
    assert wrong.returncode == 1, wrong.stderr
    assert f"the journal named by {sub / 'telo.toml'}, '{sub / 'missing.db'}', does not exist" in wrong.stderr

    # `telo run` prints follow-up commands without --manifest when the project file finds its journal.
    (sub / "telo.toml").unlink()
    parked = env.telo("run", "m.yaml", "--input", "id=p", "--input", "gate=true")
    assert parked.returncode == 4 and "(deliver it: telo deliver go:p --payload JSON;" in parked.stdout, parked.stdout
    (env.root / "pyproject.toml").unlink()
    parked = env.telo("run", "m.yaml", "--input", "id=p", "--input", "gate=true")
    assert "(deliver it: telo deliver go:p --manifest m.yaml --payload JSON;" in parked.stdout, parked.stdout


def add_runs(env: Env) -> None:
    """A run waiting for a delivery and a settled one, both with ids a shell would split."""
    store = SqliteStore(str(env.root / "journal.db"))
    try:
        store.admit(Admission.of("wait here", workflow="flow"))
        store.park("wait here", Parked("steps/approve", "approval", "go: now", None, None))
        store.admit(Admission.of("done; run", workflow="flow"))
        store.complete("done; run", Outcome.completed(None))
    finally:
        store.close()


def test_hints_print_commands_that_work_as_pasted(sqlite_env: Env) -> None:
    env = sqlite_env
    env.run("a")
    add_runs(env)

    waiting = env.telo("resume", "wait here", "--journal", "journal.db")
    assert waiting.returncode == 1, waiting.stderr
    assert hinted(waiting.stderr) == ["telo deliver --journal journal.db 'go: now' --payload JSON"]
    assert paste(env, hinted(waiting.stderr)[0]) == 0  # delivered: the pasted command found run and journal
    settled = env.telo("resume", "done; run", "--journal", "journal.db")
    assert hinted(settled.stderr) == ["telo runs checkpoints --journal journal.db 'done; run'"]
    assert paste(env, hinted(settled.stderr)[0]) == 0
    unknown = env.telo("status", "flow:nope", "--manifest", "m.yaml")
    assert unknown.returncode == 1 and hinted(unknown.stderr) == ["telo runs list --manifest m.yaml"]
    assert paste(env, hinted(unknown.stderr)[0]) == 0
    restored = env.telo("restore", "flow:a", "0", "--journal", "journal.db")
    assert restored.returncode == 0 and "telo worker MANIFEST" in restored.stderr  # not a journal command
    by_manifest = env.telo("restore", "flow:a", "0", "--manifest", "m.yaml")  # (it said MANIFEST here too)
    assert by_manifest.returncode == 0 and "`telo worker m.yaml`" in by_manifest.stderr, by_manifest.stderr

    # Where the environment or a project file finds the journal, the hint leaves the flag out — and still works.
    named = {"TELO_JOURNAL": "journal.db"}
    settled = env.telo("resume", "done; run", env=named)
    assert hinted(settled.stderr) == ["telo runs checkpoints 'done; run'"]
    assert paste(env, hinted(settled.stderr)[0], env_vars=named) == 0
    (env.root / "telo.toml").write_text('journal = "journal.db"\n')
    settled = env.telo("resume", "done; run", "--journal", "journal.db")  # the flag names what telo.toml does
    assert hinted(settled.stderr) == ["telo runs checkpoints 'done; run'"]
    assert paste(env, hinted(settled.stderr)[0]) == 0
