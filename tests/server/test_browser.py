"""The dashboard end to end: `telo ui` (uvicorn) over a SQLite journal with a run parked on a delivery, driven
in headless Chromium through Playwright — list → run → deliver form → `telo worker` continues it → completed.

Under CI=true the browser must be there (the test fails otherwise; .ci/run installs Debian's chromium);
elsewhere the test is skipped when /usr/bin/chromium is absent. A screenshot of each page (the runs list, a
search, a parked run, its deliver form, a completed run, a failed run; the checkpoints, a fork, a bulk cancel's
answer; the schedules list and a paused schedule) goes to test-artifacts/, which CI keeps."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from telo.clock import FakeClock
from telo.journal.model import Admission
from telo.journal.sqlite import SqliteStore
from telo.kinds import schedule_ledger
from telo.kinds.schedule import Schedule
from tests.process import telo
from tests.server.support import MANIFEST, failed_run, start_ui, stop

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = "/usr/bin/chromium"
ON_CI = os.environ.get("CI") == "true"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# As root in a closed network: no sandbox, and nothing that phones home (each refused connection costs time).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _require_browser() -> None:
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        if ON_CI:
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium for this test")
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium chromium-driver); required under CI=true")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        if ON_CI:
            raise
        pytest.skip("the playwright package is not installed (it is in the dev extra)")


@pytest.fixture
def parked(tmp_path: Path) -> Path:
    """A directory with the manifest and a journal in which run flow:b1 is parked on token go:b1."""
    (tmp_path / "m.yaml").write_text(MANIFEST)
    out = telo("run", "m.yaml", "--input", "id=b1", cwd=tmp_path)
    assert out.returncode == 4, out.stderr  # parked for the delivery: not settled
    store = SqliteStore(str(tmp_path / "journal.db"))
    try:
        failed_run(store, "batch:f1")  # a fan-out, then a step that failed after retries (another workflow)
    finally:
        store.close()
    return tmp_path


@pytest.fixture
def ui(parked: Path) -> Iterator[str]:
    proc, url, _ = start_ui(parked / "journal.db", parked)
    try:
        yield url
    finally:
        stop(proc)


def test_telo_ui_serves_the_json_api_over_uvicorn(ui: str) -> None:
    with urllib.request.urlopen(ui + "api/runs?status=parked", timeout=5) as r:
        listing = json.load(r)
    assert [run["run"] for run in listing["runs"]] == ["flow:b1"] and listing["counts"]["parked"] == 1
    with urllib.request.urlopen(ui + "api/runs/flow%3Ab1/journal", timeout=5) as r:
        assert json.load(r)["events"][-1]["category"] == "park"


def test_telo_ui_with_a_token_refuses_requests_without_it(parked: Path) -> None:
    proc, url, _ = start_ui(parked / "journal.db", parked, "--token", "t0ken")
    try:
        with pytest.raises(urllib.error.HTTPError) as denied:
            urllib.request.urlopen(url + "api/runs", timeout=5)
        assert denied.value.code == 401
        request = urllib.request.Request(url + "api/runs", headers={"Authorization": "Bearer t0ken"})
        with urllib.request.urlopen(request, timeout=5) as r:
            assert r.status == 200
    finally:
        stop(proc)


@contextmanager
def chromium_page() -> Iterator[Page]:
    """A page of a headless Chromium, 1200×900, 15 s timeouts; the browser is closed afterwards (and the
    screenshot directory exists)."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        # Playwright gives the browser a new, empty profile directory of its own.
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.set_default_timeout(15_000)
            yield page
        finally:
            browser.close()

