"""Golden file journals of our own (tests/compat/golden/) must keep reading IDENTICALLY (reference §7-§8).

- ``golden%3Alegacy.ndjson``: the legacy format (no ``v``, plain JSON values, last run line wins);
- ``golden%3Av1.ndjson``: codec v1, whose timestamps carry exactly three fractional digits (spec §5.2);
- ``golden%3Av2.ndjson``: codec v2 written by telo's FileStore: typed frames, claim lines, a park;
- ``golden%3Acompacted.ndjson``: a compacted file (base line) written by FileStore.

The v2 and compacted files are also regenerated and compared byte for byte, so a change to what the
store WRITES shows up here as well. If such a change is intended, the old files must still read as
asserted below: add new golden files rather than editing these. ``golden/fenced/`` holds the v2 and
compacted files as the store wrote them once claim lines carried their fencing token (telo.journal.claims),
and ``golden/timed/`` as it writes them since entry lines also carry their write time (``"at"``, issue 15): the
regenerated files are compared with those; the files above still read identically (token 0), and the fenced
ones too, their entries without a time (``at=None``).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from telo.clock import FakeClock
from telo.journal.file import FileStore
from telo.journal.model import NO_VALUE, Admission, Claim, Entry, Outcome, Parked, RunRecord
from telo.values import CelMap, Duration, Timestamp, Uint, equal

GOLDEN = Path(__file__).resolve().parent / "golden"
FENCED = GOLDEN / "fenced"  # what the store wrote before entry lines carried their time
WRITTEN = GOLDEN / "timed"  # what the store writes now
ORDERS = "file:///app/orders.yaml"
FLOW = "file:///app/flow.yaml"
START = 1_767_225_600_000  # FakeClock's default start
HOLDER = "golden-worker@golden-host:4242:99"
RUN = RunRecord("missing", "running", fence=-1)  # what a test reads when a golden run is missing


def open_copy(tmp_path: Path, *names: str) -> FileStore:
    d = tmp_path / "journal"
    d.mkdir(exist_ok=True)
    for name in names:
        shutil.copyfile(GOLDEN / name, d / name)
    return FileStore(str(d))


def decoded(store: FileStore, run: str) -> list[tuple[str, int | None, str, str | None, Any, Any]]:
    return [(e.path, e.seq, e.kind, e.decision, e.target, e.decode(run)) for e in store.read_entries(run)]


def assert_values(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> None:
    assert [g[:5] for g in got] == [w[:5] for w in want]
    for g, w in zip(got, want, strict=True):
        assert (g[5] is NO_VALUE) == (w[5] is NO_VALUE), g
        assert g[5] is NO_VALUE or equal(g[5], w[5]), (g, w)


# --- legacy --------------------------------------------------------------------------------------------


def test_legacy_golden_reads_identically(tmp_path: Path) -> None:
    store = open_copy(tmp_path, "golden%3Alegacy.ndjson")
    run = "golden:legacy"
    rec = store.read_run(run)
    assert rec is not None
    # the last run line wins, and the upstream failure line carries no inputs or dueAt (reference §7)
    assert rec.status == "failed" and rec.error == {"code": "ERR_CARD_DECLINED", "message": "card declined"}
    assert rec.inputs is None and rec.due_at is None and rec.created_at is None and rec.workflow is None
    assert rec.collapsed_regions == 0 and rec.collapse_reasons == () and rec.replayed_steps is None
    t = {"kind": "Run.Value", "module": ORDERS}
    entries = decoded(store, run)
    assert_values(entries, [
        ("inputs", 1, "decision", "inputs", None, {"order": "A-7", "qty": 3.0}),
        ("steps/price", 2, "step", None, {**t, "name": "price"}, 12.5),
        ("steps/count", 3, "step", None, {**t, "name": "count"}, 9007199254740992.0),  # a JS double
        ("steps/gate/if", 4, "decision", "predicate", None, False),
        ("steps/items", 5, "step", None, {**t, "name": "items"},
         [1.0, "two", None, {"n": -0.5, "tagged": {"$telo": "int", "value": "1"}}]),  # legacy: no tags
        ("steps/notify", 6, "step", None, {"kind": "Console.WriteLine", "name": "say", "module": ORDERS},
         NO_VALUE),
    ])  # the second "steps/price" line (ordinal 7) loses: first writer wins
    # legacy numbers are doubles, exactly as the Node runtime held them
    assert type(entries[0][5]["qty"]) is float and type(entries[4][5][0]) is float
    assert all(e.v is None for e in store.read_entries(run))


# --- v1 ------------------------------------------------------------------------------------------------


def test_v1_golden_reads_identically(tmp_path: Path) -> None:
    store = open_copy(tmp_path, "golden%3Av1.ndjson")
    run = "golden:v1"
    rec = store.read_run(run)
    assert rec is not None and rec.status == "completed" and rec.result_v == 1
    assert rec.inputs is None and rec.inputs_v is None  # the upstream completion line carries no inputs
    assert equal(rec.decoded_result(), {"steps": {"stamp": {"result": Timestamp(1768462200, 120_000_000)}}})
    assert rec.replayed_steps == 0 and rec.collapse_reasons == ()
    fn = {"kind": "Python.Function", "module": FLOW}
    assert_values(decoded(store, run), [
        ("inputs", 1, "decision", "inputs", None, {"at": Timestamp(1768462200, 0), "n": 7}),
        ("steps/stamp", 2, "step", None, {**fn, "name": "stamp"}, Timestamp(1768462200, 120_000_000)),
        ("steps/list", 3, "step", None, {**fn, "name": "list"},
         [Timestamp(-1, 500_000_000), 1.5, b"\x00\xff", Duration(1, 500_000_000)]),
    ])
    assert all(e.v == 1 for e in store.read_entries(run))


# --- v2 ------------------------------------------------------------------------------------------------

BIG = 2**53 + 1
V2_INPUTS = {"big": BIG, "u": Uint(2**64 - 1)}
V2_VALUES: list[tuple[str, Any]] = [
    ("steps/big", [2**63 - 1, -BIG, -(2**63)]),
    ("steps/uint", Uint(18446744073709551615)),
    ("steps/bytes", b"\x00\xfb\xff"),
    ("steps/at", Timestamp(1768462200, 1)),
    ("steps/wait", Duration(-1, -500_000_000)),
    ("steps/map", {10: "ten", -1: "minus one", 2: "two"}),
    ("steps/mixed", CelMap([(Uint(3), "y"), (True, None), ("a", 1.5)])),
    ("steps/doubles", [float("inf"), -0.0, 1e21, 5.0]),
    ("steps/null", None),
]
V2_RESULT = {"steps": {"big": {"result": BIG}, "approve": {"result": {"approvedBy": "ada"}}}}
FN = {"kind": "Python.Function", "name": "work", "module": FLOW}


def write_v2(directory: Path) -> None:
    clock = FakeClock()
    store = FileStore(str(directory), clock=clock)
    run = "golden:v2"
    store.admit(Admission.of(run, status="scheduled", due_at=START + 1_000, inputs=V2_INPUTS, workflow="golden",
                             manifest_digest="sha256-abc", digest_scope="reachable"))
    clock.advance(ms=1_000)
    store.update_run(run, status="running")
    assert store.claim(run, HOLDER, 60_000, clock.now_ms())
    store.append(run, Entry.decided("inputs", "inputs", V2_INPUTS))
    for path, value in V2_VALUES:
        clock.advance(ms=1)
        store.append(run, Entry.step(path, FN, value))
    store.append(run, Entry.step("steps/nothing", FN))  # produced no value
    store.append(run, Entry.decided("steps/gate/@when", "predicate", True))
    clock.advance(ms=1)
    store.park(run, Parked("steps/approve", "approval", "approve:golden", START + 90_000))
    store.append(run, Entry.step("steps/approve", None, {"approvedBy": "ada"}))  # a delivery
    clock.advance(ms=1)
    store.unpark(run)
    assert store.claim(run, HOLDER, 60_000, clock.now_ms())
    clock.advance(ms=1)
    store.complete(run, Outcome.completed(
        V2_RESULT, collapsed_regions=1, replayed_steps=2,
        collapse_reasons=("Durable.Idempotent (idempotent): the author asserts re-running this region is "
                          "observably a no-op; this resource's `reason:` states why",)))


def test_v2_golden_reads_identically(tmp_path: Path) -> None:
    store = open_copy(tmp_path, "golden%3Av2.ndjson")
    run = "golden:v2"
    rec = store.read_run(run)
    assert rec is not None
    assert (rec.status, rec.workflow, rec.manifest_digest, rec.digest_scope) == (
        "completed", "golden", "sha256-abc", "reachable")
    assert (rec.created_at, rec.updated_at, rec.due_at, rec.parked, rec.claim, rec.error) == (
        START, START + 1_000 + 12, None, None, None, None)
    assert rec.inputs_v == 2 and equal(rec.decoded_inputs(), V2_INPUTS)
    assert rec.result_v == 2 and equal(rec.decoded_result(), V2_RESULT)
    assert (rec.collapsed_regions, rec.replayed_steps) == (1, 2) and len(rec.collapse_reasons or ()) == 1
    want = [("inputs", 1, "decision", "inputs", None, V2_INPUTS)]
    want += [(p, i + 2, "step", None, FN, v) for i, (p, v) in enumerate(V2_VALUES)]
    want += [
        ("steps/nothing", 11, "step", None, FN, NO_VALUE),
        ("steps/gate/@when", 12, "decision", "predicate", None, True),
        ("steps/approve", 13, "step", None, None, {"approvedBy": "ada"}),
    ]
    got = decoded(store, run)
    assert_values(got, want)
    # exact types where equal() alone would not say enough
    big = got[1][5]
    assert big == [2**63 - 1, -BIG, -(2**63)] and all(type(x) is int for x in big)
    assert type(got[2][5]) is Uint and math.copysign(1.0, got[8][5][1]) == -1.0
    entries = store.read_entries(run)
    assert entries[9].value == "null" and entries[10].value is None
    assert all(e.v == 2 for e in entries)


def test_v2_golden_is_what_the_store_writes(tmp_path: Path) -> None:
    write_v2(tmp_path / "fresh")
    assert (tmp_path / "fresh" / "golden%3Av2.ndjson").read_bytes() == (WRITTEN / "golden%3Av2.ndjson").read_bytes()


def test_claim_lines_without_a_fencing_token_read_as_token_0_and_the_next_grant_is_1(tmp_path: Path) -> None:
    store = open_copy(tmp_path, "golden%3Av2.ndjson", "golden%3Acompacted.ndjson")
    assert (store.read_run("golden:v2") or RUN).fence == 0
    compacted = store.read_run("golden:compacted")
    assert compacted is not None and compacted.fence == 0 and compacted.claim == Claim(HOLDER, START + 60_000)
    assert store.claim("golden:compacted", HOLDER, 60_000, START + 60_001) == 1
    fenced = FileStore(str(tmp_path / "journal")).read_run("golden:compacted")
    assert fenced is not None and fenced.fence == 1


# --- compacted -----------------------------------------------------------------------------------------


def write_compacted(directory: Path) -> None:
    clock = FakeClock()
    store = FileStore(str(directory), clock=clock)
    run = "golden:compacted"
    store.admit(Admission.of(run, workflow="golden"))
    for i in range(6):
        store.append(run, Entry.decided(f"steps/s{i}/@when", "predicate", i % 2 == 0))
    assert store.claim(run, HOLDER, 60_000, clock.now_ms())
    assert store.truncate_before(run, 4) == 3


def _without_id(data: bytes) -> list[dict[str, Any]]:
    out = [json.loads(line) for line in data.splitlines()]
    out[0].pop("id")
    return out


def test_compacted_golden_reads_identically(tmp_path: Path) -> None:
    store = open_copy(tmp_path, "golden%3Acompacted.ndjson")
    run = "golden:compacted"
    rec = store.read_run(run)
    assert rec is not None and rec.status == "running" and rec.workflow == "golden"
    assert rec.claim == Claim(HOLDER, START + 60_000)
    assert_values(decoded(store, run), [
        ("steps/s3/@when", 4, "decision", "predicate", None, False),
        ("steps/s4/@when", 5, "decision", "predicate", None, True),
        ("steps/s5/@when", 6, "decision", "predicate", None, False),
    ])
    assert store.append(run, Entry.decided("steps/s6/@when", "predicate", True)).seq == 7


def test_compacted_golden_is_what_the_store_writes(tmp_path: Path) -> None:
    write_compacted(tmp_path / "fresh")
    fresh = (tmp_path / "fresh" / "golden%3Acompacted.ndjson").read_bytes()
    assert _without_id(fresh) == _without_id((WRITTEN / "golden%3Acompacted.ndjson").read_bytes())


def test_entry_lines_without_a_time_read_as_before_and_the_written_ones_keep_theirs(tmp_path: Path) -> None:
    """The fenced goldens (entry lines without ``"at"``) read exactly what the timed ones do, with no times."""
    for name, run in (("golden%3Av2.ndjson", "golden:v2"), ("golden%3Acompacted.ndjson", "golden:compacted")):
        untimed = tmp_path / "untimed" / name
        untimed.parent.mkdir(exist_ok=True)
        shutil.copyfile(FENCED / name, untimed)
        old = FileStore(str(untimed.parent))
        new = FileStore(str(WRITTEN))
        assert [e.at for e in old.read_entries(run)] == [None] * len(old.read_entries(run))
        assert all(e.at is not None and e.at >= START for e in new.read_entries(run))
        assert [(e.path, e.seq, e.kind, e.decision, e.target, e.value, e.v) for e in old.read_entries(run)] == \
            [(e.path, e.seq, e.kind, e.decision, e.target, e.value, e.v) for e in new.read_entries(run)]
        assert old.read_run(run) == new.read_run(run)
    legacy = open_copy(tmp_path, "golden%3Av2.ndjson")
    assert {e.at for e in legacy.read_entries("golden:v2")} == {None}


def test_appending_to_every_golden_continues_it(tmp_path: Path) -> None:
    names = sorted(p.name for p in GOLDEN.glob("*.ndjson"))
    assert len(names) == 4
    store = open_copy(tmp_path, *names)
    for name in names:
        run = json.loads(next(ln for ln in (GOLDEN / name).read_text().splitlines() if '"type":"run"' in ln))["run"]
        before = (GOLDEN / name).read_bytes()
        n = len(store.read_entries(run))
        e = store.append(run, Entry.step("steps/after", None, {"more": 1}))
        assert e.seq is not None and e.seq > max(x.seq or 0 for x in store.read_entries(run)[:-1])
        after = (tmp_path / "journal" / name).read_bytes()
        assert after.startswith(before) and after.endswith(b"\n")
        assert len(FileStore(store.directory).read_entries(run)) == n + 1
