"""A hypothesis state machine: random operations applied to every store at once; they must all agree.

The memory store is the reference; SQLite, file and PostgreSQL (when available) must give the same answer to
every call and hold the same records and entries after every step.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import replace
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from telo.clock import FakeClock
from telo.journal.claims import Holder
from telo.journal.file import FileStore
from telo.journal.memory import MemoryStore
from telo.journal.model import Admission, Entry, Outcome, Parked, RunFilter
from telo.journal.sqlite import SqliteStore
from telo.journal.store import Store
from tests.pg_support import fresh_prefix

RUNS = st.sampled_from(["r1", "r2", "r3", "order:A-4"])
PATHS = st.sampled_from(["inputs", "steps/a", "steps/a/inputs", "steps/b/@when", "steps/w", "steps/x[1]/y"])
HOLDERS = st.sampled_from([Holder("a", "h1", 1, 1).to_text(), Holder("b", "h2", 2, 2).to_text()])
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=5),
                   st.lists(st.integers(0, 9), max_size=3))
TARGETS = st.sampled_from([None, {"kind": "Run.Value", "name": "v"},
                           {"kind": "Python.Function", "name": "f", "module": "file:///m.yaml"}])


def _pg_url() -> str | None:
    url = os.environ.get("TELO_TEST_PG_URL")
    if not url and os.environ.get("CI") == "true":
        raise RuntimeError("TELO_TEST_PG_URL is unset under CI=true")
    return url


class StoresAgree(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.dir = tempfile.mkdtemp(prefix="telo-agree-")
        self.stores: list[Store] = [
            MemoryStore(clock=self.clock),
            SqliteStore(os.path.join(self.dir, "j.db"), clock=self.clock),
            FileStore(os.path.join(self.dir, "files"), clock=self.clock),
        ]
        url = _pg_url()
        if url:
            from telo.journal.postgres import PostgresStore

            self.stores.append(PostgresStore(url, table=fresh_prefix(), clock=self.clock, pool_size=2))
        self.admitted: set[str] = set()

    def teardown(self) -> None:
        for s in self.stores:
            s.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _all(self, op: Any) -> Any:
        results = [_without_seq(op(s)) for s in self.stores]
        for s, r in zip(self.stores[1:], results[1:], strict=True):
            assert r == results[0], (s.kind, r, results[0])
        return results[0]

    @rule(run=RUNS, scheduled=st.booleans(), value=VALUES)
    def admit(self, run: str, scheduled: bool, value: Any) -> None:
        adm = Admission.of(run, status="scheduled" if scheduled else "running",
                           due_at=self.clock.now_ms() + 1000 if scheduled else None, inputs=value)
        self._all(lambda s: s.admit(adm))
        self.admitted.add(run)

    @precondition(lambda self: self.admitted)
    # (`target` is a reserved keyword of hypothesis rules, hence `tgt`)
    @rule(data=st.data(), path=PATHS, value=VALUES, tgt=TARGETS, decision=st.booleans())
    def append(self, data: st.DataObject, path: str, value: Any, tgt: Any, decision: bool) -> None:
        run = data.draw(st.sampled_from(sorted(self.admitted)))
        entry = Entry.decided(path, "value", value) if decision else Entry.step(path, tgt, value)
        self._all(lambda s: s.append(run, entry))

    @precondition(lambda self: self.admitted)
    @rule(data=st.data(), token=st.sampled_from(["t1", "t2", None]), due=st.booleans())
    def park(self, data: st.DataObject, token: str | None, due: bool) -> None:
        run = data.draw(st.sampled_from(sorted(self.admitted)))
        # Tokens are unique per run: several runs parked on one token may be answered by any of them.
        token = f"{run}/{token}" if token else None
        parked = Parked("steps/w", "approval", token, self.clock.now_ms() + 500 if due else None)
        self._all(lambda s: s.park(run, parked))

    @rule(run=RUNS)
    def unpark(self, run: str) -> None:
        self._all(lambda s: s.unpark(run))

    @precondition(lambda self: self.admitted)
    @rule(data=st.data(), ok=st.booleans(), value=VALUES)
    def complete(self, data: st.DataObject, ok: bool, value: Any) -> None:
        run = data.draw(st.sampled_from(sorted(self.admitted)))
        outcome = Outcome.completed(value, replayed_steps=2) if ok else Outcome.failed("ERR_X", "boom")
        self._all(lambda s: s.complete(run, outcome))

    @rule(run=RUNS, holder=HOLDERS, ttl=st.sampled_from([100, 60_000]))
    def claim(self, run: str, holder: str, ttl: int) -> None:
        now = self.clock.now_ms()
        self._all(lambda s: s.claim(run, holder, ttl, now))

    @rule(run=RUNS, holder=HOLDERS)
    def release(self, run: str, holder: str) -> None:
        self._all(lambda s: s.release(run, holder))

    @rule(ms=st.sampled_from([1, 200, 1_000, 70_000]))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms=ms)

    @rule(run=RUNS, token=st.sampled_from(["t1", "t2"]))
    def parked_on(self, run: str, token: str) -> None:
        self._all(lambda s: s.run_parked_on(f"{run}/{token}"))

    @invariant()
    def same_state(self) -> None:
        now = self.clock.now_ms()
        self._all(lambda s: s.due_runs(now, 10))
        self._all(lambda s: s.list_runs(RunFilter(limit=10)).runs)
        for run in self.admitted:
            self._all(lambda s, run=run: (s.read_run(run), s.read_entries(run)))


def _without_seq(value: Any) -> Any:
    """Seq values are store-assigned (PostgreSQL's is one BIGSERIAL for all runs): compare their ORDER, which
    list order already carries, not the numbers."""
    if isinstance(value, Entry):
        return replace(value, seq=None)
    if isinstance(value, list | tuple):
        return type(value)(_without_seq(v) for v in value)
    return value


TestStoresAgree = StoresAgree.TestCase
TestStoresAgree.settings = settings(
    max_examples=20, stateful_step_count=20, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
