"""telo.journal.compat: how a journal writes values — typed frames (the default) or, in ``legacy`` mode, plain
JSON for a runtime that predates the codec — chosen by TELO_JOURNAL_COMPAT, a store's own setting, or
``telo.load(..., journal_compat=…)``; and what each writer of values does with it."""

from __future__ import annotations

from pathlib import Path

import pytest

import telo
from telo.errors import Code, LegacyUnencodable, TeloError
from telo.journal.compat import ENV, mode_of, process_mode, writer_for
from telo.journal.file import FileStore
from telo.journal.memory import MemoryStore
from telo.journal.model import CODEC_VERSION, NO_VALUE, Admission, Entry, Outcome
from telo.journal.sqlite import SqliteStore
from telo.journal.stored import TYPED
from tests.compat.approval_flow import approval_flow
from tests.pg_support import fresh_prefix, pg_url


def test_the_process_mode_is_typed_unless_the_environment_says_legacy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert process_mode() == "typed" and writer_for(MemoryStore()) is TYPED
    monkeypatch.setenv(ENV, "")
    assert process_mode() == "typed"
    monkeypatch.setenv(ENV, "legacy")
    assert process_mode() == "legacy" and writer_for(MemoryStore()).legacy
    monkeypatch.setenv(ENV, "Legacy")
    with pytest.raises(TeloError) as caught:
        writer_for(MemoryStore())
    assert caught.value.code == Code.JOURNAL_CONFIG_INVALID and ENV in caught.value.message


def test_a_stores_own_mode_wins_and_ints_are_carried_where_upstream_had_a_form(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV, "legacy")
    memory = MemoryStore()
    memory.journal_compat = "typed"
    assert mode_of(memory) == "typed" and writer_for(memory) is TYPED
    monkeypatch.delenv(ENV)
    file, sqlite = FileStore(str(tmp_path / "files")), SqliteStore(str(tmp_path / "j.db"))
    try:
        file.journal_compat = sqlite.journal_compat = "legacy"
        assert (writer_for(file).legacy, writer_for(file).bigint) == (True, False)  # upstream's file: no int form
        assert (writer_for(sqlite).legacy, writer_for(sqlite).bigint) == (True, True)  # {"$bigint": "…"}
    finally:
        sqlite.close()


def test_the_values_upstream_reads_are_plain_json_and_teloss_own_records_stay_typed() -> None:
    legacy = writer_for(_legacy(MemoryStore()))
    step = Entry.step("steps/a", {"kind": "Run.Value", "name": "a"}, {"x": 1.5}, writer=legacy)
    assert (step.value, step.v) == ('{"x":1.5}', None)
    for decision in ("inputs", "predicate", "condition", "switch", "value", "collection"):
        entry = Entry.decided("steps/a/x", decision, ["a"], writer=legacy)
        assert (entry.value, entry.v) == ('["a"]', None), decision
    for decision in ("failure", "digest", "attempt", "retry", "schema", "unconfirmed", "patched"):
        entry = Entry.decided("steps/a/@x", decision, {"n": 1}, writer=legacy)  # an int: telo needs it back
        assert entry.v == CODEC_VERSION and entry.decode("r") == {"n": 1}, decision
    assert (Entry.step("steps/a", None, NO_VALUE, writer=legacy).value, Entry.step("s", None, writer=legacy).v) \
        == (None, None)
    admission = Admission.of("r", inputs={"ticket": "t1"}, writer=legacy)
    assert (admission.inputs, admission.inputs_v) == ('{"ticket":"t1"}', None)
    outcome = Outcome.completed({"steps": {}}, writer=legacy)
    assert (outcome.result, outcome.result_v) == ('{"steps":{}}', None)
    with pytest.raises(LegacyUnencodable):
        Entry.step("steps/a", None, {"n": 1}, writer=legacy)
    typed = Entry.step("steps/a", None, {"n": 1})  # the default is unchanged
    assert (typed.value, typed.v) == ('{"n":{"$telo":"int","value":"1"}}', CODEC_VERSION)


