"""Bad input in the console's URLs (issue 18 review, bug 7): a run, stream or queue name whose percent-encoding is
not UTF-8 (strict unquote raised UnicodeDecodeError), a Unicode digit as ?offset, ?limit or ?since (str.isdigit
took "²", int() refused it). Each answered 500; each is a 400 naming what is wrong now."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import telo
from telo.journal.sqlite import SqliteStore
from telo.server.app import run_url
from tests.server.test_messages_pages import MANIFEST


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
    assert r.status_code == 400, (r.status_code, r.text[:300])
    assert "ERR_INVALID_VALUE" in r.text and ("UTF-8" in r.text or "non-negative integer" in r.text), r.text[:300]


@pytest.mark.parametrize("url", ["/runs/%ff", "/api/runs/%ff", "/queues/%ff", "/api/queues/%ff", "/schedules/%ff",
                                 "/api/schedules/%ff",
                                 "/runs?since=%C2%B2", "/api/runs?since=%C2%B2"])
def test_bad_names_and_times_elsewhere_are_refused_cleanly(client: TestClient, url: str) -> None:
    r = client.get(url)
    assert r.status_code == 400, (r.status_code, r.text[:300])
    assert "ERR_INVALID_VALUE" in r.text, r.text[:300]
