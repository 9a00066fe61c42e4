"""Bad input on the stream routes: a stream name whose percent-encoding is not UTF-8, a Unicode digit as
?offset / ?limit. Each should be a clear 4xx with a telo code, not a 500."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import telo
from telo.journal.sqlite import SqliteStore
from telo.server.app import run_url
from tests.server.test_messages_pages import MANIFEST

# A known bug (a review of issue 18, 2026-12-04): these answer 500 today; a fix makes them pass.
pytestmark = pytest.mark.xfail(strict=True, reason="stream routes answer 500 on bad parameters")


@pytest.fixture
def app(tmp_path: Path, store: SqliteStore) -> Iterator[telo.App]:
    with telo.load(MANIFEST, journal=str(tmp_path / "journal.db")) as loaded:
        yield loaded


@pytest.fixture
def client(store: SqliteStore) -> Iterator[TestClient]:
    from telo.server.app import create_app
    with TestClient(create_app(store, journal_label="journal.db"), base_url="http://127.0.0.1:8765",
                    raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("suffix", ["/streams/%ff", "/streams/rows?offset=%C2%B2", "/streams/rows?limit=%C2%B2"])
@pytest.mark.parametrize("api", [True, False])
def test_bad_stream_parameters_are_refused_cleanly(client: TestClient, app: telo.App, suffix: str, api: bool) -> None:
    app.run("writer", {"id": "1"})
    base = run_url("writer:1", api=api)
    r = client.get(base + suffix)
    assert r.status_code < 500, (r.status_code, r.text[:300])
