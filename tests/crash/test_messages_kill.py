"""Messages into a run (issue 18) across SIGKILLs: every message sent — before, during and after a ``kill -9`` of
the workers — is received exactly once, in journal order; a send repeated with one key delivers once; racing
senders agree on one winner per key.

For each journal (SQLite file, PostgreSQL table prefix) the test admits :data:`RUNS` runs of a workflow whose
loop, turn after turn, receives two messages of topic ``t`` (two ``Durable.Receive`` steps in a row: the second
must not take the message the first recorded, even while that record is still deferred) and applies them with
a plain ``Python.Function`` effect (:func:`effect`: neither ``idempotent`` nor ``keyConsuming``), which appends
one fsynced line per message, ``<run> <index> <message key> <seq> <n> <by> <idempotency key>#<0|1> <pid> <ns>``,
to a ledger before it returns. Its ``lookup`` (:func:`lookup`) reads that ledger, so an effect a kill
interrupted after its lines is confirmed from the outside world, never run twice. Two ``telo worker``
processes execute the runs while:

- :data:`SENDERS` sender threads (each with its own store) send :data:`MESSAGES` distinct keys to each run
  through :func:`telo.durable.messages.send` — what ``app.send`` / ``telo send`` call — in lockstep rounds (a
  barrier), so they race: each round every sender sends its own message of the round; some also race another
  sender's message with the same key and a payload of their own (first writer wins: one send stores, the other
  answers ``duplicate``), and some retry their own message (it must answer ``duplicate``, with the same seq).
  The first rounds go out before any worker runs;
- the test SIGKILLs a worker every few hundred ms while the messages are being sent — one holding a run's
  claim, or the one that just wrote a ledger line (mostly before the effect's receipt: its ``lookup`` then
  answers), or a random one; sometimes both, so messages arrive while no worker lives — and starts
  replacements. The workers then finish the runs undisturbed.

Then: every run completed; the ledger holds exactly one line per effect and message (no effect re-executed)
— each of a run's :data:`MESSAGES` keys exactly once, with the payload of the one send that stored it, at the
place its rank in seq order says (oldest first); the journal's receive decisions name, receive by receive, the
messages the ledger applied; the run's inbox holds exactly the stored messages, at the seqs their sends
returned; every send of one key returned one seq, exactly one send stored it, a retry answered ``duplicate``,
and each sender's stored messages have growing seqs; no worker the test did not kill exited; and at least
:data:`MIN_BUSY_KILLS` kills hit a worker at work (so the test is not vacuous).

A racing send of the SAME payload under one key is :func:`test_racing_identical_sends_with_one_key_report_one_store`.
The schedule is random: its seed is in every failure message, and ``TELO_CRASH_SEED=<n>`` replays it.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from telo.durable.effects import NOT_FOUND
from telo.durable.messages import INBOX, RECEIVED, RECEIVED_DECISION, logical_entries, send
from telo.errors import Code, TeloError
from telo.journal.claims import Holder
from telo.journal.model import Admission, RunFilter
from telo.journal.store import Store
from tests.crash.support import make_spec
from tests.crash.workflows.harness import Flow, LedgerLine, Proc

RUNS = 3
MESSAGES = 30  # per run: the distinct keys sent to it, and its receives (two a turn: even)
SENDERS = 3  # each round every sender sends one own message per run: MESSAGES // SENDERS rounds
ROUNDS = MESSAGES // SENDERS
WORKERS = 2
TOPIC = "t"
RACE_P = 0.3  # a sender also sends the next sender's message of the round, with a payload of its own
RETRY_P = 0.25  # a sender sends its own message again, same key and payload: a duplicate
ROUND_PAUSE_S = (0.05, 0.45)  # between rounds: sometimes slower than the runs (they park), sometimes faster
KILL_AFTER_S = (0.15, 0.6)  # a kill this long after the last one's replacements started
KILL_BOTH_P = 0.3  # also kill the other worker: messages then arrive while no worker lives
RESTART_GAP_S = (0.0, 0.3)
MIN_BUSY_KILLS = 4  # kills of a worker at work while the messages were being sent, at least
AIM_S = 1.5  # how long a kill waits for a worker at work before it kills a random one
SEND_DEADLINE_S = 30.0
FINISH_DEADLINE_S = 45.0  # after the last send (and kill): the runs all complete by then
EFFECT_S = 0.004  # after its ledger line the effect takes this long: a window for a kill before its receipt
WORKFLOW = "flow"
LEDGER_ENV = "CRASH_LEDGER"
HERE = "tests.crash.test_messages_kill"

_JOURNALS = {
    "sqlite": ("durable-journal-sqlite", "path: !cel \"variables.journal\"\n", ""),
    "postgres": ("durable-journal-postgres", "url: !cel \"variables.journal\"\ntable: !cel \"variables.table\"\n",
                 "  table: { env: CRASH_TABLE, type: string }\n"),
}

MANIFEST = """\
# Written by tests/crash/test_messages_kill.py: a run receives MESSAGES messages of topic t, one effect each.
kind: Telo.Application
metadata: { name: MessagesKill, version: 1.0.0 }
imports:
  Py: python
  Durable: durable
  Local: durable-local
  Journal: %(module)s
