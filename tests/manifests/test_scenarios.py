"""The YAML scenario suite: every manifest under tests/manifests/ (``__fixtures__`` aside) is a Telo test.

The manifests run through ``telo test`` (one fresh child process each, PASS iff it exits 0), all of the
selected ones in ONE ``telo test --concurrency N`` call so the suite stays fast; each manifest is still
reported as its own pytest case, with its output when it fails. Select some with ``-k`` as usual: only the
selected manifests are run.

A scenario that exposes a bug left open in ``src/`` is listed in :data:`XFAIL` with the reason (strict: once
the bug is fixed the case fails until its entry is removed).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MANIFESTS = sorted(p for p in HERE.rglob("*.yaml") if "__fixtures__" not in p.relative_to(HERE).parts)
CONCURRENCY = int(os.environ.get("TELO_SCENARIO_CONCURRENCY", "4"))

# relative path -> why it is expected to fail (a bug in src/ that is reported, not fixed)
XFAIL: dict[str, str] = {}

_RESULT_LINE = re.compile(r"^(PASS|FAIL) (.+?) \((?:exit -?\d+, )?[\d.]+ s\)$")


def rel(path: Path) -> str:
    return path.relative_to(HERE).as_posix()


def _params() -> list[object]:
    out: list[object] = []
    for m in MANIFESTS:
        reason = XFAIL.get(rel(m))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(m, id=rel(m), marks=marks))
    return out


def run_telo_test(manifests: list[Path], *, concurrency: int = CONCURRENCY) -> dict[Path, tuple[bool, str]]:
    """Run ``telo test`` on ``manifests`` at once; each manifest's (passed, report lines)."""
    proc = subprocess.run(
        [sys.executable, "-m", "telo", "test", "--concurrency", str(concurrency), "--timeout", "90",
         *map(str, manifests)],
        cwd=REPO, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
    )
    outcomes: dict[Path, tuple[bool, str]] = {}
    current: Path | None = None
    details: dict[Path, list[str]] = {}
    for line in proc.stdout.splitlines():
        m = _RESULT_LINE.match(line)
        if m:
            current = Path(m.group(2)).resolve()
            outcomes[current] = (m.group(1) == "PASS", "")
            details[current] = [line]
        elif current is not None and line.startswith("    "):
            details[current].append(line)
    return {m: (ok, "\n".join(details[m])) for m, (ok, _) in outcomes.items()} | {
        m: (False, f"`telo test` reported nothing for it (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        for m in manifests if m not in outcomes
    }


@pytest.fixture(scope="session")
def outcomes(request: pytest.FixtureRequest) -> dict[Path, tuple[bool, str]]:
    selected = [item.callspec.params["manifest"] for item in request.session.items
                if getattr(item, "callspec", None) is not None and "manifest" in item.callspec.params]
    return run_telo_test(selected or MANIFESTS)


def test_the_suite_is_not_empty() -> None:
    assert len(MANIFESTS) >= 30


@pytest.mark.parametrize("manifest", _params())
def test_scenario(manifest: Path, outcomes: dict[Path, tuple[bool, str]]) -> None:
    passed, report = outcomes[manifest]
    assert passed, f"{rel(manifest)} failed under `telo test`:\n{report}"


def test_an_unbounded_loop_is_refused_at_load() -> None:
    """INVALID_LOOP: a Run.Loop with neither `condition` nor `maxIterations` never runs; telo-python reports
    it when the manifest loads (upstream raises INVALID_LOOP when the loop is invoked)."""
    fixture = HERE / "__fixtures__" / "invalid_loop.yaml"
    check = subprocess.run([sys.executable, "-m", "telo", "check", str(fixture)], cwd=REPO, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode != 0
    assert "Run.Loop 'unbounded'" in check.stdout
    assert "at least one of 'condition' or 'maxIterations' is required" in check.stdout
    run = subprocess.run([sys.executable, "-m", "telo", "run", str(fixture)], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode != 0
    assert "nothing was run" in run.stderr


def test_the_host_environment_overrides_env_files() -> None:
    """env/variables_secrets.yaml covers .env and .env.local; the host environment wins over both."""
    fixture = HERE / "__fixtures__" / "env_host" / "host_wins.yaml"
    proc = subprocess.run([sys.executable, "-m", "telo", "test", str(fixture)], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "TELO_SCENARIO_HOST_WINS": "from the host"})
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_parking_placed_inside_a_no_suspend_zone_is_refused_at_load() -> None:
    fixture = HERE / "__fixtures__" / "await_in_transaction.yaml"
    check = subprocess.run([sys.executable, "-m", "telo", "check", str(fixture)], cwd=REPO, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode != 0
    assert check.stdout.count("ZONE_ATTRIBUTE_VIOLATED") == 2, check.stdout
    assert "retries with a last backoff of 32000 ms" in check.stdout  # capped by the default maxDelay


def test_unreadable_variables_are_all_reported_and_nothing_runs() -> None:
    fixture = HERE / "__fixtures__" / "env_missing" / "missing.yaml"
    env = {k: v for k, v in os.environ.items() if k != "TELO_SCENARIO_SURELY_UNSET"}
    proc = subprocess.run([sys.executable, "-m", "telo", "run", str(fixture)], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**env, "TELO_SCENARIO_BAD_INT": "abc"})
    assert proc.returncode != 0
    assert "ERR_MANIFEST_VALIDATION_FAILED" in proc.stderr
    assert "TELO_SCENARIO_SURELY_UNSET" in proc.stderr and "TELO_SCENARIO_BAD_INT" in proc.stderr
    assert "2 problem(s); nothing was run" in proc.stderr


def test_bindings_reading_each_other_in_a_cycle_are_refused() -> None:
    fixture = HERE / "__fixtures__" / "binding_cycle.yaml"
    run = subprocess.run([sys.executable, "-m", "telo", "run", str(fixture)], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode != 0
    assert "a → b → a read each other in a cycle" in run.stderr


def test_a_failing_scenario_fails() -> None:
    """The driver is not vacuous: a manifest whose assertion fails, and one whose Assert.Events does not
    match, are both reported FAIL."""
    fixtures = [HERE / "__fixtures__" / "failing_equals.yaml", HERE / "__fixtures__" / "failing_events.yaml"]
    results = run_telo_test(fixtures, concurrency=2)
    assert [results[f][0] for f in fixtures] == [False, False]
    assert "ERR_ASSERTION_FAILED" in results[fixtures[0]][1]
    assert "expected 2 time(s), saw 1" in results[fixtures[1]][1]
