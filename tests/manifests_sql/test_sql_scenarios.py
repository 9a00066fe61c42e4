"""The sql YAML scenarios: each manifest here runs through ``telo test`` in a fresh child (PASS iff it exits 0),
and ``telo check`` finds nothing in it. A ``pg_*.yaml`` scenario needs PostgreSQL: it reads ``TELO_TEST_PG_URL``
(skipped without it, a failure under CI, as every PostgreSQL test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from telo.analysis import check
from tests.pg_support import pg_url

HERE = Path(__file__).resolve().parent
# and upstream-style tests inside a module-like tree (issue 19): modules/<name>/telo.yaml stand in for upstream's
# Node libraries, and the tests import them by relative paths as upstream's own tests do
MANIFESTS = sorted(HERE.glob("*.yaml")) + sorted(HERE.glob("upstream/modules/*/tests/*.yaml"))


@pytest.mark.parametrize("manifest", [pytest.param(m, marks=[pytest.mark.postgres] if m.name.startswith("pg_")
                                                   else []) for m in MANIFESTS],
                         ids=[m.relative_to(HERE).as_posix() for m in MANIFESTS])
def test_scenario_passes_and_checks_clean(manifest: Path) -> None:
    if manifest.name.startswith("pg_"):
        pg_url()  # skips (or fails under CI) without a server; the child inherits TELO_TEST_PG_URL
    assert check(manifest) == []
    proc = subprocess.run([sys.executable, "-m", "telo", "test", "--timeout", "90", str(manifest)],
                          cwd=HERE.parents[1], capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_telo_check_and_telo_run_refuse_a_statement_reached_outside_the_transaction_it_requires() -> None:
    """`transaction:` is a requirement (upstream's sql module): the fixture's target reaches `debit` outside a
    Sql.Transaction on its connection. `telo check` names the step that needs one around it — `payout`'s
    `outside`, not `move`'s own call, which `transfer` makes inside one — and `telo run` runs nothing."""
    fixture = HERE / "upstream/modules/sql/tests/__fixtures__/zone_required.yaml"
    line = next(n for n, text in enumerate(fixture.read_text().splitlines(), 1) if "name: outside" in text)
    for command in ("check", "run"):
        proc = subprocess.run([sys.executable, "-m", "telo", command, str(fixture)], cwd=HERE.parents[1],
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, out
        assert f"zone_required.yaml:{line}:" in out and "ERR_ZONE_REQUIRED Sql.Command 'debit' requires a " \
            "Sql.Transaction on connection 'db'" in out, out
        assert "targets → Run.Sequence 'payout' → Run.Sequence 'move' → Sql.Command 'debit'" in out