def _legacy(store: MemoryStore) -> MemoryStore:
    store.journal_compat = "legacy"
    return store


def test_sqlite_carries_an_int_as_upstreams_bigint(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "j.db"))
    try:
        store.journal_compat = "legacy"
        store.admit(Admission.of("r", writer=writer_for(store)))
        store.append("r", Entry.step("steps/n", None, {"n": 3}, writer=writer_for(store)))
        (entry,) = store.read_entries("r")
        assert (entry.value, entry.v) == ('{"n":{"$bigint":"3"}}', None)
        assert entry.decode("r") == {"n": 3} and type(entry.decode("r")["n"]) is int
    finally:
        store.close()


@pytest.mark.postgres
def test_postgres_carries_an_int_as_upstreams_bigint() -> None:
    from telo.journal.postgres import PostgresStore

    store = PostgresStore(pg_url(), table=fresh_prefix())
    try:
        store.journal_compat = "legacy"
        store.admit(Admission.of("r", inputs={"k": 7}, writer=writer_for(store)))
        store.append("r", Entry.step("steps/n", None, [1, 2.5], writer=writer_for(store)))
        (entry,) = store.read_entries("r")
        assert (entry.value, entry.v) == ('[{"$bigint":"1"},2.5]', None)
        assert entry.decode("r") == [1, 2.5] and type(entry.decode("r")[0]) is int
        record = store.read_run("r")
        assert record is not None and record.inputs_v is None and record.decoded_inputs() == {"k": 7}
    finally:
        store.close()


def test_a_delivery_legacy_mode_cannot_carry_is_refused_and_the_token_stays_usable(tmp_path: Path) -> None:
    app = telo.load(_FLOW, journal=str(tmp_path / "journal") + "/", journal_compat="legacy")
    with app:
        assert app.run("flow", {"id": "x"}).status == "parked"
        with pytest.raises(TeloError) as caught:
            app.deliver("go:x", {"by": 1})  # an int: the file journal's upstream reader would read a double
        assert caught.value.code == Code.JOURNAL_LEGACY_UNENCODABLE and caught.value.data["path"] == "/by"
        assert app.deliver("go:x", {"by": "bob"}).delivered
        assert app.wait("flow:x", timeout=30).step("last") == "hello bob"
    entries = FileStore(str(tmp_path / "journal")).read_entries("flow:x")
    assert all(e.v is None for e in entries if e.kind == "step" or e.decision in ("inputs", "value"))


def test_the_environment_sets_the_mode_and_load_overrides_it(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "legacy")
    with telo.load(_FLOW, journal=str(tmp_path / "a.db")) as app:
        assert app.run("flow", {"id": "x"}).status == "parked"
    with telo.load(_FLOW, journal=str(tmp_path / "b.db"), journal_compat="typed") as app:
        assert app.run("flow", {"id": "x"}).status == "parked"
    a, b = SqliteStore(str(tmp_path / "a.db")), SqliteStore(str(tmp_path / "b.db"))
    try:
        assert {e.v for e in a.read_entries("flow:x") if e.decision == "inputs"} == {None}
        assert {e.v for e in b.read_entries("flow:x") if e.decision == "inputs"} == {CODEC_VERSION}
    finally:
        a.close()
        b.close()
    with pytest.raises(TeloError) as caught:
        telo.load(_FLOW, journal="memory:", journal_compat="plain")
    assert caught.value.code == Code.JOURNAL_CONFIG_INVALID and "journal_compat" in caught.value.message


def test_a_step_result_legacy_mode_refuses_fails_the_step_with_its_path_and_type(tmp_path: Path) -> None:
    with telo.load(_FLOW + _COUNTING, journal="memory:", journal_compat="legacy") as app:
        result = app.run("counting", {"id": "c"})
    assert result.status == "failed" and result.error is not None
    assert result.error.code == Code.DURABLE_UNJOURNALABLE_VALUE
    assert "'steps/count'" in result.error.message and "int" in result.error.message


