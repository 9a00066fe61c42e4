"""The file journal (reference §7 "File journal"): names, line shapes, torn tails, corruption, compaction and
real cross-process exclusion (the reference's quirks §15.8-9 are not copied)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from telo.clock import FakeClock
from telo.errors import ERR_DURABLE_JOURNAL_CORRUPT, JournalCorrupt, JournalError
from telo.journal import open_store
from telo.journal.file import FileStore
from telo.journal.file_format import file_stem, run_of_stem
from telo.journal.integrity import checksum
from telo.journal.model import Admission, Claim, Entry, Outcome, Parked, RunFilter
from telo.values import equal

TARGET = {"kind": "Run.Value", "name": "price", "module": "file:///app/orders.yaml"}
ROOT = Path(__file__).resolve().parents[3]


def lines(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n"), "a well-formed journal file ends with a newline"
    return [json.loads(line) for line in raw.split(b"\n")[:-1]]


def run_file(directory: Path, run: str) -> Path:
    return directory / (file_stem(run) + ".ndjson")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> FileStore:
    return FileStore(str(tmp_path / "journal"), clock=clock)


@pytest.fixture
def directory(store: FileStore) -> Path:
    return Path(store.directory)


# --- names ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("run", "stem"),
    [
        ("order:A-4", "order%3AA-4"),
        ("AZaz09-_.!~*'()", "AZaz09-_.!~*'()"),  # encodeURIComponent's unreserved set, left as is
        ("a b/c\\d", "a%20b%2Fc%5Cd"),
        ("+@#$&=,;?[]%\"<>^`{|}", "%2B%40%23%24%26%3D%2C%3B%3F%5B%5D%25%22%3C%3E%5E%60%7B%7C%7D"),
        ("ü😀", "%C3%BC%F0%9F%98%80"),
        ("..", ".."),
        ("", ""),
    ],
)
def test_file_names_are_encode_uri_component(run: str, stem: str) -> None:
    assert file_stem(run) == stem
    assert run_of_stem(stem) == run


@pytest.mark.parametrize(("fits", "too_long"), [("a" * 248, "a" * 249), ("é" * 41, "é" * 42), (":" * 82, ":" * 83)],
                         ids=["ascii", "utf-8", "reserved"])
def test_a_run_id_too_long_for_a_file_name_is_refused_before_anything_is_written(
        store: FileStore, directory: Path, fits: str, too_long: str) -> None:
    # 255 bytes of file name (NAME_MAX): the encoded id plus '.ndjson'; a non-ASCII or reserved character
    # takes 3 bytes of encoding per UTF-8 byte
    assert store.admit(Admission.of(fits)).admitted and len(run_file(directory, fits).name) <= 255
    before = sorted(os.listdir(directory))
    for attempt in (lambda: store.admit(Admission.of(too_long)), lambda: store.read_run(too_long),
                    lambda: store.claim(too_long, "w", 1000, 0)):
        with pytest.raises(JournalError) as caught:
            attempt()
        assert caught.value.code == "ERR_DURABLE_RUN_ID_INVALID" and "at most 255" in caught.value.message
        assert caught.value.hint and "shorter run id" in caught.value.hint
    assert sorted(os.listdir(directory)) == before


def test_names_no_writer_produces_are_not_runs() -> None:
    assert run_of_stem("order%3aA-4") is None  # lower-case hex: not encodeURIComponent's spelling
    assert run_of_stem("a b") is None
    assert run_of_stem("%FF") is None  # not UTF-8


def test_a_run_id_that_is_not_unicode_is_refused(store: FileStore) -> None:
    with pytest.raises(JournalError):
        store.admit(Admission.of("bad\ud800"))


def test_directory_is_created_recursively_and_open_store_names_it(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c"
    FileStore(str(deep))
    assert deep.is_dir()
    opened = open_store(f"file://{deep}")
    assert isinstance(opened, FileStore) and opened.kind == "file"


def test_no_transactions(store: FileStore) -> None:
    with pytest.raises(NotImplementedError):
        store.transaction()
    assert store.writes_inside(object()) is False


# --- line shapes ---------------------------------------------------------------------------------------


def test_lines_keep_the_upstream_shapes(store: FileStore, directory: Path, clock: FakeClock) -> None:
    now = clock.now_ms()
    store.admit(Admission.of("park:t1", status="scheduled", due_at=now + 5, inputs={"ticket": "t1"},
                             workflow="approvals"))
    store.update_run("park:t1", status="running")
    store.append("park:t1", Entry.decided("inputs", "inputs", {"ticket": "t1"}))
    store.append("park:t1", Entry.step("steps/opened", {"kind": "Run.Value", "name": "before"}, {"stage": "b"}))
    assert store.claim("park:t1", "w1", 60_000, now)
    store.park("park:t1", Parked("steps/waitForApproval", "approval", "approve:t1"))
    store.append("park:t1", Entry.step("steps/waitForApproval", None, {"approvedBy": "ada"}))
    store.unpark("park:t1")
    store.append("park:t1", Entry.step("steps/nothing", None))
    store.complete("park:t1", Outcome.completed({"ok": True}, replayed_steps=1))

    got = lines(run_file(directory, "park:t1"))
    crcs = {ln["entry"]["path"]: ln.pop("crc") for ln in got if ln["type"] == "entry"}  # telo's, checked below
    assert crcs == {e.path: checksum(e) for e in store.read_entries("park:t1")}
    # telo's too: each entry line's write time, beside (never inside) upstream's entry object
    assert {ln["entry"]["path"]: ln.pop("at") for ln in got if ln["type"] == "entry"} == {
        e.path: now for e in store.read_entries("park:t1")}
    frame_inputs = '{"ticket":"t1"}'
    common = {"workflow": "approvals", "createdAt": now}
    assert got == [
        {"type": "run", "run": "park:t1", "status": "scheduled", "dueAt": now + 5, "inputs": frame_inputs,
         "inputsCodecVersion": 2, **common, "updatedAt": now},
        {"type": "run", "run": "park:t1", "status": "running", "dueAt": now + 5, "inputs": frame_inputs,
         "inputsCodecVersion": 2, **common, "updatedAt": now},
        {"type": "entry", "entry": {"path": "inputs", "kind": "decision", "decision": "inputs", "v": 2,
                                    "value": frame_inputs}},
        {"type": "entry", "entry": {"path": "steps/opened", "kind": "step",
                                    "target": {"kind": "Run.Value", "name": "before"}, "v": 2,
                                    "value": '{"stage":"b"}'}},
        {"type": "claim", "holder": "w1", "until": now + 60_000, "fence": 1},
        # park: the record merged with status/parked; no `at`, so NO dueAt (reference §15.8 not copied)
        {"type": "run", "run": "park:t1", "status": "parked", "parked": {
            "path": "steps/waitForApproval", "resource": "approval", "token": "approve:t1"},
         "inputs": frame_inputs, "inputsCodecVersion": 2, **common, "updatedAt": now},
        {"type": "claim", "holder": None, "fence": 1},  # park releases the claim (its token stays)
        {"type": "entry", "entry": {"path": "steps/waitForApproval", "kind": "step", "v": 2,
                                    "value": '{"approvedBy":"ada"}'}},
        {"type": "run", "run": "park:t1", "status": "running", "inputs": frame_inputs,
         "inputsCodecVersion": 2, **common, "updatedAt": now},
        {"type": "entry", "entry": {"path": "steps/nothing", "kind": "step", "v": 2}},  # produced nothing
        {"type": "run", "run": "park:t1", "status": "completed", "inputs": frame_inputs,
         "inputsCodecVersion": 2, "result": '{"ok":true}', "resultCodecVersion": 2, "collapsedRegions": 0,
         "collapseReasons": [], "replayedSteps": 1, **common, "updatedAt": now},
    ]
    # the exact key order of the upstream fields, as JSON.stringify writes them
    first = run_file(directory, "park:t1").read_bytes().split(b"\n")[0]
    assert first.startswith(b'{"type":"run","run":"park:t1","status":"scheduled","dueAt":')


def test_park_with_a_due_time_mirrors_it_and_failure_records_the_error(
    store: FileStore, directory: Path
) -> None:
    store.admit(Admission.of("r"))
    store.park("r", Parked("steps/retry[2]", at=1234))
    assert lines(run_file(directory, "r"))[-1]["dueAt"] == 1234
    store.complete("r", Outcome.failed("ERR_X", "boom"))
    last = lines(run_file(directory, "r"))[-1]
    assert last["status"] == "failed" and last["error"] == {"code": "ERR_X", "message": "boom"}
    assert "dueAt" not in last and "parked" not in last


def test_release_writes_a_null_claim_and_only_for_the_holder(store: FileStore, directory: Path) -> None:
    store.admit(Admission.of("r"))
    assert store.claim("r", "a", 100, 0)
    store.release("r", "b")
    store.release("r", "a")
    store.release("r", "a")  # nothing held: nothing written
    claims = [ln for ln in lines(run_file(directory, "r")) if ln["type"] == "claim"]
    assert claims == [{"type": "claim", "holder": "a", "until": 100, "fence": 1},
                      {"type": "claim", "holder": None, "fence": 1}]


def test_unknown_line_types_and_blank_lines_are_skipped(store: FileStore, directory: Path) -> None:
    store.admit(Admission.of("r"))
    store.append("r", Entry.decided("inputs", "inputs", {}))
    with run_file(directory, "r").open("ab") as f:
        f.write(b'{"type":"someday","x":1}\n\n   \n')
    store.append("r", Entry.decided("steps/a", "value", 1))
    fresh = FileStore(store.directory)
    assert [(e.path, e.seq) for e in fresh.read_entries("r")] == [("inputs", 1), ("steps/a", 2)]


def test_duplicate_paths_in_a_file_read_first_wins_and_count_in_seq(tmp_path: Path) -> None:
    # An upstream process racing itself could write a path twice; the first line wins (reference §7).
    d = tmp_path / "j"
    d.mkdir()
    (d / "r.ndjson").write_text(
        '{"type":"run","run":"r","status":"running"}\n'
        '{"type":"entry","entry":{"path":"steps/a","kind":"step","value":1}}\n'
        '{"type":"entry","entry":{"path":"steps/a","kind":"step","value":2}}\n'
        '{"type":"entry","entry":{"path":"steps/b","kind":"step","value":3}}\n'
    )
    store = FileStore(str(d))
    read = store.read_entries("r")
    assert [(e.path, e.seq, e.decode("r")) for e in read] == [("steps/a", 1, 1.0), ("steps/b", 3, 3.0)]
    assert store.append("r", Entry.step("steps/a", None, 9)).decode("r") == 1.0


def test_admission_without_hard_links_falls_back_to_an_exclusive_create(
    store: FileStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(*args: object) -> None:
        raise OSError(errno.EPERM, "this filesystem has no hard links")

    monkeypatch.setattr(os, "link", no_links)
    first = store.admit(Admission.of("r", workflow="w"))
    assert first.admitted and first.record.workflow == "w"
    again = store.admit(Admission.of("r", workflow="other"))
    assert not again.admitted and again.record == first.record
    assert [ln["type"] for ln in lines(run_file(directory, "r"))] == ["run"]
    assert not list(directory.glob(".*.tmp")), "temporaries are removed"


def test_a_file_rewritten_in_place_is_parsed_afresh(store: FileStore, directory: Path) -> None:
    # Same inode, new content (as after inode reuse): the cached head no longer matches, so no stale parse.
    store.admit(Admission.of("r"))
    store.append("r", Entry.decided("inputs", "inputs", 1))
    assert [e.path for e in store.read_entries("r")] == ["inputs"]
    path = run_file(directory, "r")
    with path.open("r+b") as f:
        f.truncate(0)
        f.write(b'{"type":"run","run":"r","status":"completed"}\n'
                b'{"type":"entry","entry":{"path":"other","kind":"step","value":"a much longer value"}}\n')
    rec = store.read_run("r")
    assert rec is not None and rec.status == "completed"
    assert [e.path for e in store.read_entries("r")] == ["other"]


# --- torn tails ----------------------------------------------------------------------------------------


def _journal_with_tail(directory: Path, store: FileStore) -> tuple[bytes, bytes]:
    store.admit(Admission.of("t"))
    store.append("t", Entry.decided("inputs", "inputs", {"who": "ada"}))
    store.append("t", Entry.step("steps/a", TARGET, "first"))
    store.append("t", Entry.step("steps/last", TARGET, {"text": "é😀 multi-byte", "n": 2**60}))
    data = run_file(directory, "t").read_bytes()
    cut = data.rindex(b"\n", 0, len(data) - 1) + 1
    return data[:cut], data[cut:-1]  # everything before the last line, the last line without its newline


def test_a_torn_final_line_is_ignored_at_every_byte_offset(tmp_path: Path) -> None:
    source = tmp_path / "source"
    head, last = _journal_with_tail(source, FileStore(str(source)))
    assert len(last) > len(last.decode()), "the line must hold multi-byte characters"
    for k in range(len(last) + 1):  # k == len(last): the whole line, but its newline never made it
        d = tmp_path / f"cut{k}"
        d.mkdir()
        path = run_file(d, "t")
        path.write_bytes(head + last[:k])
        store = FileStore(str(d))
        assert [e.path for e in store.read_entries("t")] == ["inputs", "steps/a"], k
        assert store.read_run("t") is not None
        assert path.read_bytes() == head + last[:k], "a reader never writes"
        # the next append first cuts the torn bytes, then continues the file
        e = store.append("t", Entry.step("steps/next", TARGET, k))
        assert e.seq == 3
        assert path.read_bytes().startswith(head) and len(lines(path)) == head.count(b"\n") + 1
        fresh = FileStore(str(d))
        assert [(x.path, x.decode("t")) for x in fresh.read_entries("t")] == [
            ("inputs", {"who": "ada"}), ("steps/a", "first"), ("steps/next", k)]


def test_a_torn_lifecycle_line_leaves_the_previous_record(store: FileStore, directory: Path) -> None:
    store.admit(Admission.of("r"))
    path = run_file(directory, "r")
    with path.open("ab") as f:
        f.write(b'{"type":"run","run":"r","status":"comp')
    fresh = FileStore(store.directory)
    rec = fresh.read_run("r")
    assert rec is not None and rec.status == "running"
    assert fresh.complete("r", Outcome.completed(1)).status == "completed"
    assert [ln["status"] for ln in lines(path)] == ["running", "completed"]


def test_a_file_whose_creator_died_before_the_header_is_admitted_again(tmp_path: Path) -> None:
    for content in (b"", b'{"type":"run","run":"r","sta'):
        d = tmp_path / f"d{len(content)}"
        d.mkdir()
        (d / "r.ndjson").write_bytes(content)
        store = FileStore(str(d))
        assert store.read_run("r") is None
        assert store.admit(Admission.of("r", workflow="w")).admitted
        assert not store.admit(Admission.of("r")).admitted
        assert [ln["type"] for ln in lines(d / "r.ndjson")] == ["run"]


# --- corruption ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        b'{"type":"entry","entry":{"path":"steps/x","kind":"st',  # torn in the middle: not the last line
        b"not json at all",
        b"[1,2,3]",
        b'{"entry":{"path":"steps/x","kind":"step"}}',  # no type
        b'{"type":"entry","entry":{"path":3,"kind":"step"}}',
        b'{"type":"entry","entry":"steps/x"}',
        b'{"type":"entry","entry":{"path":"steps/x","kind":"step","v":2,"value":{"not":"text"}}}',
        b'{"type":"run","run":"r","status":"sleeping"}',
        b'{"type":"run","run":"someone-else","status":"running"}',
        b'{"type":"run","run":"r","status":"parked","parked":{"token":"x"}}',
        b'{"type":"run","run":"r","status":"running","dueAt":"soon"}',
        b'{"type":"claim","holder":"a","until":"later"}',
        b'{"type":"base","seq":-1}',
        b"\xff\xfe garbage",
    ],
)
def test_a_bad_line_before_the_end_is_corruption(store: FileStore, directory: Path, bad: bytes) -> None:
    store.admit(Admission.of("r"))
    store.append("r", Entry.decided("inputs", "inputs", {}))
    path = run_file(directory, "r")
    good = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([good[0], bad, *good[1:]]))  # line 2 of 3
    fresh = FileStore(store.directory)
    for call in (lambda: fresh.read_run("r"), lambda: fresh.read_entries("r"),
                 lambda: fresh.append("r", Entry.decided("steps/y", "value", 1)),
                 lambda: fresh.claim("r", "a", 10, 0)):
        with pytest.raises(JournalCorrupt) as exc:
            call()
        assert exc.value.code == ERR_DURABLE_JOURNAL_CORRUPT
        assert exc.value.data["run"] == "r" and exc.value.data["line"] == 2
        assert exc.value.hint
    assert path.read_bytes() == b"\n".join([good[0], bad, *good[1:]]), "a corrupt file is never rewritten"


def test_one_corrupt_file_does_not_stop_the_sweep(store: FileStore, directory: Path) -> None:
    store.admit(Admission.of("good"))
    store.admit(Admission.of("bad"))
    with run_file(directory, "bad").open("ab") as f:
        f.write(b"garbage\n")
    assert FileStore(store.directory).due_runs(0, 10) == ["good"]
    # listed, marked corrupt with where (the line), as what its lines before the damage say
    listed = {r.run: r for r in FileStore(store.directory).list_runs(RunFilter()).runs}
    assert set(listed) == {"good", "bad"} and listed["good"].corrupt is None
    bad = listed["bad"]
    assert bad.status == "running" and bad.corrupt is not None and "line 2" in bad.corrupt


def test_stray_files_in_the_directory_are_not_runs(store: FileStore, directory: Path) -> None:
    store.admit(Admission.of("r"))
    (directory / "notes.txt").write_text("hello")
    (directory / ".admit-0123.tmp").write_text("{}")
    (directory / "order%3aA-4.ndjson").write_text('{"type":"run","run":"order:A-4","status":"running"}\n')
    assert store.due_runs(0, 10) == ["r"]


# --- caches and other instances ------------------------------------------------------------------------


def test_instances_see_each_others_writes(tmp_path: Path, clock: FakeClock) -> None:
    a = FileStore(str(tmp_path / "j"), clock=clock)
    b = FileStore(str(tmp_path / "j"), clock=clock)
    a.admit(Admission.of("r"))
    assert b.due_runs(clock.now_ms(), 10) == ["r"]
    assert b.read_entries("r") == []
    a.append("r", Entry.decided("inputs", "inputs", 1))
    assert [e.path for e in b.read_entries("r")] == ["inputs"]
    assert b.claim("r", "b", 60_000, clock.now_ms())
    assert a.due_runs(clock.now_ms(), 10) == []  # a's summary cache notices the claim line
    assert not a.claim("r", "a", 60_000, clock.now_ms())
    b.park("r", Parked("steps/w", token="tok"))
    found = a.run_parked_on("tok")
    assert found is not None and found.run == "r"


def test_compaction_keeps_seq_and_is_seen_by_other_instances(tmp_path: Path, clock: FakeClock) -> None:
    a = FileStore(str(tmp_path / "j"), clock=clock)
    b = FileStore(str(tmp_path / "j"), clock=clock)
    a.admit(Admission.of("r", workflow="w"))
    stored = [a.append("r", Entry.decided(f"steps/s{i}", "value", i)) for i in range(10)]
    assert a.claim("r", "holder", 60_000, clock.now_ms())
    assert [e.seq for e in b.read_entries("r")] == list(range(1, 11))  # b caches the old file
    assert a.truncate_before("r", 7) == 6
    assert a.truncate_before("r", 7) == 0  # nothing left below 7
    path = run_file(Path(a.directory), "r")
    shape = [ln["type"] for ln in lines(path)]
    assert shape == ["base", "run", "claim", "entry", "entry", "entry", "entry"]
    assert lines(path)[0]["seq"] == 6
    for s in (a, b, FileStore(a.directory)):
        assert [(e.path, e.seq) for e in s.read_entries("r")] == [(f"steps/s{i}", i + 1) for i in range(6, 10)]
        rec = s.read_run("r")
        assert rec is not None and rec.workflow == "w" and rec.claim == Claim("holder", clock.now_ms() + 60_000)
    assert b.append("r", Entry.decided("steps/s10", "value", 10)).seq == 11
    assert a.append("r", Entry.decided("steps/s6", "value", 0)).seq == 7  # still first writer wins
    assert stored[9].seq == 10


def test_compaction_of_everything_and_of_duplicates_keeps_numbering(tmp_path: Path) -> None:
    d = tmp_path / "j"
    d.mkdir()
    (d / "r.ndjson").write_text(
        '{"type":"run","run":"r","status":"running"}\n'
        '{"type":"entry","entry":{"path":"a","kind":"step","value":1}}\n'
        '{"type":"entry","entry":{"path":"b","kind":"step","value":2}}\n'
        '{"type":"entry","entry":{"path":"a","kind":"step","value":3}}\n'
        '{"type":"entry","entry":{"path":"c","kind":"step","value":4}}\n'
        '{"type":"entry","entry":{"path":"b","kind":"step","value":5}}\n'
    )
    store = FileStore(str(d))
    assert store.truncate_before("r", 2) == 1  # drops "a"; its later duplicate must not resurface
    assert [(e.path, e.seq, e.decode("r")) for e in store.read_entries("r")] == [("b", 2, 2.0), ("c", 4, 4.0)]
    assert store.append("r", Entry.step("d", None, 6)).seq == 6
    assert store.truncate_before("r", 100) == 3
    assert store.read_entries("r") == []
    assert store.append("r", Entry.step("e", None, 7)).seq == 7


# --- concurrency: threads ------------------------------------------------------------------------------


def test_threads_appending_to_one_run_converge(store: FileStore, directory: Path) -> None:
    store.admit(Admission.of("r"))
    results: dict[int, list[Entry]] = {}

    def work(t: int) -> None:
        results[t] = [store.append("r", Entry.decided(f"steps/p{i}", "value", t)) for i in range(60)]

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = {e.path: e for e in FileStore(store.directory).read_entries("r")}
    for got in results.values():
        assert got == [final[f"steps/p{i}"] for i in range(60)]
    assert sum(1 for ln in lines(run_file(directory, "r")) if ln["type"] == "entry") == 60


def test_appends_racing_compaction_lose_nothing(tmp_path: Path) -> None:
    a = FileStore(str(tmp_path / "j"))
    b = FileStore(str(tmp_path / "j"))
    a.admit(Admission.of("r"))
    appended: list[Entry] = []
    done = threading.Event()

    def compact() -> None:
        while not done.is_set():
            entries = b.read_entries("r")
            if entries:
                b.truncate_before("r", (entries[-1].seq or 0) - 3)

    t = threading.Thread(target=compact)
    t.start()
    try:
        for i in range(300):
            appended.append(a.append("r", Entry.decided(f"steps/p{i}", "value", i)))
    finally:
        done.set()
        t.join()
    assert [e.seq for e in appended] == list(range(1, 301))
    left = FileStore(a.directory).read_entries("r")
    assert left and left == appended[-len(left):]


# --- concurrency: processes ----------------------------------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from telo.journal.file import FileStore
    from telo.journal.model import Admission, Entry

    directory, role, go = sys.argv[1], sys.argv[2], sys.argv[3]
    store = FileStore(directory)
    open(go + "." + role, "w").close()
    while not os.path.exists(go):
        time.sleep(0.001)
    out = {}
    if role.startswith("append"):
        paths = [f"steps/p{i}" for i in range(150)]
        if role.endswith("1"):
            paths.reverse()
        for p in paths:
            out[p] = store.append("r", Entry.decided(p, "value", role)).decode("r")
    elif role.startswith("claim"):
        out = {run: store.claim(run, role, 600_000, 1_000) for run in [f"c{i}" for i in range(30)]}
    elif role.startswith("admit"):
        out = {run: store.admit(Admission.of(run, workflow=role)).admitted for run in [f"a{i}" for i in range(30)]}
    print(json.dumps(out))
    """
)


