"""Journals both ways (issue 19): what telo writes in journal compat ``legacy`` reads, through the upstream rules
alone (``upstream_reader.py``), as the values the run produced, each with its CEL type — and telo reads them
back and continues them too.

The golden files in ``golden/legacy/`` are what ``legacy_golden.py`` writes (a run of each workflow by the engine,
under a fake clock): regenerated here and compared byte for byte, so a change to what legacy mode WRITES shows up.
The contrast is the default mode (``typed``), whose values the upstream reader takes as the strings of frame text
they are stored as — what the issue saw: ``inputs.ticket`` a string, ``Timer.Delay`` inputs not an object, a
sleep's wake time a string that then becomes the run's ``dueAt``.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from telo.clock import FakeClock
from telo.errors import JournalCorrupt
from telo.journal.file import FileStore
from telo.journal.model import NO_VALUE
from telo.values import equal

from .legacy_golden import GOLDEN, MODULE, generate
from .upstream_reader import UpstreamRun, file_name, js_stringify, read_run

START = FakeClock().now_ms()
WAKE = START + 2000
TARGET = {"module": "file://" + MODULE}
RUNS = ["approve:t1", "approve:t2", "refused:r1", "sleeper:s1", "values:v1"]
KINDS = {"none": None, "flag": True, "text": 'ünï \x01 tab\t "quoted"', "half": 1.5, "whole": 3.0,
         "negativeZero": -0.0, "big": 1e21, "tiny": 1e-7, "list": [1.5, "two", None, {"nested": [True]}],
         "tagLike": {"$telo": "int", "value": "1"}, "empty": {}}
# The entries an upstream runtime reads back: step entries and the decisions it records itself (reference §4).
UPSTREAM_DECISIONS = {"inputs", "predicate", "condition", "switch", "value", "collection"}


def same(a: Any, b: Any) -> bool:
    """Equal with the same Python types all the way down (a JS number is a float), -0.0 told from 0.0."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