@pytest.mark.timeout(180)
def test_deliver_from_the_browser_then_see_the_run_complete(parked: Path, ui: str) -> None:
    _require_browser()
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.goto(ui + "runs")
        expect(page.locator('a.filter[data-status="parked"] .count')).to_have_text("1")
        expect(page.locator("table.runs")).to_contain_text("flow:b1")
        expect(page.locator("#live")).to_have_text("live")  # the server-sent event stream is open
        page.screenshot(path=str(ARTIFACTS / "dashboard-runs.png"), full_page=True)

        page.fill("#search-inputs", '"A-17"')
        page.select_option("#search-status", "failed")
        page.click("#search-submit")
        expect(page.locator("table.runs")).to_contain_text("batch:f1")
        expect(page.locator("table.runs")).not_to_contain_text("flow:b1")
        page.screenshot(path=str(ARTIFACTS / "dashboard-runs-search.png"), full_page=True)
        page.get_by_role("link", name="batch:f1").click()
        expect(page.locator(".failures")).to_contain_text("ERR_CARD_DECLINED")
        expect(page.locator('tr[data-step="steps/each"]')).to_contain_text("3/3 done")
        expect(page.locator('tr[data-step="steps/charge"] svg rect')).to_have_count(1)
        page.screenshot(path=str(ARTIFACTS / "dashboard-run-failed.png"), full_page=True)
        page.goto(ui + "runs")

        page.get_by_role("link", name="flow:b1").click()
        expect(page).to_have_url(re.compile(r"/runs/flow%3Ab1$"))
        expect(page.locator("#run-status")).to_have_text("parked")
        expect(page.locator("#deliver-token")).to_have_value("go:b1")
        expect(page.locator("table.journal")).to_contain_text("hello ada")
        page.screenshot(path=str(ARTIFACTS / "dashboard-run-parked.png"), full_page=True)
        page.locator("#deliver-form").screenshot(path=str(ARTIFACTS / "dashboard-deliver-form.png"))

        page.fill("#deliver-payload", '{"by": "eve"}')
        page.click("#deliver-submit")
        expect(page.locator("#notice")).to_contain_text("delivered to go:b1")
        expect(page.locator("#run-status")).to_have_text("running")
        expect(page.locator('tr[data-category="delivery"]')).to_contain_text('"by": "eve"')

        expect(page.locator("#live")).to_have_text("live")
        worker = telo("worker", "m.yaml", "--until-idle", "--interval", "100ms", cwd=parked, timeout=120)
        assert worker.returncode == 0, worker.stderr

        # No reload: the page hears of the change over server-sent events and refreshes its parts itself.
        expect(page.locator("#run-status")).to_have_text("completed")
        assert int(page.locator("#console").get_attribute("data-refreshed") or 0) >= 1
        expect(page.locator('pre.value[data-name="result"]')).to_contain_text("hello eve")
        expect(page.locator("#deliver-form")).to_have_count(0)
        page.screenshot(path=str(ARTIFACTS / "dashboard-run-completed.png"), full_page=True)

        page.goto(ui + "runs")
        expect(page.locator('a.filter[data-status="completed"] .count')).to_have_text("1")
        shots = {p.name for p in ARTIFACTS.glob("dashboard-*.png")}
        assert {"dashboard-runs.png", "dashboard-runs-search.png", "dashboard-run-failed.png",
                "dashboard-run-parked.png", "dashboard-deliver-form.png", "dashboard-run-completed.png"} <= shots


@pytest.mark.timeout(180)
def test_fork_from_a_checkpoint_then_cancel_it_with_the_runs_pages_selection(parked: Path, ui: str) -> None:
    """Issue 15: the operator console — fork a run from a checkpoint and land on the fork, which says its steps
    run again under its own keys; then tick it on the runs page and cancel it, the answer saying per run. Then
    (issue 16) from the header to the queues page and a queue's page."""
    _require_browser()
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.on("dialog", lambda dialog: dialog.accept())  # "Cancel every ticked run?"
        page.goto(ui + "runs/flow%3Ab1")
        row = page.locator('table.checkpoints tr[data-path="steps/first"]')
        expect(row).to_have_count(1)
        expect(page.locator("#fork-note")).to_contain_text("under the new run's idempotency keys")
        page.locator("section.checkpoints").screenshot(path=str(ARTIFACTS / "dashboard-checkpoints.png"))
        row.locator('input[name="runId"]').fill("flow:b1/again")
        row.get_by_role("button", name="Fork from here").click()

        expect(page).to_have_url(re.compile(r"/runs/flow%3Ab1%2Fagain$"))
        notice = page.locator("#notice")
        expect(notice).to_contain_text("forked from flow:b1 at checkpoint")
        expect(notice).to_contain_text("under the new run's idempotency keys (flow:b1/again/steps/")
        expect(page.locator("#run-status")).to_have_text("running")
        expect(page.locator('tr[data-category="fork"]')).to_have_count(1)
        page.screenshot(path=str(ARTIFACTS / "dashboard-run-forked.png"), full_page=True)

        page.goto(ui + "runs")
        page.get_by_label("select flow:b1/again").check()
        page.get_by_label("select batch:f1").check()
        page.click("#bulk-cancel")
        expect(page.locator("#bulk-done")).to_have_text("1 of 2")
        expect(page.locator('tr[data-run="flow:b1/again"]')).to_contain_text("cancelled")
        expect(page.locator('tr[data-run="batch:f1"]')).to_contain_text("already failed")
        page.screenshot(path=str(ARTIFACTS / "dashboard-runs-bulk.png"), full_page=True)

        # Issue 16: the queues link in the header, a queue's page with its waiting runs per key.
        store = SqliteStore(str(parked / "journal.db"))
        try:
            for i, key in enumerate(["acme", "acme", "bolt"]):
                store.admit(Admission.of(f"pay:{i}", status="scheduled", due_at=0, workflow="pay",
                                         queue="payments", queue_key=key))
        finally:
            store.close()
        page.click("#nav-queues")
        page.get_by_role("link", name="payments").click()
        expect(page.locator('#queue-keys tr[data-key="acme"]')).to_contain_text("2")
        expect(page.locator("#queue-oldest")).to_contain_text("pay:2")
        page.screenshot(path=str(ARTIFACTS / "dashboard-queue.png"), full_page=True)
        assert {"dashboard-checkpoints.png", "dashboard-run-forked.png", "dashboard-runs-bulk.png",
                "dashboard-queue.png"} <= {p.name for p in ARTIFACTS.glob("dashboard-*.png")}


