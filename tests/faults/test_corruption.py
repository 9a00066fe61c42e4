"""One damaged row or line affects only its run (issue 12, case 7).

Observed before: a corrupt ``target`` or ``collapse_reasons`` column of one SQLite run crashed ``telo worker``
within seconds of every start and made ``telo runs list``, ``status`` and the dashboard list fail; on PostgreSQL
the whole listing was refused and the run could not be cancelled; a run whose stored inputs were unreadable
made ``telo worker --until-idle`` never return.

Here a journal holds a healthy due run and a damaged one. The real CLI must: list both, the damaged one
marked ``ERR_DURABLE_JOURNAL_CORRUPT`` with what is damaged; ``telo worker --until-idle`` completes the healthy
run, reports the damaged one, and returns; ``status`` shows the damage without a traceback; and where the
damage is in the run's record or entries of a SQL journal, ``telo cancel`` settles it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from telo.journal.model import Admission, Entry
from tests.faults.support import Payments

Damage = Callable[[Payments, str], None]


def _sqlite(flow: Payments, sql: str, run: str) -> None:
    conn = sqlite3.connect(flow.spec.location)
    with conn:
        conn.execute(sql, (run,))
    conn.close()


def _postgres(flow: Payments, sql: str, run: str) -> None:
    import psycopg

    with psycopg.connect(flow.spec.location, autocommit=True) as conn:
        conn.execute(sql.replace("telo_durable", str(flow.spec.table)).replace("?", "%s"), (run,))


def _file_line(flow: Payments, run: str) -> None:
    from telo.journal.file_format import SUFFIX, file_stem

    with open(Path(flow.spec.location) / (file_stem(run) + SUFFIX), "ab") as f:
        f.write(b'{"type":"entry","entry":{"path":"steps/prepare","kind":"step"\n')  # not JSON: a damaged line


def _file_flip(flow: Payments, run: str) -> None:
    """A damaged byte that still parses: the prepare receipt's value says another run (the checksum catches it)."""
    from telo.journal.file_format import SUFFIX, file_stem

    path = Path(flow.spec.location) / (file_stem(run) + SUFFIX)
    data = path.read_bytes()
    assert data.count(b'\\"prepared\\":\\"pay:bad\\"') == 1, data
    path.write_bytes(data.replace(b'\\"prepared\\":\\"pay:bad\\"', b'\\"prepared\\":\\"pay:bax\\"'))


FLIP = "UPDATE telo_durable_entries SET value = replace(value, 'pay:bad', 'pay:bax') WHERE run = ?"

DAMAGES: dict[str, tuple[str, Damage, bool]] = {
    # name: (store kind, how the run is damaged, whether `telo cancel` can settle it)
    "sqlite-collapse-reasons": ("sqlite", lambda f, r: _sqlite(
        f, "UPDATE telo_durable_runs SET collapse_reasons = '[oops' WHERE run = ?", r), True),
    "sqlite-entry-target": ("sqlite", lambda f, r: _sqlite(
        f, "UPDATE telo_durable_entries SET target = '{not json' WHERE run = ?", r), True),
    "sqlite-inputs-codec": ("sqlite", lambda f, r: _sqlite(
        f, "UPDATE telo_durable_runs SET inputs_codec_version = 99 WHERE run = ?", r), True),
    "postgres-error": ("postgres", lambda f, r: _postgres(
        f, "UPDATE telo_durable_runs SET error = '{broken', status = 'running' WHERE run = ?", r), True),
    "postgres-entry-target": ("postgres", lambda f, r: _postgres(
        f, "UPDATE telo_durable_entries SET target = '[1, 2' WHERE run = ?", r), True),
    "file-line": ("file", _file_line, False),
    # a flipped byte that still parses: caught by the entry's checksum (telo.journal.integrity), not replayed
    "sqlite-flipped-value": ("sqlite", lambda f, r: _sqlite(f, FLIP, r), True),
    "postgres-flipped-value": ("postgres", lambda f, r: _postgres(f, FLIP, r), True),
    "file-flipped-value": ("file", _file_flip, False),
}


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_a_damaged_run_is_listed_reported_and_skipped_while_the_others_go_on(
        case: str, payments: Callable[..., Payments]) -> None:
    kind, damage, cancellable = DAMAGES[case]
    flow = payments(kind)
    with flow.open() as store:
        for run in ("pay:good", "pay:bad"):
            assert store.admit(Admission.of(run, workflow="pay", inputs={"id": run})).admitted
            store.append(run, Entry.step("steps/prepare", {"kind": "Python.Function", "name": "prepare"},
                                         {"prepared": run}))
    damage(flow, "pay:bad")
    ctx = f"[{case}]"
    journal = ["--manifest", str(flow.manifest)]

    listed = flow.cli("runs", "list", *journal, "--json")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, f"{ctx} {listed.stderr}"
    runs = {r["run"]: r for r in json.loads(listed.stdout)["runs"]}
    assert set(runs) == {"pay:good", "pay:bad"}, f"{ctx} {runs}"
    if case in ("sqlite-collapse-reasons", "postgres-error", "file-line"):  # (damage in the run's record)
        assert runs["pay:bad"]["corrupt"]["code"] == "ERR_DURABLE_JOURNAL_CORRUPT", f"{ctx} {runs['pay:bad']}"

    worker = flow.worker(label="worker")
    code = worker.wait(60)  # before: it crashed, or never returned
    assert code == 0, f"{ctx} the worker exited {code}:\n{worker.output()}"
    assert flow.record("pay:good").status == "completed", ctx
    out = worker.output()
    assert "pay:bad" in out and ("ERR_DURABLE_JOURNAL_CORRUPT" in out or "ERR_DURABLE_ENTRY_UNDECODABLE" in out), out
    if "flipped" in case:
        assert "does not match its checksum" in out, out
    assert "Traceback" not in out, f"{ctx} {out}"
    assert not [line for line in flow.lines() if line.key.startswith("pay:bad")], f"{ctx} the damaged run executed"

    status = flow.cli("status", "pay:bad", *journal, "--json")
    assert "Traceback" not in status.stderr, f"{ctx} {status.stderr}"
    if cancellable:
        cancelled = flow.cli("cancel", "pay:bad", *journal, "--json")
        assert cancelled.returncode == 0 and json.loads(cancelled.stdout)["cancelled"] is True, (
            f"{ctx} {cancelled.stdout}{cancelled.stderr}")
        assert flow.record("pay:bad").status == "cancelled"
    else:
        assert status.returncode == 3 and "ERR_DURABLE_JOURNAL_CORRUPT" in status.stderr, status.stderr
        assert ":2" in status.stderr or "line" in status.stderr, status.stderr  # where: the damaged line