def _race(tmp_path: Path, directory: str, roles: list[str]) -> list[dict[str, Any]]:
    go = str(tmp_path / "go")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, directory, role, go], stdout=subprocess.PIPE,
                              env=env, text=True) for role in roles]
    deadline = time.monotonic() + 60
    while not all(os.path.exists(f"{go}.{role}") for role in roles):
        assert time.monotonic() < deadline, "workers did not start"
        time.sleep(0.01)
    Path(go).touch()
    outs = []
    for p in procs:
        stdout, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        outs.append(json.loads(stdout))
    return outs


def test_two_processes_appending_to_one_run_converge(tmp_path: Path) -> None:
    store = FileStore(str(tmp_path / "j"))
    store.admit(Admission.of("r"))
    one, two = _race(tmp_path, store.directory, ["append0", "append1"])
    assert one == two, "each process got back the stored (first) value for every path"
    assert set(one.values()) == {"append0", "append1"}, "both won some paths (they started from both ends)"
    final = {e.path: e.decode("r") for e in FileStore(store.directory).read_entries("r")}
    assert final == one
    entry_lines = [ln for ln in lines(run_file(Path(store.directory), "r")) if ln["type"] == "entry"]
    assert len(entry_lines) == 150, "no path was written twice"


def test_racing_claims_and_admissions_across_processes_are_exclusive(tmp_path: Path) -> None:
    store = FileStore(str(tmp_path / "j"))
    for i in range(30):
        store.admit(Admission.of(f"c{i}"))
    roles = ["claim0", "claim1", "claim2", "admit0", "admit1", "admit2"]
    outs = dict(zip(roles, _race(tmp_path, store.directory, roles), strict=True))
    for i in range(30):
        run = f"c{i}"
        winners = [r for r in roles[:3] if outs[r][run]]
        assert len(winners) == 1, (run, winners)
        rec = store.read_run(run)
        assert rec is not None and rec.claim is not None and rec.claim.holder == winners[0]
        admitted = [r for r in roles[3:] if outs[r][f"a{i}"]]
        assert len(admitted) == 1, (f"a{i}", admitted)
        rec = store.read_run(f"a{i}")
        assert rec is not None and rec.workflow == admitted[0]
        assert [ln["type"] for ln in lines(run_file(Path(store.directory), f"a{i}"))] == ["run"]