# Issue 17: a manifest with a durable schedule (every 5 minutes, invoking a workflow) for the schedule pages.
SCHEDULED = """\
kind: Telo.Application
metadata: { name: Scheduled }
imports: { Local: durable-local, Journal: durable-journal-sqlite, Run: run, Scheduler: scheduler }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./journal.db
---
kind: Run.Value
metadata: { name: noop }
value: 1
---
kind: Local.Workflow
metadata: { name: report }
journal: !ref runs
steps:
  - name: one
    invoke: !ref noop
---
kind: Scheduler.Cron
metadata: { name: nightly }
cron: "*/5 * * * *"
invoke: !ref report
"""


def serve_with_manifest(cwd: Path, journal: str, manifest: str) -> tuple[subprocess.Popen[str], str]:
    """The dashboard over ``journal`` showing ``manifest``'s schedules, on a free port, in a process of its own
    (``telo.server.serve.serve(..., manifest=)``, what `telo ui --manifest` calls): the process and its URL."""
    code = "import sys; from telo.server.serve import serve; serve(sys.argv[1], port=0, manifest=sys.argv[2])"
    proc = subprocess.Popen([sys.executable, "-c", code, journal, manifest], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    match = re.search(r"at (http://\S+/)", line)
    if match is None:
        proc.kill()
        pytest.fail(f"the dashboard did not start: {line}{proc.stderr.read()}")
    url = match.group(1)
    deadline = time.monotonic() + 20
    while True:  # the line is printed once the socket listens; wait for uvicorn to answer on it
        try:
            with urllib.request.urlopen(url + "api/schedules", timeout=2):
                return proc, url
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("the dashboard never answered")
            time.sleep(0.1)


@pytest.mark.timeout(180)
def test_the_schedules_page_lists_a_schedule_and_its_pause_button_pauses_it(tmp_path: Path) -> None:
    """Issue 17: from the header to the schedules list (the schedule, its last tick), to the schedule's page
    (a skipped tick and why), then Pause with a reason: the page says paused by telo ui, and so does the
    ledger in the journal."""
    _require_browser()
    from playwright.sync_api import expect

    from telo.server.schedules import manifest_schedules

    (tmp_path / "m.yaml").write_text(SCHEDULED)
    clock = FakeClock()  # ticks decided in the past: 00:05 fires, 00:10 is skipped (00:05 has not settled)
    store = SqliteStore(str(tmp_path / "journal.db"), clock=clock)
    try:
        with manifest_schedules(str(tmp_path / "m.yaml"), store, clock=clock) as app:
            schedule = app.resources["nightly"]
            assert isinstance(schedule, Schedule)
            for _ in range(3):
                asyncio.run(schedule.beat())
                clock.advance(ms=300_000)
    finally:
        store.close()
    proc, ui = serve_with_manifest(tmp_path, "journal.db", "m.yaml")
    try:
        with chromium_page() as page:
            page.goto(ui + "runs")
            page.click("#nav-schedules")
            row = page.locator('#schedules tr[data-schedule="nightly"]')
            expect(row).to_contain_text("cron '*/5 * * * *' in UTC")
            expect(row).to_contain_text("skipped")
            expect(row.locator(".badge.sched-active")).to_have_text("active")
            page.screenshot(path=str(ARTIFACTS / "dashboard-schedules.png"), full_page=True)

            row.get_by_role("link", name="nightly").click()
            expect(page).to_have_url(re.compile(r"/schedules/nightly$"))
            expect(page.locator('#schedule-ticks tr[data-action="skip"]')).to_contain_text(
                "nightly@2026-01-01T00:05:00Z has not settled (overlap: skip)")
            page.fill("#pause-reason", "quarter close")
            page.click("#schedule-pause")
            expect(page.locator("#notice")).to_contain_text("paused nightly")
            expect(page.locator("#schedule-state")).to_have_text("paused")
            expect(page.locator("#schedule-status")).to_contain_text("paused by telo ui")
            expect(page.locator("#schedule-status")).to_contain_text("quarter close")
            expect(page.locator('#schedule-ops tr[data-op="pause"]')).to_contain_text("quarter close")
            expect(page.locator("#schedule-resume")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "dashboard-schedule-paused.png"), full_page=True)
    finally:
        stop(proc)
    store = SqliteStore(str(tmp_path / "journal.db"))
    try:
        state = schedule_ledger.read(store, "nightly")
    finally:
        store.close()
    assert state.paused and state.pause is not None and (state.pause.by, state.pause.reason) == (
        "telo ui", "quarter close")
