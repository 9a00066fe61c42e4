"""Live refresh over a real server (`telo ui`, uvicorn): the server-sent event streams announce a change in the
journal within a couple of seconds, answer 404 for an unknown run, and obey the token like every other GET."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.client import HTTPResponse
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn", reason="the dashboard needs the `ui` extra")

from telo.journal.model import Entry
from telo.journal.sqlite import SqliteStore
from telo.server.app import run_url
from tests.server.support import parked_run, start_ui, stop


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(str(tmp_path / "journal.db"))
    parked_run(store, "flow:l1", "go:l1")
    yield store
    store.close()


def _next_event(reply: HTTPResponse, within: float) -> tuple[str, Any]:
    """The next named event of a stream (comments and the retry field skipped)."""
    name, deadline = "", time.monotonic() + within
    while time.monotonic() < deadline:
        line = reply.readline().decode().rstrip("\n")
        if line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: ") and name:
            return name, json.loads(line[len("data: "):])
    pytest.fail(f"no event within {within} s")


def test_the_run_stream_says_hello_then_announces_a_new_journal_entry(journal: SqliteStore, tmp_path: Path) -> None:
    proc, url, _ = start_ui(tmp_path / "journal.db", tmp_path)
    try:
        with urllib.request.urlopen(url + run_url("flow:l1", "/events", api=True)[1:], timeout=10) as reply:
            assert reply.headers["content-type"].startswith("text/event-stream")
            assert reply.headers["content-security-policy"]  # the Guard's headers on the stream too
            name, hello = _next_event(reply, 5)
            assert name == "hello" and hello["version"]
            started = time.monotonic()
            journal.append("flow:l1", Entry.decided("steps/wait/note", "value", "an appended entry"))
            name, change = _next_event(reply, 5)
            assert name == "change" and change["version"] != hello["version"]
            assert time.monotonic() - started < 3.5  # polled about every second
    finally:
        stop(proc)


def test_the_runs_stream_announces_a_new_run_and_an_unknown_run_is_404(journal: SqliteStore, tmp_path: Path) -> None:
    proc, url, _ = start_ui(tmp_path / "journal.db", tmp_path)
    try:
        with urllib.request.urlopen(url + "api/events", timeout=10) as reply:
            assert _next_event(reply, 5)[0] == "hello"
            parked_run(journal, "flow:l2", "go:l2")
            assert _next_event(reply, 5)[0] == "change"
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url + run_url("nope", "/events", api=True)[1:], timeout=10)
        assert missing.value.code == 404
        assert json.load(missing.value)["error"]["code"] == "ERR_DURABLE_RUN_NOT_FOUND"
    finally:
        stop(proc)


def test_the_streams_require_the_token_like_every_page(journal: SqliteStore, tmp_path: Path) -> None:
    proc, url, _ = start_ui(tmp_path / "journal.db", tmp_path, "--token", "t0ken")
    try:
        with pytest.raises(urllib.error.HTTPError) as denied:
            urllib.request.urlopen(url + "api/events", timeout=10)
        assert denied.value.code == 401
        request = urllib.request.Request(url + "api/events", headers={"Authorization": "Bearer t0ken"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert _next_event(reply, 5)[0] == "hello"
    finally:
        stop(proc)
