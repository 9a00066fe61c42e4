"""The kind registry: built-in modules, schemas, annotations, import resolution (reference §5-§7, §13, §14)."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from telo.errors import ManifestError
from telo.specs import BUILTIN_KINDS, BUILTIN_MODULES, conforms, module_name_of, resolve_import, user_modules
from telo.specs.durable import IDEMPOTENT_REASON
from telo.specs.steps import STEP_SCHEMAS, TARGET_STEP, branch_bodies, step_kind


def test_modules_and_canonical_names() -> None:
    expected = {
        "run": ("Run", {"Sequence", "Value", "Iteration", "Projection", "Loop", "Choice", "Detach"}),
        "console": ("Console", {"WriteLine"}),
        "timer": ("Timer", {"Delay"}),
        "scheduler": ("Scheduler", {"Cron", "Interval"}),
        "durable": ("Durable", {"Run", "Idempotent", "Sleep", "Await", "Value", "Patched", "Receive", "Publish",
                                "StreamWrite", "Consume"}),
        "durable-local": ("DurableLocal", {"Workflow", "Queue", "Resumer", "Deliver", "Status", "Result", "Cancel",
                                           "Send", "Event", "Schedule", "Resume", "Journal"}),
        "durable-journal-file": ("DurableJournalFile", {"Journal"}),
        "durable-journal-sqlite": ("DurableJournalSqlite", {"Journal"}),
        "durable-journal-postgres": ("DurableJournalPostgres", {"Journal"}),
        "python": ("Python", {"Function"}),
        "assert": ("Assert", {"Equals", "Events", "Manifest"}),
        "sql": ("Sql", {"Connection", "Transaction", "Query", "Command", "Exec", "Selection"}),
        "postgres": ("Postgres", {"Connection", "Table", "Schema"}),
        "sqlite": ("SQLite", {"Connection", "Table", "Schema"}),
        "sql-sqlite": ("SQLite", {"Connection"}),
        "test": ("Test", {"Suite"}),
    }
    # (modules registered from Python by other tests in this process are not telo's own)
    ours = {n: m for n, m in BUILTIN_MODULES.items() if n not in user_modules()}
    assert {n: (m.canonical, set(m.kinds)) for n, m in ours.items()} == expected
    assert {"Telo.Type", "Telo.JsonSchema"} <= set(BUILTIN_KINDS)


@pytest.mark.parametrize("canonical", sorted(BUILTIN_KINDS))
def test_every_schema_is_valid_draft_2020_12(canonical: str) -> None:
    Draft202012Validator.check_schema(dict(BUILTIN_KINDS[canonical].schema))


def test_step_schemas_are_valid() -> None:
    for schema in (*STEP_SCHEMAS.values(), TARGET_STEP):
        Draft202012Validator.check_schema(schema)


def test_annotations() -> None:
    wf = BUILTIN_KINDS["DurableLocal.Workflow"]
    assert wf.extends == "Durable.Run" and wf.fields["journal"].ref == "DurableLocal.Journal"
    assert wf.fields["steps"].steps and wf.fields["steps"].provides_zone is not None
    assert "replayed" in wf.fields["steps"].provides_zone
    assert wf.fields["runId"].eval == "runtime" and wf.fields["onConflict"].default == "attach"
    assert [f.name for f in wf.body_fields()] == ["steps"]
    idem = BUILTIN_KINDS["Durable.Idempotent"]
    assert idem.fields["steps"].provides_zone == {"idempotent": IDEMPOTENT_REASON}
    sleep = BUILTIN_KINDS["Durable.Sleep"]
    assert sleep.requires_zone == {"zone": "Durable.Run", "attributes": ["replayed"]}
    assert sleep.violates_zone is not None and "noSuspend" in sleep.violates_zone
    assert BUILTIN_KINDS["Durable.Value"].violates_zone is None
    tx = BUILTIN_KINDS["Sql.Transaction"].fields["steps"].provides_zone
    assert tx is not None and set(tx) == {"atomic", "noSuspend"}
    assert BUILTIN_KINDS["Run.Detach"].fields["invoke"].use == "detached"
    assert BUILTIN_KINDS["DurableLocal.Resumer"].fields["interval"].eval == "compile"
    assert BUILTIN_KINDS["Run.Sequence"].capabilities == {"invocable", "runnable"}
    assert BUILTIN_KINDS["DurableLocal.Journal"].abstract and BUILTIN_KINDS["Durable.Run"].abstract
    assert BUILTIN_KINDS["Console.WriteLine"].input_schema is not None


def test_conforms_follows_extends() -> None:
    sqlite = BUILTIN_KINDS["DurableJournalSqlite.Journal"]
    assert conforms(sqlite, "DurableLocal.Journal", BUILTIN_KINDS)
    assert conforms(sqlite, "*", BUILTIN_KINDS)
    assert not conforms(sqlite, "Durable.Run", BUILTIN_KINDS)
    assert conforms(BUILTIN_KINDS["DurableLocal.Workflow"], "Durable.Run", BUILTIN_KINDS)
    assert conforms(BUILTIN_KINDS["Telo.JsonSchema"], "Telo.Type", BUILTIN_KINDS)


def test_resolve_import() -> None:
    assert module_name_of("oci://ghcr.io/org/durable-local@1.2.3") == "durable-local"
    assert module_name_of("..\\modules\\run\\") == "run"
    assert resolve_import("durable") is BUILTIN_MODULES["durable"]
    assert resolve_import("../../modules/sql").canonical == "Sql"
    with pytest.raises(ManifestError) as info:
        resolve_import("oci://ghcr.io/org/unknown@1")
    assert info.value.code == "ERR_MANIFEST_UNKNOWN_MODULE" and "'unknown'" in info.value.message


def test_step_kind_order_and_branches() -> None:
    assert step_kind({"name": "x", "value": 1, "invoke": 2}) == "invoke"
    assert step_kind({"name": "x"}) is None
    step = {"name": "s", "if": True, "then": [1], "elseif": [{"if": False, "then": [2]}], "else": [3]}
    assert [k for k, _ in branch_bodies(step)] == [("then",), ("elseif", 0, "then"), ("else",)]
    sw = {"name": "s", "switch": 1, "cases": {"a": [], "b": []}, "default": []}
    assert [k for k, _ in branch_bodies(sw)] == [("cases", "a"), ("cases", "b"), ("default",)]
    tr = {"name": "t", "try": [], "catch": [], "finally": []}
    assert [k for k, _ in branch_bodies(tr)] == [("try",), ("catch",), ("finally",)]
    assert branch_bodies({"name": "w", "while": True, "do": []}) == [(("do",), [])]