def test_fsync_off_still_writes_everything(tmp_path: Path) -> None:
    store = FileStore(str(tmp_path / "j"), fsync=False)
    store.admit(Admission.of("r", inputs={"x": 1}))
    store.append("r", Entry.decided("inputs", "inputs", {"x": 1}))
    fresh = FileStore(store.directory)
    rec = fresh.read_run("r")
    assert rec is not None and equal(rec.decoded_inputs(), {"x": 1})
    assert [e.path for e in fresh.read_entries("r")] == ["inputs"]


def test_a_scan_does_not_wait_for_a_run_file_another_process_holds_locked(store: FileStore, directory: Path) -> None:
    """A process paused (SIGSTOP) while it holds a run file's lock must not hang every other worker's sweep:
    scans skip the busy file (or show it as last scanned) instead of waiting for its lock."""
    import fcntl

    store.admit(Admission.of("free"))
    store.admit(Admission.of("held"))
    fresh = FileStore(store.directory)
    fd = os.open(run_file(directory, "held"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: conflicts like another process's lock
        began = time.monotonic()
        assert fresh.due_runs(10**15, 10) == ["free"]  # never scanned before: left out until the next scan
        assert time.monotonic() - began < 2
    finally:
        os.close(fd)
    assert sorted(fresh.due_runs(10**15, 10)) == ["free", "held"]
    fd = os.open(run_file(directory, "held"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert sorted(fresh.due_runs(10**15, 10)) == ["free", "held"]  # scanned before, unchanged: as it was
    finally:
        os.close(fd)
