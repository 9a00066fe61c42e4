"""Where the tests find PostgreSQL: ``TELO_TEST_PG_URL`` (scripts/postgres.sh starts a throwaway cluster).

Under ``CI=true`` a missing server is a failure, never a skip: the PostgreSQL store must be tested there.
"""

from __future__ import annotations

import os
import secrets

import pytest


def pg_url() -> str:
    url = os.environ.get("TELO_TEST_PG_URL")
    if url:
        return url
    if os.environ.get("CI") == "true":
        pytest.fail("TELO_TEST_PG_URL is unset under CI=true: scripts/postgres.sh must start PostgreSQL")
    pytest.skip("PostgreSQL not available (TELO_TEST_PG_URL unset; run via scripts/test.sh to start one)")


def fresh_prefix() -> str:
    """A table prefix no other test uses, so tests on one database never see each other's runs."""
    return f"t_{secrets.token_hex(6)}"
