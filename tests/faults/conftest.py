"""Fixtures of the fault suite: one payment workflow per store kind (SQLite, file, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.support import Payments

KINDS = ("sqlite", "file", "postgres")


@pytest.fixture
def payments(tmp_path: Path) -> Iterator[Callable[..., Payments]]:
    made: list[Payments] = []

    def make(kind: str, **options: Any) -> Payments:
        flow = Payments(kind, tmp_path / f"{kind}-{len(made)}", **options)
        made.append(flow)
        return flow

    yield make
    for flow in made:
        flow.close()
