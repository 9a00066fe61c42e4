"""The run page's timeline in time (issue 15): each entry's write time, each step's start and duration — an
Await's from its park to its delivery — and the Gantt bars laid out over the run's wall-clock span, falling back
to log positions for a journal whose entries have no times (the upstream runtime's, an older telo's)."""

from __future__ import annotations

import re
import sqlite3

import pytest

pytest.importorskip("starlette", reason="the dashboard needs the `ui` extra")

from starlette.testclient import TestClient

from telo.clock import FakeClock
from telo.journal.model import Admission, Entry, Outcome, Parked
from telo.journal.sqlite import SqliteStore
from telo.server.app import run_url
from tests.server.support import GREET, failed_run

START = 1_796_200_000_000  # 2026-12-02T08:26:40.000Z
SHIP = {"kind": "Python.Function", "name": "ship"}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


def shipped_run(store: SqliteStore, clock: FakeClock, run: str = "ship:1", *, deliver: bool = True) -> None:
    """Pack (1.5 s), wait for an approval (parked 2 s in, delivered a minute later), ship (0.75 s)."""
    store.admit(Admission.of(run, workflow="ship", inputs={"id": run}))
    store.append(run, Entry.decided("inputs", "inputs", {"id": run}))
    store.append(run, Entry.decided("steps/pack/inputs", "inputs", {"box": 1}))
    clock.advance(ms=1_500)
    store.append(run, Entry.step("steps/pack", GREET, "packed"))
    clock.advance(ms=500)
    store.append(run, Entry.decided("steps/wait/inputs", "inputs", {"id": run}))
    store.append(run, Entry.decided("steps/wait/token", "value", f"go:{run}"))
    store.park(run, Parked("steps/wait", "approval", f"go:{run}"))
    if not deliver:
        return
    clock.advance(seconds=60)
    assert store.deliver(f"go:{run}", '{"by":"ada"}', 2) == run
    clock.advance(ms=250)
    store.append(run, Entry.decided("steps/ship/inputs", "inputs", {"to": "ada"}))
    clock.advance(ms=750)
    store.append(run, Entry.step("steps/ship", SHIP, {"ok": True}))
    store.complete(run, Outcome.completed({"ok": True}))


def test_the_api_carries_each_entrys_time_and_each_steps_duration(store: SqliteStore, clock: FakeClock,
                                                                  client: TestClient) -> None:
    shipped_run(store, clock)
    journal = client.get(run_url("ship:1", "/journal", api=True)).json()
    at = {e["path"]: e["at"] for e in journal["events"]}
    assert at["inputs"] == "2026-12-02T08:26:40.000Z" and at["steps/pack"] == "2026-12-02T08:26:41.500Z"
    assert at["steps/wait"] == "2026-12-02T08:27:42.000Z"  # the delivery, stamped as the store stored it
    assert journal["scale"] == "time" and journal["spanMs"] == 63_000
    steps = {s["path"]: s for s in journal["steps"]}
    assert {p: (s["state"], s["durationMs"], s["offsetMs"]) for p, s in steps.items()} == {
        "steps/pack": ("completed", 1_500, 0),
        "steps/wait": ("completed", 60_000, 2_000),  # from the park to the delivery
        "steps/ship": ("completed", 750, 62_250),
    }
    assert (steps["steps/wait"]["startedAt"], steps["steps/wait"]["endedAt"]) == (
        "2026-12-02T08:26:42.000Z", "2026-12-02T08:27:42.000Z")


def test_the_page_shows_times_durations_and_bars_over_wall_clock_time(store: SqliteStore, clock: FakeClock,
                                                                      client: TestClient) -> None:
    shipped_run(store, clock)
    page = client.get(run_url("ship:1")).text
    assert 'data-scale="time"' in page and "timeline (1 min 3 s)" in page
    rows = {m.group(1): m.group(2) for m in re.finditer(r'<tr class="step" data-step="([^"]+)"(.*?)</tr>', page,
                                                         re.S)}
    assert '<td class="duration" data-ms="1500">1.5 s</td>' in rows["steps/pack"]
    assert '<td class="duration" data-ms="60000">1 min</td>' in rows["steps/wait"]
    assert '<td class="duration" data-ms="750">750 ms</td>' in rows["steps/ship"]
    assert '<time datetime="2026-12-02T08:26:42.000Z">' in rows["steps/wait"]
    # steps/wait starts 2 s into a 63 s run and lasts 60 s of it (SVG attributes: the CSP forbids inline style)
    assert '<rect x="3.17%" y="1" width="95.24%"' in rows["steps/wait"]
    assert '<rect x="0.00%" y="1" width="2.38%"' in rows["steps/pack"]
    # the journal table shows every entry's time
    assert page.count('<td class="time"><time datetime="2026-12-02T08:27:43.000Z">') == 1  # steps/ship
    assert "style=" not in page


def test_a_step_still_waiting_has_a_start_but_no_duration(store: SqliteStore, clock: FakeClock,
                                                           client: TestClient) -> None:
    shipped_run(store, clock, deliver=False)
    journal = client.get(run_url("ship:1", "/journal", api=True)).json()
    wait = {s["path"]: s for s in journal["steps"]}["steps/wait"]
    assert wait["state"] == "parked" and wait["durationMs"] is None and wait["endedAt"] is None
    assert wait["startedAt"] == "2026-12-02T08:26:42.000Z"
    park = journal["events"][-1]
    assert park["event"] == "interrupt" and park["at"] == "2026-12-02T08:26:42.000Z"
    page = client.get(run_url("ship:1")).text
    assert 'data-scale="time"' in page
    # its bar runs until now (the span's end): never past the right edge
    bar = re.search(r'data-step="steps/wait".*?<rect x="([\d.]+)%" y="1" width="([\d.]+)%"', page, re.S)
    assert bar is not None and abs(float(bar.group(1)) + float(bar.group(2)) - 100) < 0.02


def test_a_journal_without_entry_times_falls_back_to_log_positions(store: SqliteStore, client: TestClient) -> None:
    failed_run(store, "batch:1", at_ms=START)
    with sqlite3.connect(store.path) as conn:  # as the upstream runtime (or an older telo) wrote it
        conn.execute("UPDATE telo_durable_entries SET written_at = NULL")
    journal = client.get(run_url("batch:1", "/journal", api=True)).json()
    assert journal["scale"] == "log" and journal["spanMs"] is None
    assert all(s["durationMs"] is None and s["startedAt"] is None for s in journal["steps"])
    # nothing is invented: only what a value records has a time (a retry verdict: its due time minus its backoff)
    timed = {e["path"]: e["at"] for e in journal["events"] if "at" in e}
    assert timed == {"steps/charge/@retry[0]": "2026-12-02T08:26:40.000Z",
                     "steps/charge/@retry[1]": "2026-12-02T08:26:40.100Z"}
    page = client.get(run_url("batch:1")).text
    assert 'data-scale="log"' in page and "timeline (log positions 1–16)" in page
    assert '<rect x="6.25%" y="1" width="56.25%"' in page  # steps/each: seq 2..10 of 16
