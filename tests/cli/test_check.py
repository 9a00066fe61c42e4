"""`telo check` and `telo run` refuse, before anything runs, what used to load silently (issue 15, "`telo check`
and loading"): a misspelt step field (the retry disappeared), a read of a step no body declares, and a
`Python.Function` whose `function` does not import. Driven through the real command."""

from __future__ import annotations

from pathlib import Path

from tests.process import telo

MANIFEST = """\
kind: Telo.Application
metadata: { name: Shop, version: 1.0.0 }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Py: python }
targets:
  - { name: start, invoke: !ref order, inputs: {} }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Py.Function
metadata: { name: charge }
function: shop:%(function)s
---
kind: Local.Workflow
metadata: { name: order }
journal: !ref runs
steps:
  - name: charge
    invoke: !ref charge
    %(retry)s: { attempts: 3 }
  - name: receipt
    invoke: !ref charge
    inputs: { paid: !cel "steps.%(read)s.result" }
"""

SHOP = """\
LEDGER = []


def charge(inputs):
    LEDGER.append(inputs)
    return {"ok": True}
"""


def write(tmp_path: Path, *, function: str = "charge", retry: str = "retry", read: str = "charge") -> Path:
    (tmp_path / "shop.py").write_text(SHOP)
    manifest = tmp_path / "shop.yaml"
    manifest.write_text(MANIFEST % {"function": function, "retry": retry, "read": read})
    return manifest


def test_a_sound_manifest_checks_clean(tmp_path: Path) -> None:
    checked = telo("check", str(write(tmp_path)), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 error(s), 0 warning(s)" in checked.stdout


def test_a_misspelt_retry_is_refused_by_check_and_run(tmp_path: Path) -> None:
    manifest = write(tmp_path, retry="retyr")
    checked = telo("check", str(manifest), cwd=tmp_path)
    assert checked.returncode == 1, checked.stdout
    assert f"{manifest}:21:5: ERR_MANIFEST_VALIDATION_FAILED" in checked.stdout, checked.stdout
    assert "unknown field 'retyr' on step 'charge'" in checked.stdout and "did you mean 'retry'?" in checked.stdout
    ran = telo("run", str(manifest), cwd=tmp_path)
    assert ran.returncode == 3 and "nothing was run" in ran.stderr, ran.stderr
    assert not (tmp_path / "runs.db").exists()


def test_a_read_of_an_undeclared_step_is_refused_by_check_and_run(tmp_path: Path) -> None:
    manifest = write(tmp_path, read="credits")
    checked = telo("check", str(manifest), cwd=tmp_path)
    assert checked.returncode == 1, checked.stdout
    assert f"{manifest}:24:27: ERR_MANIFEST_CEL" in checked.stdout, checked.stdout
    assert "reads steps.credits, but no step of this body is named 'credits'" in checked.stdout
    ran = telo("run", str(manifest), cwd=tmp_path)
    assert ran.returncode == 3 and "ERR_MANIFEST_CEL" in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
    assert not (tmp_path / "runs.db").exists()


def test_a_function_that_does_not_import_is_a_check_error_not_a_boot_failure(tmp_path: Path) -> None:
    manifest = write(tmp_path, function="chrage")
    checked = telo("check", str(manifest), cwd=tmp_path)
    assert checked.returncode == 1, checked.stdout
    assert f"{manifest}:13:11: ERR_PYTHON_FUNCTION_NOT_FOUND" in checked.stdout, checked.stdout
    assert "module 'shop' has no 'chrage'" in checked.stdout and "did you mean 'charge'?" in checked.stdout


def test_a_module_that_fails_to_import_is_reported_not_a_traceback(tmp_path: Path) -> None:
    manifest = write(tmp_path)
    (tmp_path / "shop.py").write_text("raise RuntimeError('no payment provider configured')\n")
    checked = telo("check", str(manifest), cwd=tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "ERR_PYTHON_FUNCTION_NOT_FOUND" in checked.stdout and "Traceback" not in checked.stdout + checked.stderr
    assert "RuntimeError: no payment provider configured" in checked.stdout, checked.stdout
