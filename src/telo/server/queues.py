"""The dashboard's queue pages (issue 16; docs/proposals/admission-control.md "Visibility"): every queue that has
runs in the journal, and one queue's depth and what holds its slots, per key and per process, with its oldest
waiting runs — read through :mod:`telo.operations.queues`, so the pages count as ``telo queues`` does.

The dashboard serves a journal, not a manifest, and the journal records a queue's runs, not its limits: the
pages show the counts, and say where the limits are (``telo queues show MANIFEST NAME``). Without
``holdSlotWhileParked`` known, "holding" counts the runs running under a live claim; parked runs are shown
beside them. A queue the journal has no run of is ``ERR_QUEUE_NOT_FOUND`` (404).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final
from urllib.parse import quote

from starlette.requests import Request

from telo.clock import SYSTEM_CLOCK
from telo.errors import Code, TeloError
from telo.journal.store import Store
from telo.operations import queues
from telo.server.console import rfc3339
from telo.server.operate import segment

OLDEST: Final = 20  # waiting runs a queue page lists


def queue_url(name: str, suffix: str = "", *, api: bool = False) -> str:
    """The URL of a queue's page (or API resource), its name percent-encoded as one segment."""
    return f"{'/api' if api else ''}/queues/{quote(name, safe='')}{suffix}"


def queue_param(request: Request) -> str:
    return segment(request, "queue")


def _time(ms: int | None) -> str | None:
    return rfc3339(ms) if ms is not None else None


def queue_list(store: Store) -> dict[str, Any]:
    """Every queue with runs in the journal: its depth and what holds its slots (no oldest runs)."""
    now = SYSTEM_CLOCK.now_ms()
    return {"queues": [queues.read(store, name, now_ms=now).to_json(_time) for name in store.queue_names()]}


def queue_detail(store: Store, name: str) -> dict[str, Any]:
    """One queue: depth and holders per key and per process, and its oldest waiting runs in grant order."""
    if name not in store.queue_names():
        raise TeloError(Code.QUEUE_NOT_FOUND, f"the journal has no run of a queue {name!r}",
                        hint="the queues page lists the queues with runs in this journal", data={"queue": name})
    return queues.read(store, name, oldest=OLDEST).to_json(_time)


def queue_version(store: Store, name: str) -> str:
    """A fingerprint of what a queue page shows: its counts (the live refresh, telo.server.live)."""
    snap = store.queue_snapshot(name, SYSTEM_CLOCK.now_ms(), oldest=OLDEST)
    seen = [[c.state, c.key, c.holder, c.count] for c in snap.counts] + [r.run for r in snap.oldest]
    return hashlib.sha256(json.dumps(seen).encode()).hexdigest()[:16]