@pytest.fixture(scope="module")
def typed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same runs written in the default mode."""
    directory = tmp_path_factory.mktemp("typed")
    generate(directory, "typed")
    return directory


def upstream(run: str, directory: Path = GOLDEN) -> UpstreamRun:
    return read_run(directory, run)


# --- the golden files are what telo writes ------------------------------------------------------------------


def test_golden_files_are_what_legacy_mode_writes(tmp_path: Path) -> None:
    written = generate(tmp_path / "journal")
    assert [p.name for p in written] == [file_name(r) for r in RUNS]
    for path in written:
        assert path.read_bytes() == (GOLDEN / path.name).read_bytes(), f"{path.name} differs from its golden file"


def test_no_value_an_upstream_runtime_reads_carries_a_codec_version() -> None:
    for run in RUNS:
        read = upstream(run)
        assert read.record is not None
        assert "inputsCodecVersion" not in read.record and "resultCodecVersion" not in read.record
        for path, entry in read.entries.items():
            if entry["kind"] == "step" or entry.get("decision") in UPSTREAM_DECISIONS:
                assert "v" not in entry, (run, path)
                assert not isinstance(entry.get("value"), str) or not entry["value"].startswith("{"), (run, path)
            else:  # telo's own records (its digest, a failure receipt), which no upstream runtime reads
                assert entry["v"] == 2 and path.split("/")[-1].startswith("@"), (run, path)


# --- the upstream reader gets each value with its type ------------------------------------------------------


def test_parks_and_resumes_reads_objects_and_strings() -> None:
    read = upstream("approve:t1")
    assert read.record is not None and read.record["status"] == "completed"
    assert same(read.record["inputs"], {"ticket": "t1"})  # (the issue: "inputs.ticket … value is a string")
    assert same(read.value("inputs"), {"ticket": "t1"})
    assert same(read.value("steps/opened/inputs"), {"stage": "before"})
    assert same(read.value("steps/opened"), {"stage": "before"})
    assert read.entries["steps/opened"]["target"] == {"kind": "Run.Value", "name": "stage", **TARGET}
    assert same(read.value("steps/waitForApproval/token"), "approve:t1")
    assert same(read.value("steps/waitForApproval"), {"approvedBy": "ada"})  # the delivery
    assert "target" not in read.entries["steps/waitForApproval"]
    assert same(read.value("steps/closed"), {"stage": "after ada"})
    assert same(read.record["result"], {"steps": {"opened": {"result": {"stage": "before"}},
                                                  "waitForApproval": {"result": {"approvedBy": "ada"}},
                                                  "closed": {"result": {"stage": "after ada"}}}})


def test_a_scheduled_runs_inputs_are_an_object() -> None:
    record = upstream("approve:t2").record
    assert record is not None and record["status"] == "scheduled"
    assert same(record["inputs"], {"ticket": "t2"}) and same(record["dueAt"], float(START + 2000 + 60_000))


def test_a_durable_sleep_reads_numbers() -> None:
    read = upstream("sleeper:s1")
    # Timer.Delay's inputs are an object (the issue: "Timer.Delay … must be object")
    assert same(read.value("steps/work/inputs"), {"duration": "1ms", "value": {"payload": 1.5}})
    assert same(read.value("steps/work"), {"value": {"payload": 1.5}})
    assert same(read.value("steps/nap/wakeAt"), float(WAKE))  # a number: the issue's was a string
    assert same(read.value("steps/nap"), {"wokeAt": float(WAKE)})
    assert same(read.value("steps/woke"), float(WAKE))
    assert read.record is not None and same(read.record["result"]["steps"]["woke"], {"result": float(WAKE)})


def test_values_keep_their_types() -> None:
    read = upstream("values:v1")
    assert same(read.value("steps/gate/if"), True)
    assert same(read.value("steps/gate/then/chosen"), "then")
    assert same(read.value("steps/pick/switch"), "b")
    assert same(read.value("steps/kinds"), KINDS)
    assert same(read.value("steps/echo"), {"stage": KINDS})


def test_a_value_legacy_mode_cannot_carry_fails_its_step_and_is_not_written() -> None:
    read = upstream("refused:r1")
    assert read.record is not None and read.record["status"] == "failed"
    error = read.record["error"]
    assert error["code"] == "ERR_DURABLE_UNJOURNALABLE_VALUE"
    assert "'steps/count'" in error["message"] and "int" in error["message"]
    assert "steps/count" not in read.entries and "steps/after" not in read.entries  # nothing written wrongly
    assert same(read.value("steps/count/inputs"), {"items": ["a", "b", "c"]})


def test_typed_journals_are_what_the_upstream_reader_misreads(typed_dir: Path) -> None:
    """The default mode, through the same reader: every value is a string of frame text (the issue)."""
    read = upstream("approve:t1", typed_dir)
    assert read.record is not None and isinstance(read.record["inputs"], str)
    assert isinstance(read.value("inputs"), str) and isinstance(read.value("steps/opened"), str)
    sleep = upstream("sleeper:s1", typed_dir)
    assert isinstance(sleep.value("steps/work/inputs"), str) and isinstance(sleep.value("steps/nap/wakeAt"), str)


# --- an upstream runtime continuing a sleep, and telo reading what it wrote then ----------------------------


def _parked_like_upstream(source: Path, tmp_path: Path) -> FileStore:
    """The sleeper's file cut at its park, then the park line the upstream runtime writes when it continues the
    run: it reads the recorded wakeAt as it stands and parks until it (``dueAt`` = ``parked.at`` = wakeAt)."""
    lines = (source / file_name("sleeper:s1")).read_bytes().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if b'"status":"parked"' in ln) + 2  # the park and its release
    target = tmp_path / "journal"
    target.mkdir()
    (target / file_name("sleeper:s1")).write_bytes(b"".join(lines[:cut]))
    wake = upstream("sleeper:s1", target).value("steps/nap/wakeAt")
    park = {"type": "run", "run": "sleeper:s1", "status": "parked", "dueAt": wake,
            "parked": {"path": "steps/nap", "resource": "nap", "at": wake}}
    with (target / file_name("sleeper:s1")).open("a", encoding="utf-8") as f:
        f.write(js_stringify(park) + "\n")
    return FileStore(str(target))


def test_an_upstream_park_on_a_legacy_wake_time_is_due_when_it_should_be(tmp_path: Path) -> None:
    store = _parked_like_upstream(GOLDEN, tmp_path)
    record = store.read_run("sleeper:s1")
    assert record is not None and record.due_at == WAKE and record.parked is not None and record.parked.at == WAKE
    assert store.due_runs(WAKE - 1, 10) == [] and store.due_runs(WAKE, 10) == ["sleeper:s1"]


def test_an_upstream_park_on_a_typed_wake_time_is_the_issues_refused_file(tmp_path: Path, typed_dir: Path) -> None:
    store = _parked_like_upstream(typed_dir, tmp_path)
    with pytest.raises(JournalCorrupt, match="dueAt is not an integer"):
        store.read_run("sleeper:s1")


# --- telo reads them back, and continues them --------------------------------------------------------------


def test_telo_reads_the_golden_files_with_the_legacy_rule(tmp_path: Path) -> None:
    shutil.copytree(GOLDEN, tmp_path / "journal")
    store = FileStore(str(tmp_path / "journal"))
    for run in RUNS:
        for entry in store.read_entries(run):  # every checksum holds on the text as the file keeps it
            entry.decode(run)
    sleep = {e.path: e for e in store.read_entries("sleeper:s1")}
    assert sleep["steps/nap/wakeAt"].v is None and same(sleep["steps/nap/wakeAt"].decode("s"), float(WAKE))
    values = {e.path: e for e in store.read_entries("values:v1")}
    assert same(values["steps/kinds"].decode("v"), KINDS)
    record = store.read_run("approve:t1")
    assert record is not None and record.result_v is None
    assert equal(record.decoded_result()["steps"]["closed"], {"result": {"stage": "after ada"}})
    refused = {e.path: e for e in store.read_entries("refused:r1")}
    assert refused["steps/count/@failed"].v == 2  # telo's own record keeps its typed frame
    assert refused["steps/count/@failed"].decode("r")["data"]["type"] == "int"


@pytest.mark.parametrize("mode", ["legacy", "typed"])
def test_telo_continues_a_legacy_sleep_in_either_mode(tmp_path: Path, mode: str) -> None:
    import asyncio

    from telo.analysis import cel_checker
    from telo.api import AsyncApp
    from telo.kinds.controllers import CONTROLLERS
    from telo.manifest import load_manifest
    from telo.runtime.app import Application

    from .legacy_golden import MANIFEST

    lines = (GOLDEN / file_name("sleeper:s1")).read_bytes().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if b'"status":"parked"' in ln) + 2  # the park and its release
    (tmp_path / "journal").mkdir()
    (tmp_path / "journal" / file_name("sleeper:s1")).write_bytes(b"".join(lines[:cut]))

    async def go() -> Any:
        clock = FakeClock(WAKE)
        store = FileStore(str(tmp_path / "journal"), clock=clock)
        manifest = load_manifest(Path(MODULE), text=MANIFEST, cel_checker=cel_checker)
        app = AsyncApp(Application(manifest, controllers=CONTROLLERS, clock=clock), journal=store,
                       journal_compat=mode)
        try:
            assert await app.run_due() == 1
            return await app.wait("sleeper:s1", timeout=30)
        finally:
            await app.close()
            store.close()

    result = asyncio.run(go())
    assert result.status == "completed" and result.replayed_steps >= 1
    assert same(result.step("nap"), {"wokeAt": float(WAKE)}) and same(result.step("woke"), float(WAKE))
    assert result.step("work") == {"value": {"payload": 1.5}}
    entries = {e.path: e for e in FileStore(str(tmp_path / "journal")).read_entries("sleeper:s1")}
    assert (entries["steps/woke"].v is None) == (mode == "legacy")
    assert entries["steps/nap/wakeAt"].decode("s") is not NO_VALUE


def test_golden_lines_are_json_an_upstream_reader_parses() -> None:
    for path in GOLDEN.glob("*.ndjson"):
        for line in path.read_bytes().splitlines():
            obj = json.loads(line)
            assert obj["type"] in ("run", "entry", "claim")
