"""The public names of ``telo`` and ``telo.api`` (docs/python-api.md is the contract), pinned as Temporal's SDK
pins its ``__all__``: adding or dropping one is a deliberate change to this list, never a side effect of
moving code between modules."""

from __future__ import annotations

import importlib

import telo
import telo.api

TELO = ["NOT_FOUND", "App", "AsyncApp", "Checkpoint", "Delivery", "FakeClock", "JournalEntry", "Resolution", "RunError",
        "RunList", "RunRef", "RunResult", "RunStatus", "ScheduleView", "Scheduled", "StepContext", "TeloError",
        "__version__", "kind", "load"]
TELO_API = ["App", "AsyncApp", "Checkpoint", "Delivery", "JournalEntry", "Parked", "Resolution", "RunError", "RunList",
            "RunRef", "RunResult", "RunStatus", "ScheduleView", "Scheduled", "load"]


def test_the_top_level_names_are_exactly_these_and_all_resolve() -> None:
    assert sorted(telo.__all__) == sorted(TELO)
    for name in TELO:
        assert getattr(telo, name) is not None, name


def test_the_api_package_names_are_exactly_these_and_are_the_top_level_ones() -> None:
    assert sorted(telo.api.__all__) == sorted(TELO_API)
    for name in TELO_API:
        value = getattr(telo.api, name)
        if name in TELO:
            assert getattr(telo, name) is value, name


def test_the_documented_module_paths_import() -> None:
    for module in ("telo.api", "telo.builder", "telo.testing", "telo.api.kinds"):
        importlib.import_module(module)
    assert telo.kind is importlib.import_module("telo.api.kinds").kind
