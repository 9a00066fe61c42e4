"""A table-as-a-queue consumed as the docs' outbox example does (issue 18 review, bug 3): the source query selects
unsent rows and the batch's first step marks them. When a later step failed and the consume step was retried (or
the process crashed mid-batch), the batch was read again between its pinned bounds by re-running the query, which
no longer selected the rows the batch had marked: the remaining steps got `batch.items == []` and rows 1-3 were
marked sent and never handled. A query batch now pins its rows (telo.kinds.consume_sources)."""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import telo
from tests.api.test_consume import ledger, setup

MANIFEST = """\
kind: Telo.Application
metadata: { name: Outbox }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Durable: durable, Py: python, Sql: sql, Run: run }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Sql.Connection
metadata: { name: db }
url: ./app.db
---
kind: Py.Function
metadata: { name: handle }
function: consume_fns:handle
---
kind: Py.Function
metadata: { name: maybeFail }
function: consume_fns:maybe_fail
---
kind: Sql.Exec
metadata: { name: markSent }
connection: !ref db
sql: UPDATE outbox SET sent = 1 WHERE id <= :upto
---
kind: Durable.Consume
metadata: { name: drain }
source: { query: { connection: !ref db, sql: "SELECT id, body FROM outbox WHERE sent = 0", key: id } }
batchSize: 3
steps:
  - { name: mark, invoke: !ref markSent, inputs: { upto: !cel "batch.to" } }
  - { name: gate, invoke: !ref maybeFail, inputs: { index: !cel "batch.index + 1" } }
  - { name: h, invoke: !ref handle, inputs: { items: !cel "batch.items.map(r, r.id)" } }
---
kind: Local.Workflow
metadata: { name: outbox }
journal: !ref runs
runId: !cel "'outbox:' + inputs.id"
steps:
  - name: d
    invoke: !ref drain
    retry: { attempts: 2, initialDelay: 1, jitter: none }
"""


def test_a_batch_read_again_after_a_failure_has_the_same_items(tmp_path: Path, monkeypatch: Any) -> None:
    manifest = setup(tmp_path, monkeypatch, MANIFEST)
    db = sqlite3.connect(tmp_path / "app.db")
    db.execute("CREATE TABLE outbox (id INTEGER PRIMARY KEY, body TEXT, sent INTEGER NOT NULL DEFAULT 0)")
    db.executemany("INSERT INTO outbox (id, body) VALUES (?, ?)", [(i, f"m{i}") for i in range(1, 7)])
    db.commit()
    (tmp_path / "fail.flag").touch()  # batch 0's gate fails once (index + 1 == 1)
    with telo.load(manifest) as app:
        done = app.run("outbox", {"id": "1"}, wait=10)
    assert not (tmp_path / "fail.flag").exists()
    assert done.ok, done
    assert ledger(tmp_path) == [str(i) for i in range(1, 7)], (ledger(tmp_path), done.step("d"))
