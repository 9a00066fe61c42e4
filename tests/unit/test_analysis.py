"""The zone checks of ``telo check`` (reference §12): nondeterminism in an idempotent region, a detached
dispatch in a replayed one, a zone-violating resource or a parking retry in a noSuspend one — each at its
position, and none for clean manifests."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from telo.analysis import DURABLE_DETACH_FORBIDDEN, DURABLE_NONDETERMINISM, ZONE_ATTRIBUTE_VIOLATED, check
from telo.manifest import Diagnostic
from telo.specs.durable import IDEMPOTENT_REASON, NO_SUSPEND_PARK
from telo.specs.durable_local import REPLAYED_REASON
from telo.specs.sql import NO_SUSPEND_REASON

ZONE_CODES = (DURABLE_NONDETERMINISM, DURABLE_DETACH_FORBIDDEN, ZONE_ATTRIBUTE_VIOLATED)

HEADER = """\
kind: Telo.Application
metadata: { name: Checks }
imports:
  Run: run
  Local: durable-local
  Durable: durable
  Journal: durable-journal-sqlite
  Sql: sql
targets: []
---
kind: Journal.Journal
metadata: { name: runs }
path: ./j.db
---
kind: Sql.Connection
metadata: { name: db }
url: ./j.db
"""


def write(tmp_path: Path, body: str) -> tuple[Path, str]:
    text = HEADER + textwrap.dedent(body)
    path = tmp_path / "app.yaml"
    path.write_text(text)
    return path, text


def at(text: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the ``nth`` occurrence of ``needle``."""
    index = -1
    for _ in range(nth + 1):
        index = text.index(needle, index + 1)
    return text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1


def zone_findings(path: Path) -> list[Diagnostic]:
    found = check(path)
    assert not [d for d in found if d.severity == "error" and d.code not in ZONE_CODES], found
    return [d for d in found if d.code in ZONE_CODES]


def where(d: Diagnostic) -> tuple[int, int]:
    assert d.pos is not None
    return d.pos.line, d.pos.column


# --- DURABLE_NONDETERMINISM ---------------------------------------------------------------------------------


def test_an_impure_call_in_an_idempotent_region_is_reported_at_the_expression(tmp_path: Path) -> None:
    path, text = write(tmp_path, """\
        ---
        kind: Durable.Idempotent
        metadata: { name: bulk }
        reason: re-importing the same rows is a no-op
        steps:
          - name: fine
            value: !cel "string(1)"
          - name: stamp
            value: !cel "nowMillis() + 1"
          - name: guarded
            when: ${{ size(uuidv4()) > 0 }}
            invoke: !ref nothing
        ---
        kind: Run.Value
        metadata: { name: nothing }
        value: 1
        """)
    found = zone_findings(path)
    assert [(d.code, where(d)) for d in found] == [
        (DURABLE_NONDETERMINISM, at(text, '!cel "nowMillis() + 1"')),
        (DURABLE_NONDETERMINISM, at(text, "size(uuidv4())")),  # a ${{ }} expression starts inside
    ]
    message = found[0].message
    assert "nowMillis()" in message and IDEMPOTENT_REASON in message
    assert "re-importing the same rows is a no-op" in message and "Durable.Value" in (found[0].hint or "")
    assert "uuidv4()" in found[1].message


def test_resources_reached_from_the_region_are_inside_it_but_pinned_values_are_the_cure(tmp_path: Path) -> None:
    path, text = write(tmp_path, """\
        ---
        kind: Run.Value
        metadata: { name: stamp }
        value: !cel "nowMillis()"
        ---
        kind: Durable.Value
        metadata: { name: pin }
        value: !cel "uuidv4()"
        ---
        kind: Run.Sequence
        metadata: { name: middle }
        steps:
          - { name: s, invoke: !ref stamp }
        ---
        kind: Durable.Idempotent
        metadata: { name: bulk }
        reason: no-op
        steps:
          - { name: m, invoke: !ref middle }
          - { name: p, invoke: !ref pin }
        """)
    [finding] = zone_findings(path)
    assert finding.code == DURABLE_NONDETERMINISM
    assert where(finding) == at(text, '!cel "nowMillis()"')
    assert "Durable.Idempotent 'bulk' → step 'm' → Run.Sequence 'middle' → step 's' → Run.Value 'stamp'" in (
        finding.message)


def test_a_merely_replayed_region_may_read_the_clock(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """\
        ---
        kind: Local.Workflow
        metadata: { name: wf }
        journal: !ref runs
        runId: !cel "'r:' + uuidv4()"
        steps:
          - { name: t, value: !cel "nowMillis()" }
          - { name: i, invoke: !ref calm }
        ---
        kind: Durable.Idempotent
        metadata: { name: calm }
        reason: no-op
        steps:
          - { name: ok, value: !cel "string(1) + 'x'" }
        """)
    assert zone_findings(path) == []


