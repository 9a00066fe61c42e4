"""Helpers for manifest tests: write manifests to a temp dir, locate text in them."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from telo.manifest import Diagnostic, Manifest, ManifestLoadError, load_manifest


def locate(text: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the ``nth`` occurrence of ``needle`` in ``text``."""
    index = -1
    for _ in range(nth + 1):
        index = text.index(needle, index + 1)
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, column


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    def _write(text: str, name: str = "app.yaml") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return _write


@pytest.fixture
def load(write: Callable[..., Path]) -> Callable[..., Manifest]:
    def _load(text: str, env: dict[str, str] | None = None, **kw: object) -> Manifest:
        return load_manifest(write(text), env=env or {}, **kw)  # type: ignore[arg-type]

    return _load


@pytest.fixture
def fail(write: Callable[..., Path]) -> Callable[..., list[Diagnostic]]:
    """Load a manifest that must fail; return its error diagnostics."""

    def _fail(text: str, env: dict[str, str] | None = None) -> list[Diagnostic]:
        with pytest.raises(ManifestLoadError) as info:
            load_manifest(write(text), env=env or {})
        return [d for d in info.value.diagnostics if d.severity == "error"]

    return _fail


HEADER = """\
kind: Telo.Application
metadata: {name: T}
imports: {Run: run, Local: durable-local, Durable: durable, Journal: durable-journal-file, Py: python,
          Console: console, Timer: timer, Assert: assert, Test: test, Sql: sql}
"""
