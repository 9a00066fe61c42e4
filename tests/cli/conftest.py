"""Fixtures: the CLI tests run against every durable journal a manifest can name (PostgreSQL required in CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.support import Env, make_env
from tests.pg_support import fresh_prefix, pg_url


@pytest.fixture(params=["sqlite", "file", pytest.param("postgres", marks=pytest.mark.postgres)])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Env:
    if request.param == "postgres":
        return make_env("postgres", tmp_path, pg_url(), fresh_prefix())
    return make_env(request.param, tmp_path)


@pytest.fixture
def sqlite_env(tmp_path: Path) -> Env:
    return make_env("sqlite", tmp_path)
