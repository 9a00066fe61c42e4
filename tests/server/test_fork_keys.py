"""The dashboard's fork keeps the original's idempotency keys when asked (``telo fork --keep-keys``; issue 15,
event-log spec §2): a checkbox on each checkpoint's fork form, ``keepKeys`` in a JSON body; the fork's page says
whose keys it carries."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="the dashboard needs the `ui` extra")

from starlette.testclient import TestClient

from telo.journal import eventlog
from telo.journal.sqlite import SqliteStore
from telo.server.app import run_url
from tests.server.support import parked_run
from tests.server.test_operate import ORIGIN, checkpoint_at, csrf_of


def test_the_fork_form_can_keep_the_original_keys(store: SqliteStore, client: TestClient) -> None:
    parked_run(store, "flow:f", "go:f")
    first = checkpoint_at(store, "flow:f", "steps/first")
    page = client.get(run_url("flow:f")).text
    assert f'id="fork-keep-keys-{first}"' in page and 'name="keepKeys"' in page
    assert "keep the original idempotency keys” ticked" in page  # the note says how to keep them

    url = run_url("flow:f", "/fork", api=True)
    form = {"csrf": csrf_of(client, run_url("flow:f")), "checkpoint": str(first), "runId": "kept/1",
            "keepKeys": "true"}
    r = client.post(url, data=form, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith(run_url("kept/1") + "?notice=forked")
    shown = client.get(r.headers["location"]).text
    assert "under flow:f&#39;s idempotency keys (flow:f/steps/…)" in shown  # the notice
    assert "keeps the idempotency keys of <code>flow:f</code>" in shown  # the fork's facts
    assert eventlog.recover(store, "kept/1").key_run == "flow:f"
    assert client.get(run_url("kept/1", api=True)).json()["keepsKeysOf"] == "flow:f"

    j = client.post(url, json={"checkpoint": first, "runId": "kept/2", "keepKeys": True}, headers=ORIGIN)
    assert j.status_code == 200, j.text
    assert j.json()["keepsKeysOf"] == "flow:f" and "flow:f/steps/…" in j.json()["note"]
    plain = client.post(url, json={"checkpoint": first, "runId": "own/1"}, headers=ORIGIN).json()
    assert "keepsKeysOf" not in plain and "keepKeys: true" in plain["note"]
    detail = client.get(run_url("own/1", api=True)).json()
    assert detail["forkedFrom"] == "flow:f" and "keepsKeysOf" not in detail
