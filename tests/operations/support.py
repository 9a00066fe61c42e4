"""Shared by the operations tests: one journal built entry by entry, and every front end pointed at it — the
``telo`` command line (in-process, click's runner), the Python API (``telo.load(..., journal=…)``) and the
dashboard (Starlette's TestClient) — so a test can ask all three the same question."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from starlette.testclient import TestClient

import telo
from telo.cli.main import cli
from telo.journal.model import Entry
from telo.journal.sqlite import SqliteStore
from telo.server.app import create_app
from tests.server.support import MANIFEST, parked_run

BASE = "http://127.0.0.1:8765"
ORIGIN = {"origin": BASE}
SCHEMA = {"type": "object", "properties": {"by": {"type": "string"}}, "required": ["by"]}


def telo_cli(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def cli_json(*args: str) -> Any:
    out = telo_cli(*args, "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def parked_with_schema(store: SqliteStore, run: str, token: str) -> None:
    """A run parked on ``token`` whose Await recorded the payload schema :data:`SCHEMA` (as durable_kinds does)."""
    parked_run(store, run, token)
    store.append(run, Entry.decided("steps/wait/@payloadSchema", "schema", SCHEMA))


@contextmanager
def api(tmp_path: Path, journal: Path) -> Iterator[telo.App]:
    (tmp_path / "m.yaml").write_text(MANIFEST)
    with telo.load(str(tmp_path / "m.yaml"), journal=str(journal)) as app:
        yield app


@contextmanager
def dashboard(store: SqliteStore) -> Iterator[TestClient]:
    with TestClient(create_app(store, journal_label="journal.db"), base_url=BASE) as client:
        yield client
