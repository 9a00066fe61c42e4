"""Bugs a review of issue 18's code found (2026-12-04) and not yet fixed: each test here reproduces one and is
expected to fail (strict: a fix makes it pass, and CI then asks for it to move beside the code it tests)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "known_bugs" in str(item.path):
            item.add_marker(pytest.mark.xfail(strict=True, reason="a known issue-18 bug (tests/known_bugs)"))