_FLOW = approval_flow("Compat", "durable-journal-sqlite", "path: ./journal.db")
_COUNTING = """\
---
kind: Run.Value
metadata: { name: count }
value: !cel "size(inputs.items)"
---
kind: Local.Workflow
metadata: { name: counting }
journal: !ref runs
runId: !cel "'counting:' + inputs.id"
steps:
  - { name: count, invoke: !ref count, inputs: { items: [ a, b ] } }
"""


@pytest.mark.postgres
def test_a_postgres_journal_in_legacy_mode_carries_ints_through_a_run() -> None:
    from telo.journal.postgres import PostgresStore

    url, table = pg_url(), fresh_prefix()
    journal = f'kind: Journal.Journal\nmetadata: {{ name: runs }}\nurl: "{url}"\ntable: {table}'
    text = (_FLOW + _COUNTING).replace("durable-journal-sqlite", "durable-journal-postgres").replace(
        "kind: Journal.Journal\nmetadata: { name: runs }\npath: ./journal.db", journal)
    with telo.load(text, journal_compat="legacy") as app:
        result = app.run("counting", {"id": "c"})
        assert app.run("flow", {"id": "p"}).status == "parked"
        assert app.deliver("go:p", {"by": "bob", "n": 2}).delivered
        assert app.wait("flow:p", timeout=30).step("last") == "hello bob"
    assert result.status == "completed" and result.step("count") == 2 and type(result.step("count")) is int
    store = PostgresStore(url, table=table)
    try:
        entries = {e.path: e for e in store.read_entries("counting:c")}
        assert (entries["steps/count"].value, entries["steps/count"].v) == ('{"$bigint":"2"}', None)
        delivered = {e.path: e for e in store.read_entries("flow:p")}["steps/wait"]
        assert (delivered.value, delivered.v) == ('{"by":"bob","n":{"$bigint":"2"}}', None)
        record = store.read_run("counting:c")
        assert record is not None and record.result_v is None and record.decoded_result()["steps"]["count"] == {
            "result": 2}
    finally:
        store.close()


def test_the_runtimes_own_times_are_doubles_where_the_journal_is_legacy() -> None:
    from types import SimpleNamespace

    from telo.engine.handle import as_epoch_ms, epoch_ms_value

    assert type(epoch_ms_value(None, 5)) is int and type(epoch_ms_value(SimpleNamespace(), 5)) is int
    assert epoch_ms_value(SimpleNamespace(epoch_ms_as_double=True), 5) == 5.0
    assert type(epoch_ms_value(SimpleNamespace(epoch_ms_as_double=True), 5)) is float
    # read back: an upstream or legacy double is the next whole millisecond, so a wait never ends early
    assert [as_epoch_ms(v) for v in (7, 7.0, 7.25, float("nan"), float("inf"), True, "7", None)] == \
        [7, 7, 8, None, None, None, None, None]


def test_a_store_shared_by_applications_keeps_its_mode_and_a_conflicting_one_is_refused(tmp_path: Path) -> None:
    """The mode was set on the shared store object: the last application given the store decided how the others
    wrote (one that asked for legacy wrote typed frames). A store keeps the first mode it is given now."""
    from telo.api.aio import AsyncApp
    from telo.journal.compat import given_mode
    from telo.kinds.controllers import load_application

    store = FileStore(str(tmp_path / "journal"))
    try:
        first = AsyncApp(load_application(tmp_path / "a.yaml", text=_FLOW), journal=store, journal_compat="legacy")
        assert mode_of(store) == "legacy" and first.journal_compat == "legacy"
        with pytest.raises(TeloError) as refused:
            AsyncApp(load_application(tmp_path / "b.yaml", text=_FLOW), journal=store, journal_compat="typed")
        assert refused.value.code == Code.JOURNAL_CONFIG_INVALID and "'legacy' already" in refused.value.message
        given_mode(store, "legacy", "again")  # the same mode: fine
        assert mode_of(store) == "legacy"
    finally:
        store.close()