def test_a_nested_run_started_in_the_region_has_its_own_body_but_not_its_call(tmp_path: Path) -> None:
    # Spec §7.3: a nested run's body starts outside every enclosing zone; its runId is evaluated at the call.
    path, text = write(tmp_path, """\
        ---
        kind: Local.Workflow
        metadata: { name: child }
        journal: !ref runs
        runId: !cel "'c:' + uuidv4()"
        steps:
          - { name: t, value: !cel "nowMillis()" }
        ---
        kind: Durable.Idempotent
        metadata: { name: bulk }
        reason: no-op
        steps:
          - { name: start, invoke: !ref child }
        """)
    [finding] = zone_findings(path)
    assert (finding.code, where(finding)) == (DURABLE_NONDETERMINISM, at(text, "!cel \"'c:' + uuidv4()\""))


# --- DURABLE_DETACH_FORBIDDEN -------------------------------------------------------------------------------


def test_a_detached_dispatch_inside_a_workflow_body_is_forbidden(tmp_path: Path) -> None:
    path, text = write(tmp_path, """\
        ---
        kind: Run.Value
        metadata: { name: work }
        value: 1
        ---
        kind: Run.Detach
        metadata: { name: fire }
        invoke: !ref work
        ---
        kind: Run.Sequence
        metadata: { name: outer }
        steps:
          - { name: f, invoke: !ref fire }
        ---
        kind: Local.Workflow
        metadata: { name: wf }
        journal: !ref runs
        steps:
          - name: branch
            if: !cel "inputs.go == true"
            then:
              - { name: o, invoke: !ref outer }
        ---
        kind: Run.Sequence
        metadata: { name: undurable }
        steps:
          - { name: fine, invoke: !ref fire }
        """)
    [finding] = zone_findings(path)
    assert finding.code == DURABLE_DETACH_FORBIDDEN
    assert where(finding) == at(text, "!ref work")
    assert REPLAYED_REASON in finding.message
    assert "Local.Workflow 'wf' → step 'branch' → step 'o' → Run.Sequence 'outer' → step 'f' → Run.Detach 'fire'" in (
        finding.message)


# --- ZONE_ATTRIBUTE_VIOLATED --------------------------------------------------------------------------------


def test_a_sleep_reached_inside_a_transaction_names_both_reasons_and_the_path(tmp_path: Path) -> None:
    path, text = write(tmp_path, """\
        ---
        kind: Durable.Sleep
        metadata: { name: nap }
        for: 1h
        ---
        kind: Run.Sequence
        metadata: { name: inner }
        steps:
          - { name: wait, invoke: !ref nap }
        ---
        kind: Sql.Transaction
        metadata: { name: tx }
        connection: !ref db
        steps:
          - { name: save, invoke: !ref inner }
          - { name: await, invoke: { kind: Durable.Await, token: abc } }
        ---
        kind: Local.Workflow
        metadata: { name: wf }
        journal: !ref runs
        steps:
          - { name: outside, invoke: !ref nap }
          - { name: t, invoke: !ref tx }
        """)
    found = zone_findings(path)
    assert [(d.code, where(d)) for d in found] == [
        (ZONE_ATTRIBUTE_VIOLATED, at(text, "!ref nap", 0)),
        (ZONE_ATTRIBUTE_VIOLATED, at(text, "{ kind: Durable.Await")),
    ]
    sleep = found[0].message
    assert NO_SUSPEND_PARK in sleep and NO_SUSPEND_REASON in sleep
    # Told from the region that forbids it, however the walk got there (the workflow reaches it too).
    assert "reached by: Sql.Transaction 'tx' → step 'save' → Run.Sequence 'inner' → step 'wait' → " \
        "Durable.Sleep 'nap'" in sleep


@pytest.mark.parametrize(("retry", "parks"), [
    ("{ attempts: 8 }", True),  # 250 × 2^7 = 32000 ≥ 30000
    ("{ attempts: 7 }", False),  # 16000
    ("{ attempts: 3, initialDelay: 10000, factor: 3, maxDelay: 60000 }", True),  # min(60000, 90000)
    ("{ attempts: 5, delay: 30s, factor: 1 }", True),  # the deprecated delay
    ("{ attempts: 3, initialDelay: 10s, factor: 3, maxDelay: 1m }", True),  # durations: as 10000 and 60000
    ("{ attempts: 3, initialDelay: 10s, factor: 2, maxDelay: 25s }", False),  # min(25000, 40000)
    ("{ attempts: 0, initialDelay: 100000 }", False),  # no re-attempt, no wait
])
def test_a_retry_whose_last_backoff_parks_is_refused_in_a_no_suspend_region(
    tmp_path: Path, retry: str, parks: bool
) -> None:
    path, text = write(tmp_path, f"""\
        ---
        kind: Run.Value
        metadata: {{ name: work }}
        value: 1
        ---
        kind: Sql.Transaction
        metadata: {{ name: tx }}
        connection: !ref db
        steps:
          - name: flaky
            invoke: !ref work
            retry: {retry}
        ---
        kind: Run.Sequence
        metadata: {{ name: free }}
        steps:
          - name: elsewhere
            invoke: !ref work
            retry: {{ attempts: 20 }}
        """)
    found = zone_findings(path)
    if not parks:
        assert found == []
        return
    [finding] = found
    assert (finding.code, where(finding)) == (ZONE_ATTRIBUTE_VIOLATED, at(text, retry))
    assert NO_SUSPEND_REASON in finding.message and "flaky" in finding.message


