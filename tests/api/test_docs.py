"""Every Python example of docs/python-api.md runs: scripts are executed, ``# test_*.py`` blocks run under pytest."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"
_TEXT = DOC.read_text(encoding="utf-8")
# Each block padded with the newlines before it, so a traceback names the doc's own line numbers.
BLOCKS = ["\n" * _TEXT.count("\n", 0, m.start(1)) + m.group(1)
          for m in re.finditer(r"^```python\n(.*?)^```", _TEXT, flags=re.S | re.M)]
SCRIPTS = [b for b in BLOCKS if not b.lstrip("\n").startswith("# test_")]
TESTS = [b.lstrip("\n") for b in BLOCKS if b.lstrip("\n").startswith("# test_")]


def test_the_doc_has_examples() -> None:
    assert len(SCRIPTS) >= 5 and len(TESTS) >= 1


@pytest.mark.parametrize("source", SCRIPTS, ids=[f"example{i}" for i in range(len(SCRIPTS))])
def test_each_example_runs(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the examples' relative journal paths land here
    exec(compile(source, str(DOC), "exec"), {"__name__": "__doc_example__"})


@pytest.mark.parametrize("source", TESTS, ids=[f"test{i}" for i in range(len(TESTS))])
def test_each_test_example_passes_under_pytest(source: str, pytester: pytest.Pytester) -> None:
    name = source.split()[1].removesuffix(".py")
    pytester.makepyfile(**{name: source})
    result = pytester.runpytest("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=source.count("\ndef test_"))
    assert not (pytester.path / "production.db").exists()  # the test's journal, not the manifest's