variables:
  journal: { env: CRASH_JOURNAL, type: string }
%(variables)s---
kind: Journal.Journal
metadata: { name: runs }
%(journal)s---
kind: Durable.Receive
metadata: { name: next }
topic: %(topic)s
---
kind: Py.Function
metadata: { name: apply }
function: %(here)s:effect
lookup: %(here)s:lookup
---
kind: Local.Workflow
metadata: { name: %(workflow)s }
journal: !ref runs
runId: !cel "inputs.id"
inputs: { id: !cel "inputs.id", n: !cel "inputs.n" }
steps:
  - { name: count, value: 0 }
  - name: loop
    while: !cel "steps.count.result * 2 < inputs.n"
    do:
      - { name: a, invoke: !ref next, inputs: {} }
      - { name: b, invoke: !ref next, inputs: {} }
      - name: apply
        invoke: !ref apply
        inputs:
          run: !cel "inputs.id"
          turn: !cel "steps.count.result"
          got: [!cel "steps.a.result", !cel "steps.b.result"]
      - { name: count, value: !cel "steps.count.result + 1" }
"""


# --- the effect and its lookup (imported by the workers from this module) ---------------------------------------


def effect(inputs: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Apply the turn's two received messages: a fsynced ``O_APPEND`` ledger line each (one write), written
    before the call returns."""
    key = ctx.idempotency_key
    if not key:
        raise RuntimeError(f"effect {inputs!r} ran without an idempotency key (outside a durable run?)")
    pid, ns, text = os.getpid(), time.monotonic_ns(), ""
    for j, got in enumerate(inputs["got"]):
        fields = [inputs["run"], 2 * inputs["turn"] + j, got["key"], got["seq"], got["payload"]["n"],
                  got["payload"]["by"], f"{key}#{j}", pid, ns]
        text += " ".join(str(f) for f in fields) + "\n"
    fd = os.open(os.environ[LEDGER_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, text.encode())  # one small O_APPEND write: lines of concurrent effects never interleave
        os.fsync(fd)
    finally:
        os.close(fd)
    time.sleep(EFFECT_S)
    return {"keys": [got["key"] for got in inputs["got"]]}


def lookup(key: str) -> Any:
    """Did the effect with this idempotency key happen? The ledger says (its result), or NOT_FOUND. Each answer
    is noted in ``<ledger>.lookups`` (``found``/``missing <key>``), for the test's report."""
    found: Any = NOT_FOUND
    with open(os.environ[LEDGER_ENV], encoding="utf-8") as f:
        for raw in f:
            parts = raw.split()
            if len(parts) == 9 and parts[6] == f"{key}#0":
                found = {"keys": [parts[2], next(f).split()[2]]}  # (its two lines are one write)
                break
    with open(os.environ[LEDGER_ENV] + ".lookups", "a", encoding="utf-8") as notes:
        notes.write(f"{'missing' if found is NOT_FOUND else 'found'} {key}\n")
    return found


# --- the test side ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Line:
    run: str
    index: int  # the message's place in the run: 2 * turn + (0: step a, 1: step b)
    key: str
    seq: int
    n: int
    by: int
    step: str  # the effect's idempotency key, #0 or #1
    pid: int
    ns: int


@dataclass(frozen=True, slots=True)
class SendRecord:
    sender: int
    run: str
    key: str
    payload: dict[str, int]
    how: str  # own | race | retry
    seq: int | None  # None: refused (the run had settled)
    duplicate: bool | None
    ns: int


def message_key(n: int) -> str:
    return f"m{n:02d}"


def read_ledger(path: Path) -> list[Line]:
    out = []
    for raw in path.read_text().splitlines():
        run, index, key, seq, n, by, step, pid, ns = raw.split(" ")
        out.append(Line(run, int(index), key, int(seq), int(n), int(by), step, int(pid), int(ns)))
    return out


@dataclass
class Senders:
    """SENDERS threads sending in lockstep rounds (a barrier), each through a store of its own."""

    stores: list[Store]
    runs: list[str]
    seed: int
    records: list[SendRecord] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        pause_rng = random.Random(self.seed ^ 0x5EED)
        self.barrier = threading.Barrier(SENDERS, action=lambda: time.sleep(pause_rng.uniform(*ROUND_PAUSE_S)))
        self.threads = [threading.Thread(target=self._sender, args=(s,), daemon=True) for s in range(SENDERS)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self, timeout: float) -> None:
        for t in self.threads:
            t.join(timeout)

    def _send(self, s: int, run: str, n: int, how: str) -> None:
        key, payload = message_key(n), {"n": n, "by": s}
        try:
            sent = send(self.stores[s], run, TOPIC, payload, key=key)
            seq, duplicate = sent.seq, sent.duplicate
            assert sent.run == run and sent.key == key and sent.topic == TOPIC, sent
        except TeloError as exc:
            if exc.code != Code.DURABLE_RUN_SETTLED:
                raise
            seq, duplicate = None, None  # judged later: another send of this key must have stored it
        with self.lock:
            self.records.append(SendRecord(s, run, key, payload, how, seq, duplicate, time.monotonic_ns()))

    def _sender(self, s: int) -> None:
        rng = random.Random(self.seed * 31 + s)
        try:
            for r in range(ROUNDS):
                for run in self.runs:
                    self.barrier.wait(60)
                    own, other = SENDERS * r + s, SENDERS * r + (s + 1) % SENDERS
                    plan = [(own, "own")]
                    if rng.random() < RACE_P:
                        plan.insert(rng.randrange(2), (other, "race"))
                    if rng.random() < RETRY_P:
                        plan.append((own, "retry"))
                    for n, how in plan:
                        self._send(s, run, n, how)
        except BaseException as exc:  # reported by the test thread
            self.errors.append(exc)
            self.barrier.abort()

    def finished(self) -> bool:
        return not any(t.is_alive() for t in self.threads)


@dataclass
class Killer:
    flow: Flow
    store: Store
    rng: random.Random
    ctx: str
    workers: list[Proc] = field(default_factory=list)
    kills: int = 0
    busy_kills: int = 0  # kills of a worker at work: holding a run's claim, or just done with an effect
    modes: Counter[str] = field(default_factory=Counter)

    def start_worker(self) -> None:
        self.workers.append(self.flow.start(*self.flow.worker_args("50ms", until_idle=False),
                                            label=f"worker-{len(self.workers) + 1}"))

    def live(self) -> list[Proc]:
        for proc in self.workers:
            if proc.killed_ns is None:
                code = proc.poll()
                assert code is None, f"{self.ctx}: {proc.label} (pid {proc.pid}) exited {code}:\n{proc.output()}"
        return [p for p in self.workers if p.killed_ns is None]

    def holders(self) -> set[int]:
        running = self.store.list_runs(RunFilter(status="running", limit=RUNS + 1)).runs
        parsed = [Holder.parse(r.claim.holder) for r in running if r.claim is not None]
        return {h.pid for h in parsed if h is not None}

    def _victim(self, mode: str) -> Proc | None:
        """A worker at work, found within :data:`AIM_S`: one holding a run's claim (killed a random few ms
        later), or the one that just wrote a ledger line (killed at once: mostly before the effect's receipt)."""
        until = time.monotonic() + AIM_S
        size = self.flow.ledger.stat().st_size
        while time.monotonic() < until:
            live = {p.pid: p for p in self.live()}
            if mode == "claim":
                busy = [live[pid] for pid in self.holders() if pid in live]
                if busy:
                    time.sleep(self.rng.uniform(0, 0.015))
                    return self.rng.choice(busy)
            elif self.flow.ledger.stat().st_size > size:
                last = self.flow.ledger.read_text().splitlines()[-1].split(" ")
                if len(last) == 9 and int(last[7]) in live:
                    return live[int(last[7])]
                size = self.flow.ledger.stat().st_size
            time.sleep(0.002)
        return None

    def kill_some(self) -> None:
        mode = self.rng.choices(["claim", "ledger", "blind"], weights=[2, 2, 1])[0]
        victim = None if mode == "blind" else self._victim(mode)
        self.busy_kills += victim is not None
        self.modes[mode if victim is not None or mode == "blind" else f"{mode}-missed"] += 1
        victims = [victim if victim is not None else self.rng.choice(self.live())]
        if self.rng.random() < KILL_BOTH_P:
            victims += [p for p in self.live() if p is not victims[0]]
        for proc in victims:
            assert self.flow.kill(proc), f"{self.ctx}: {proc.label} was not running"
            self.kills += 1
        time.sleep(self.rng.uniform(*RESTART_GAP_S))
        for _ in victims:
            self.start_worker()


def _manifest(kind: str, tmp_path: Path) -> Path:
    module, journal, variables = _JOURNALS[kind]
    path = tmp_path / "messages.yaml"
    path.write_text(MANIFEST % {"module": module, "journal": journal, "variables": variables, "topic": TOPIC,
                                "here": HERE, "workflow": WORKFLOW})
    return path


def _check_sends(runs: list[str], senders: Senders, ctx: str) -> dict[tuple[str, str], SendRecord]:
    """One seq per key, exactly one send stored it, a retry answered duplicate; per sender, seqs grow. Returns
    the storing send of each (run, key)."""
    by_key: dict[tuple[str, str], list[SendRecord]] = defaultdict(list)
    for rec in senders.records:
        by_key[(rec.run, rec.key)].append(rec)
    for run in runs:
        assert {k for (r, k) in by_key if r == run} == {message_key(n) for n in range(MESSAGES)}, ctx
    winners: dict[tuple[str, str], SendRecord] = {}
    for (run, key), recs in by_key.items():
        accepted = [r for r in recs if r.seq is not None]
        assert accepted, (f"{ctx}: every send of {run}/{key} was refused: the run had settled before it received "
                          f"all {MESSAGES} messages (it received some twice?): {recs}")
        assert len({r.seq for r in accepted}) == 1, f"{ctx}: sends of {run}/{key} returned different seqs: {recs}"
        firsts = [r for r in accepted if r.duplicate is False]
        assert len(firsts) == 1, f"{ctx}: {len(firsts)} sends of {run}/{key} say they stored it (one must): {recs}"
        winners[(run, key)] = firsts[0]
        for r in accepted:
            if r.how == "retry":  # its sender's first send of the key returned before it: it stores nothing
                assert r.duplicate is True, f"{ctx}: a retry of {run}/{key} was not a duplicate: {recs}"
    for s in range(SENDERS):
        for run in runs:
            mine = sorted((r for r in winners.values() if r.sender == s and r.run == run), key=lambda r: r.ns)
            seqs = [r.seq or 0 for r in mine]
            assert seqs == sorted(set(seqs)), f"{ctx}: sender {s} {run}: its messages' seqs {seqs} (in send order)"
    return winners


def _check_ledger(flow: Flow, runs: list[str], winners: dict[tuple[str, str], SendRecord],
                  ctx: str) -> dict[str, list[Line]]:
    """One line per effect and per message; oldest first (seq order); the storing send's payload. Returns each
    run's lines by turn."""
    lines = read_ledger(flow.ledger)
    steps = Counter(line.step for line in lines)
    repeated = {step: n for step, n in steps.items() if n > 1}
    if repeated:
        detail = []
        for line in lines:
            if line.step in repeated:
                proc = flow.executor(LedgerLine(line.step, "apply", line.pid, line.ns))
                detail.append(f"{line} by {proc.label if proc else '?'} killed={proc.killed if proc else '?'}")
        raise AssertionError(f"{ctx}: effects executed more than once (their lookup finds them in the ledger, so "
                             f"a re-run is a bug): {repeated}\n" + "\n".join(detail))
    out: dict[str, list[Line]] = {}
    everything = {message_key(n) for n in range(MESSAGES)}
    for run in runs:
        mine = sorted((line for line in lines if line.run == run), key=lambda line: line.index)
        indexes = [line.index for line in mine]
        assert indexes == list(range(MESSAGES)), f"{ctx}: {run}: the ledger has messages {indexes}"
        keys = Counter(line.key for line in mine)
        assert set(keys) == everything and max(keys.values()) == 1, (
            f"{ctx}: {run}: messages applied other than once each: twice or more "
            f"{sorted(k for k, c in keys.items() if c > 1)}, never {sorted(everything - set(keys))}")
        for line in mine:
            win = winners[(run, line.key)]
            assert (line.seq, line.n, line.by) == (win.seq, win.payload["n"], win.payload["by"]), (
                f"{ctx}: {run} message {line.index} applied {line.key} seq {line.seq} n={line.n} by={line.by}, "
                f"but the send that stored it was {win}")
            assert line.step == f"{run}/steps/loop/do[{line.index // 2}]/apply#{line.index % 2}", f"{ctx}: {line}"
        received = [line.seq for line in mine]
        stored = sorted(win.seq or 0 for (r, _), win in winners.items() if r == run)
        assert received == stored, (
            f"{ctx}: {run}: messages not received oldest first:\n received {received}\n stored   {stored}")
        out[run] = mine
    return out


RECEIVED_AT = re.compile(r"steps/loop/do\[(\d+)\]/(a|b)/" + re.escape(RECEIVED))


def _check_journal(store: Store, runs: list[str], winners: dict[tuple[str, str], SendRecord],
                   ledger: dict[str, list[Line]], ctx: str) -> None:
    """Every run completed; its inbox holds exactly the stored messages at their seqs; its receive decisions
    name, turn by turn, the messages the ledger says were applied."""
    for run in runs:
        record = store.read_run(run)
        assert record is not None and record.status == "completed", f"{ctx}: {run} is {record!r}"
        entries = logical_entries(store, run)
        inbox = {path.removeprefix(f"{INBOX}/{TOPIC}/"): entry.seq for path, entry in entries.items()
                 if path.startswith(f"{INBOX}/{TOPIC}/")}
        want = {key: win.seq for (r, key), win in winners.items() if r == run}
        assert inbox == want, f"{ctx}: {run}: the inbox holds {inbox}, the sends stored {want}"
        got: dict[int, tuple[int, str]] = {}
        for path, entry in entries.items():
            m = RECEIVED_AT.fullmatch(path)
            if m is not None:
                assert entry.kind == "decision" and entry.decision == RECEIVED_DECISION, f"{ctx}: {entry!r}"
                value = entry.decode(run)
                assert value.get("timedOut") is False, f"{ctx}: {run} {path}: {value!r}"
                got[2 * int(m.group(1)) + (m.group(2) == "b")] = (value["seq"], value["key"])
        applied = {line.index: (line.seq, line.key) for line in ledger[run]}
        assert got == applied, f"{ctx}: {run}: the journal's receives {got} != the ledger's {applied}"


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_messages_are_received_exactly_once_in_order_across_kill_9(kind: str, tmp_path: Path) -> None:
    seed = int(os.environ.get("TELO_CRASH_SEED") or random.randrange(2**32))
    ctx = f"[{kind} seed={seed}]"
    spec = make_spec(kind, tmp_path)
    flow = Flow(spec, tmp_path)
    flow.manifest = _manifest(kind, tmp_path)
    flow.env[LEDGER_ENV] = str(flow.ledger)
    store = spec.open()
    runs = [f"inbox-{i}" for i in range(RUNS)]
    senders = Senders([spec.open() for _ in range(SENDERS)], runs, seed)
    killer = Killer(flow, store, random.Random(seed), ctx)
    began = time.monotonic()
    try:
        for run in runs:
            assert store.admit(Admission.of(run, workflow=WORKFLOW, inputs={"id": run, "n": MESSAGES})).admitted
        senders.start()  # the first rounds go out before any worker runs
        time.sleep(0.1)
        for _ in range(WORKERS):
            killer.start_worker()
        next_kill = time.monotonic() + killer.rng.uniform(*KILL_AFTER_S)
        while not senders.finished():  # kills go on while the messages are being sent
            assert not senders.errors, f"{ctx}: a sender failed: {senders.errors[0]!r}"
            assert time.monotonic() - began < SEND_DEADLINE_S, f"{ctx}: still sending after {SEND_DEADLINE_S} s"
            killer.live()
            if time.monotonic() >= next_kill:
                killer.kill_some()
                next_kill = time.monotonic() + killer.rng.uniform(*KILL_AFTER_S)
            time.sleep(0.01)
        assert not senders.errors, f"{ctx}: a sender failed: {senders.errors[0]!r}"
        kill_phase = time.monotonic() - began
        deadline = time.monotonic() + FINISH_DEADLINE_S
        while True:
            killer.live()
            done = len(store.list_runs(RunFilter(status="completed", limit=RUNS + 1)).runs)
            if done == RUNS:
                break
            if time.monotonic() >= deadline:
                states = {r: (rec.status, rec.parked) for r in runs if (rec := store.read_run(r)) is not None}
                raise AssertionError(f"{ctx}: {done}/{RUNS} runs completed {FINISH_DEADLINE_S} s after the last "
                                     f"kill (a lost wake-up, or a message never received?): {states}")
            time.sleep(0.05)
        assert len(killer.live()) == WORKERS, ctx
        winners = _check_sends(runs, senders, ctx)
        _check_journal(store, runs, winners, _check_ledger(flow, runs, winners, ctx), ctx)
        # Not vacuous: enough kills landed on a worker at work (the schedule is random; a run of bad luck
        # would show here, with its seed).
        assert killer.busy_kills >= MIN_BUSY_KILLS, (
            f"{ctx}: only {killer.busy_kills} of {killer.kills} kills hit a worker at work (want {MIN_BUSY_KILLS})")
        sends = Counter((r.how, r.duplicate) for r in senders.records)
        notes = Path(f"{flow.ledger}.lookups")
        lookups = Counter(line.split()[0] for line in notes.read_text().splitlines()) if notes.exists() else {}
        print(f"\n{ctx}: {RUNS} runs x {MESSAGES} messages, {len(senders.records)} sends {dict(sends)}; "
              f"{killer.kills} kills ({killer.busy_kills} of a worker at work; {dict(killer.modes)}) "
              f"in {kill_phase:.1f} s; unconfirmed effects looked up: {dict(lookups)}; "
              f"all received exactly once, in order, after {time.monotonic() - began:.1f} s")
    finally:
        flow.close()  # SIGKILLs the workers still running
        senders.barrier.abort()
        senders.join(10)
        for s in senders.stores:
            s.close()
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_racing_identical_sends_with_one_key_report_one_store(kind: str, tmp_path: Path) -> None:
    """Three senders send one key with ONE payload at once (a client's retry racing its first try): one message
    is stored, and exactly one send may say it stored it; the others must answer ``duplicate``."""
    spec = make_spec(kind, tmp_path)
    stores = [spec.open() for _ in range(SENDERS)]
    try:
        assert stores[0].admit(Admission.of("race", workflow=WORKFLOW, inputs={})).admitted
        for n in range(20):
            barrier = threading.Barrier(SENDERS)
            out: list[Any] = [None] * SENDERS

            def go(s: int, n: int = n, barrier: threading.Barrier = barrier, out: list[Any] = out) -> None:
                barrier.wait(10)
                out[s] = send(stores[s], "race", TOPIC, {"n": n}, key=message_key(n))

            threads = [threading.Thread(target=go, args=(s,)) for s in range(SENDERS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert len({o.seq for o in out}) == 1, out
            assert sum(not o.duplicate for o in out) == 1, f"[{kind}] round {n}: {out}"
    finally:
        for s in stores:
            s.close()