def test_reference_cycles_end_and_nothing_is_reported_twice(tmp_path: Path) -> None:
    path, text = write(tmp_path, """\
        ---
        kind: Durable.Sleep
        metadata: { name: nap }
        for: 1s
        ---
        kind: Run.Sequence
        metadata: { name: ping }
        steps:
          - { name: nap, invoke: !ref nap }
          - { name: pong, invoke: !ref pong }
        ---
        kind: Run.Sequence
        metadata: { name: pong }
        steps:
          - { name: ping, when: !cel "inputs.again", invoke: !ref ping }  # guarded: an unguarded cycle never loads
        ---
        kind: Sql.Transaction
        metadata: { name: tx }
        connection: !ref db
        steps:
          - { name: go, invoke: !ref ping }
        ---
        kind: Local.Workflow
        metadata: { name: wf }
        journal: !ref runs
        steps:
          - { name: t, invoke: !ref tx }
          - { name: again, invoke: !ref tx }
        """)
    [finding] = zone_findings(path)
    assert (finding.code, where(finding)) == (ZONE_ATTRIBUTE_VIOLATED, at(text, "!ref nap"))


def test_the_example_and_a_clean_durable_manifest_have_no_findings(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    assert [d for d in check(root / "examples" / "orders" / "orders.yaml") if d.code in ZONE_CODES] == []
    path, _ = write(tmp_path, """\
        ---
        kind: Sql.Exec
        metadata: { name: insert }
        connection: !ref db
        sql: INSERT INTO t (at) VALUES (:at)
        ---
        kind: Durable.Value
        metadata: { name: now }
        value: !cel "nowMillis()"
        ---
        kind: Sql.Transaction
        metadata: { name: tx }
        connection: !ref db
        steps:
          - { name: i, invoke: !ref insert, inputs: { at: !cel "inputs.at" }, retry: { attempts: 3 } }
        ---
        kind: Local.Workflow
        metadata: { name: wf }
        journal: !ref runs
        steps:
          - { name: now, invoke: !ref now }
          - { name: save, invoke: !ref tx, inputs: { at: !cel "steps.now.result" } }
          - { name: nap, invoke: { kind: Durable.Sleep, for: 1s } }
        """)
    assert zone_findings(path) == []


def test_a_manifest_that_does_not_load_reports_its_load_errors_only(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """\
        ---
        kind: Durable.Idempotent
        metadata: { name: bulk }
        reason: no-op
        steps:
          - { name: s, invoke: !ref missing }
          - { name: t, value: !cel "nowMillis()" }
        """)
    codes = {d.code for d in check(path)}
    assert "ERR_MANIFEST_UNKNOWN_RESOURCE" in codes and not codes & set(ZONE_CODES)


# --- ERR_DURABLE_NO_RUN (a warning) --------------------------------------------------------------------------


def test_a_kind_that_needs_a_run_reached_from_a_target_outside_one_is_a_warning(tmp_path: Path) -> None:
    """`telo check` passed a Durable.StreamWrite (or Receive, Sleep…) that a boot target reaches outside every
    durable run, which fails at run time (from a user's walk-through); the same kinds in a workflow target's
    body are fine."""
    path, text = write(tmp_path, """\
        ---
        kind: Durable.StreamWrite
        metadata: { name: emit }
        stream: rows
        value: 1
        ---
        kind: Run.Sequence
        metadata: { name: bare }
        steps:
          - { name: e, invoke: !ref emit }
        ---
        kind: Local.Workflow
        metadata: { name: wf }
        journal: !ref runs
        runId: !cel "'w:' + string(inputs.n)"
        steps:
          - { name: e, invoke: !ref emit }
        """)
    text = text.replace("targets: []", "targets: [!ref bare, { invoke: !ref wf, inputs: { n: 1 } }]")
    path.write_text(text)
    everything = check(path)
    found = [d for d in everything if d.code == "ERR_DURABLE_NO_RUN"]
    assert not [d for d in everything if d.severity == "error"], everything
    assert [(d.severity, where(d)) for d in found] == [("warning", at(text, "!ref emit }"))], found
    assert "target 'bare'" in found[0].message and "step 'e'" in found[0].message
