"""What the end-to-end crash tests share: real ``telo`` processes over the crash workflow, and the ledger checks.

A :class:`Flow` is one store (SQLite file, file-journal directory, or PostgreSQL table prefix) plus the
manifest for it (``<kind>.yaml`` in this directory) and a ledger file. Every ``telo`` process it starts gets
the locations through the environment (``CRASH_JOURNAL``, ``CRASH_TABLE``, ``CRASH_LEDGER``) and is recorded
as a :class:`Proc` — pid, start time, and whether and when the test killed it — so a ledger line can be
attributed to the process INSTANCE that wrote it (pids are reused over a long run).

The ledger properties (:func:`check_ledger`), for a set of runs that all completed:

- every run's journal is readable (recovery folds it) and records exactly :data:`EFFECTS_PER_RUN` effect
  receipts (Python.Function step entries);
- the ledger holds a line for each of those receipts' idempotency keys and for no other key;
- a key appears more than once only if each earlier line was written by a process the test killed, and the
  next line was written after that kill was sent — so a step never ran twice while its first executor was
  alive (an interrupted step is re-driven with the same key, never a completed one);
- no killed process left more effects to re-drive than it could have had in flight: at most the fan-out's
  concurrency per run, and runs of at most ``max_runs`` (a worker continues up to ``DEFAULT_CONCURRENCY`` runs of
  one sweep at once; a ``telo run`` process, one).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from telo.durable.handle import DEFERRED_STEPS
from telo.durable.slots import DEFAULT_CONCURRENCY
from telo.journal import eventlog
from telo.journal.claims import holder_is_dead
from telo.journal.model import RunFilter, RunRecord
from telo.journal.store import Store
from tests.crash.support import REPO_ROOT, StoreSpec

WORKFLOWS = Path(__file__).resolve().parent
TELO = [sys.executable, "-m", "telo"]
WORKFLOW = "flow"
# first, one branch, three loop turns, five fan-out legs, last
EFFECT_STEPS = ("first", "branch", "tick-0", "tick-1", "tick-2", "leg-a", "leg-b", "leg-c", "leg-d", "leg-e",
                "last")
EFFECTS_PER_RUN = len(EFFECT_STEPS)
FAN_CONCURRENCY = 3  # the fan-out's concurrency: at most this many effects of one run are in flight at once
APPROVE_PREFIX = "approve:"


def payload_for(run: str) -> dict[str, str]:
    return {"by": f"approver-of-{run}"}


class ForkServer:
    """The client of forkserver.py: ``telo`` children forked from one process that has imported telo."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.popen = subprocess.Popen([sys.executable, "-m", "tests.crash.workflows.forkserver"], cwd=REPO_ROOT,
                                      env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def call(self, **req: Any) -> dict[str, Any]:
        assert self.popen.stdin is not None and self.popen.stdout is not None
        self.popen.stdin.write((json.dumps(req) + "\n").encode())
        self.popen.stdin.flush()
        line = self.popen.stdout.readline()
        assert line, f"the fork server died (exit {self.popen.poll()})"
        reply: dict[str, Any] = json.loads(line)
        assert "error" not in reply, reply
        return reply

    def close(self) -> None:
        if self.popen.stdin is not None:
            self.popen.stdin.close()
        self.popen.wait(30)
        if self.popen.stdout is not None:
            self.popen.stdout.close()


@dataclass
class Proc:
    """One ``telo`` process the test started: a subprocess, or a child of a :class:`ForkServer`."""

    label: str
    pid: int
    start_ns: int
    out_path: Path
    popen: subprocess.Popen[bytes] | None = None
    server: ForkServer | None = None
    returncode: int | None = None
    killed_ns: int | None = None  # monotonic time the test SENT SIGKILL (the process is dead only later)
    end_ns: int | None = None  # monotonic time the test saw it gone (reaped)
    first_effect_ns: int | None = None  # its first ledger line (filled in by tests that want it)
    paused_ns: int | None = None  # monotonic time the test first SIGSTOPped it (past its lease, then SIGCONT)
    resumed_ns: int | None = None  # monotonic time the test sent SIGCONT after that pause
    terminated_ns: int | None = None  # monotonic time the test sent it SIGTERM (it drains, then exits)

    def poll(self) -> int | None:
        if self.returncode is None:
            if self.popen is not None:
                self.returncode = self.popen.poll()
            else:
                assert self.server is not None
                self.returncode = self.server.call(op="poll", pid=self.pid)["code"]
            if self.returncode is not None:
                self.end_ns = time.monotonic_ns()
        return self.returncode

    def sigkill(self) -> bool:
        """SIGKILL it if it still runs (True), and reap it."""
        if self.poll() is not None:
            return False
        self.killed_ns = time.monotonic_ns()  # before the signal: the process is dead only later
        if self.popen is not None:
            os.kill(self.pid, signal.SIGKILL)  # not reaped yet (poll() said so): the pid is still this child's
            self.returncode = self.popen.wait()
            killed = True
        else:
            assert self.server is not None
            reply = self.server.call(op="kill", pid=self.pid)
            self.returncode, killed = reply["code"], reply["killed"]
            if not killed:
                self.killed_ns = None  # it exited on its own just before
        self.end_ns = time.monotonic_ns()
        return killed

    def signal(self, sig: int) -> bool:
        """Send ``sig`` if it still runs (True); SIGSTOP and SIGTERM are recorded (see ``paused_ns``)."""
        if self.poll() is not None:
            return False
        now = time.monotonic_ns()
        if sig == signal.SIGSTOP and self.paused_ns is None:
            self.paused_ns = now
        elif sig == signal.SIGCONT and self.paused_ns is not None and self.resumed_ns is None:
            self.resumed_ns = now
        elif sig == signal.SIGTERM and self.terminated_ns is None:
            self.terminated_ns = now
        if self.popen is not None:
            os.kill(self.pid, sig)
        else:
            assert self.server is not None
            self.server.call(op="signal", pid=self.pid, sig=int(sig))
        return True

    @property
    def killed(self) -> bool:
        """Killed by the test or a fault point (a process that SIGKILLed itself), or by a SIGTERM that came before
        it could drain (during start-up: the default action)."""
        return self.killed_ns is not None or self.returncode in (-signal.SIGKILL, -signal.SIGTERM)

    def lost_its_claim(self, run: str) -> bool:
        """Killed, paused past its lease, or told by the journal that ``run`` was taken over from it (its lease
        lapsed while it was slow — a loaded machine — and its next write was refused): another process may
        rightly re-drive what it was executing of ``run``, with its key."""
        return self.killed or self.paused_ns is not None or self.fenced_out_of(run)

    def fenced_out_of(self, run: str) -> bool:
        """Did it report a write of ``run`` refused by fencing (``ERR_DURABLE_CLAIM_LOST``, its log line naming
        the run)? Read once it ended."""
        if self.returncode is None:
            return False
        named = f"durable.run={run!r}"
        return any(named in line and "ERR_DURABLE_CLAIM_LOST" in line
                   for line in self.out_path.read_text("utf-8", "replace").splitlines())

    def killed_or_paused_before(self, ns: int) -> bool:
        """Had it been killed, or paused past its lease, by ``ns``?"""
        return any(t is not None and t < ns for t in (self.killed_ns, self.paused_ns))

    def death_ns(self) -> int:
        """A time by which the process had certainly been told to die, or been paused past its lease."""
        if self.killed_ns is not None or self.paused_ns is not None:  # whichever came first (paused, then killed)
            return min(t for t in (self.killed_ns, self.paused_ns) if t is not None)
        if self.terminated_ns is not None and self.returncode == -signal.SIGTERM:
            return self.terminated_ns
        assert self.end_ns is not None, f"{self.label} (pid {self.pid}) is still running"
        return self.end_ns

    def output(self) -> str:
        try:
            return self.out_path.read_text("utf-8", "replace")[-4000:]
        except OSError:
            return ""


@dataclass(frozen=True, slots=True)
class LedgerLine:
    key: str
    step: str
    pid: int
    ns: int

    @property
    def run(self) -> str:
        return self.key.split("/", 1)[0]


@dataclass
class Flow:
    spec: StoreSpec
    tmp: Path
    procs: list[Proc] = field(default_factory=list)
    # The workflow's `durability:`; None keeps the manifest's (the default, deferred). "eager" runs a copy of
    # the manifest that sets it, from the test's directory (the ledger module is found through PYTHONPATH).
    durability: str | None = None
    # The journal's `claimTtl`; None keeps the default (60 s). The mixed-fault soak pauses processes past it.
    claim_ttl: str | None = None

    def __post_init__(self) -> None:
        self.manifest = WORKFLOWS / f"{self.spec.kind}.yaml"
        self.ledger = self.tmp / "ledger.txt"
        self.ledger.touch()
        self.env = dict(os.environ)
        self.env.pop("TELO_FAULT", None)
        self.env.update({"CRASH_JOURNAL": self.spec.location, "CRASH_LEDGER": str(self.ledger),
                         "PYTHONUNBUFFERED": "1"})
        if self.durability is not None:
            self._amend("kind: Local.Workflow\n", f"durability: {self.durability}\n", self.durability)
        if self.claim_ttl is not None:
            self._amend("metadata: { name: runs }\n", f"claimTtl: {self.claim_ttl}\n", "ttl")
        if self.spec.table is not None:
            self.env["CRASH_TABLE"] = self.spec.table
        self._n = 0
        self._by_pid: dict[int, list[Proc]] = {}
        self._indexed = 0

    def _amend(self, marker: str, line: str, suffix: str) -> None:
        """Run a copy of the manifest with ``line`` added after its one ``marker`` line, from the test's
        directory (the ledger module is then found through PYTHONPATH)."""
        text = self.manifest.read_text()
        assert text.count(marker) == 1, f"the crash manifest has one {marker.strip()!r}"
        self.manifest = self.tmp / f"{self.spec.kind}-{suffix}.yaml"
        self.manifest.write_text(text.replace(marker, marker + line))
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(WORKFLOWS), self.env.get("PYTHONPATH", "")) if p)

    # --- processes ------------------------------------------------------------------------------------

    def start(self, *args: str, label: str = "", env: Mapping[str, str] | None = None,
              argv: list[str] | None = None, server: ForkServer | None = None) -> Proc:
        """Start ``telo <args>`` (or ``argv``) as a subprocess, or as a child of ``server``."""
        self._n += 1
        out = self.tmp / f"proc-{self._n:04d}.out"
        label = label or " ".join(args[:2])
        if server is not None:
            assert argv is None
            start = time.monotonic_ns()
            pid = server.call(op="spawn", argv=list(args), env={**self.env, **(env or {})}, out=str(out))["pid"]
            proc = Proc(label, pid, start, out, server=server)
        else:
            with open(out, "wb") as f:
                start = time.monotonic_ns()
                popen = subprocess.Popen(argv or [*TELO, *args], cwd=REPO_ROOT, env={**self.env, **(env or {})},
                                         stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
            proc = Proc(label, popen.pid, start, out, popen=popen)
        self.procs.append(proc)
        return proc

    def wait(self, proc: Proc, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while (code := proc.poll()) is None:
            if time.monotonic() >= deadline:
                proc.sigkill()
                raise AssertionError(f"{proc.label} (pid {proc.pid}) did not finish in {timeout} s:\n{proc.output()}")
            time.sleep(0.005)
        return code

    def kill(self, proc: Proc) -> bool:
        """SIGKILL ``proc`` if it still runs (True) and reap it."""
        return proc.sigkill()

    def close(self) -> None:
        for proc in self.procs:
            proc.sigkill()

    def telo(self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 60.0,
             expect: int | None = 0) -> Proc:
        """Run a telo command to its end; ``expect`` is the exit status it must have (None: any)."""
        proc = self.start(*args, env=env)
        code = self.wait(proc, timeout)
        assert expect is None or code == expect, (
            f"`telo {' '.join(args)}` exited {code}, expected {expect}:\n{proc.output()}"
        )
        return proc

    def run_args(self, run: str, n: int) -> list[str]:
        # The harness judges runs by the journal and the ledger, not by `telo run`'s exit code: it exits 0 unless
        # a target failed, whether the run completed or parked for its approval (--exit-on targets).
        return ["run", str(self.manifest), "--exit-on", "targets", "--input", f"id={run}", "--input-json", f"n={n}"]

    def worker_args(self, interval: str = "50ms", *, until_idle: bool = True) -> list[str]:
        return ["worker", str(self.manifest), "--interval", interval, *(["--until-idle"] if until_idle else [])]

    def status(self, run: str) -> dict[str, Any]:
        """``telo status --json``: the journal must be readable by the CLI after any crash."""
        proc = self.telo("status", run, "--manifest", str(self.manifest), "--json")
        data = json.loads(proc.out_path.read_text())
        assert data["run"] == run, data
        return data  # type: ignore[no-any-return]

    def deliver(self, run: str, *, env: Mapping[str, str] | None = None, expect: int | None = 0) -> Proc:
        return self.telo("deliver", APPROVE_PREFIX + run, "--manifest", str(self.manifest), "--payload",
                         json.dumps(payload_for(run)), env=env, expect=expect)

    def killed_procs(self) -> list[Proc]:
        return [p for p in self.procs if p.killed]

    # --- the ledger -----------------------------------------------------------------------------------

    def ledger_lines(self) -> list[LedgerLine]:
        out = []
        for raw in self.ledger.read_text().splitlines():
            key, step, pid, ns = raw.split(" ")
            out.append(LedgerLine(key, step, int(pid), int(ns)))
        return out

    def executor(self, line: LedgerLine) -> Proc | None:
        """The process instance that wrote ``line``: its pid, alive at the line's time."""
        if self._indexed != len(self.procs):
            for proc in self.procs[self._indexed:]:
                self._by_pid.setdefault(proc.pid, []).append(proc)
            self._indexed = len(self.procs)
        for proc in self._by_pid.get(line.pid, ()):
            if proc.start_ns <= line.ns and (proc.end_ns is None or line.ns <= proc.end_ns):
                return proc
        return None


def deliver_parked(store: Store) -> int:
    """Deliver the approval of every run parked on an ``approve:`` token (the Python API a deliverer uses)."""
    from telo.durable.waits import deliver

    n = 0
    for record in store.list_runs(RunFilter(status="parked", limit=10_000)).runs:
        token = record.parked.token if record.parked is not None else None
        if token is not None and token.startswith(APPROVE_PREFIX):
            n += bool(deliver(store, token, payload_for(token.removeprefix(APPROVE_PREFIX)))["delivered"])
    return n


def effect_keys(store: Store, run: str) -> set[str]:
    """The idempotency keys of the run's recorded Python.Function receipts (recovery must read the journal)."""
    state = eventlog.recover(store, run)
    return {
        eventlog.idempotency_key(run, path)
        for path, entry in state.entries.items()
        if entry.kind == "step" and entry.target is not None and entry.target.get("kind") == "Python.Function"
    }


def check_completed(store: Store, runs: Iterable[str], ctx: str, *,
                    dead_claims: bool = False) -> dict[str, RunRecord]:
    """Every run completed with the payload delivered to it; no claim left on it — or, with ``dead_claims``,
    none but a claim of a dead process: a worker whose due list listed the run before it completed may claim
    it (stores grant a claim on a settled run) and die before it sees the run is settled and lets go."""
    out = {}
    for run in runs:
        record = store.read_run(run)
        assert record is not None, f"{ctx}: run {run} is missing"
        assert record.status == "completed", f"{ctx}: run {run} is {record.status}: {record!r}"
        assert record.claim is None or (dead_claims and holder_is_dead(record.claim.holder)), (
            f"{ctx}: completed run {run} is still claimed: {record.claim!r}"
        )
        result = record.decoded_result()
        assert result["steps"]["approve"]["result"] == payload_for(run), f"{ctx}: {run}: {result['steps']!r}"
        assert result["steps"]["last"]["result"]["key"] == f"{run}/steps/last", f"{ctx}: {run}: {result!r}"
        out[run] = record
    return out


@dataclass
class LedgerReport:
    lines: int
    repeated: dict[str, int]  # key -> times executed, for keys executed more than once


def check_ledger(flow: Flow, store: Store, runs: Iterable[str], ctx: str,
                 max_runs: int = DEFAULT_CONCURRENCY) -> LedgerReport:
    """The ledger properties of the module docstring, for ``runs`` (all completed) and the whole ledger."""
    runs = list(runs)
    lines = flow.ledger_lines()
    by_key: dict[str, list[LedgerLine]] = defaultdict(list)
    for line in lines:
        by_key[line.key].append(line)
    expected: set[str] = set()
    for run in runs:
        keys = effect_keys(store, run)
        assert len(keys) == EFFECTS_PER_RUN, f"{ctx}: run {run} records {len(keys)} effects: {sorted(keys)}"
        expected |= keys
    assert set(by_key) == expected, (
        f"{ctx}: ledger keys without a receipt: {sorted(set(by_key) - expected)[:10]}; "
        f"receipts without a ledger line: {sorted(expected - set(by_key))[:10]}"
    )
    repeated: dict[str, int] = {}
    # id(proc) -> run -> keys the killed process left to be re-driven
    charged: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    procs: dict[int, Proc] = {}
    # id(proc) -> run -> keys a paused process executed on waking that another had executed meanwhile
    woke: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for key, seq in by_key.items():
        seq.sort(key=lambda line: line.ns)
        assert len({line.step for line in seq}) == 1, f"{ctx}: one key, different steps: {seq}"
        for earlier, later in itertools.pairwise(seq):
            proc = flow.executor(earlier)
            assert proc is not None, f"{ctx}: {key}: no process of the test wrote {earlier}"
            waker = flow.executor(later)
            # A repeat after its earlier executor died (killed, or itself paused past its lease) is a re-drive of
            # what that one left unconfirmed, whoever makes it — the waker too, under a claim it took afresh
            # once awake (deferred entries make this common: the dead executor's receipts were still queued).
            died_first = proc.lost_its_claim(earlier.run) and proc.killed_or_paused_before(later.ns)
            if waker is not None and waker.paused_ns is not None and waker.paused_ns < earlier.ns \
                    and waker.resumed_ns is not None and later.ns >= waker.resumed_ns and not died_first:
                # Paused before the other execution and executing after waking: the effect it had passed its
                # last check for when the pause came (the unconfirmed window, docs/guarantees.md) — bounded below.
                woke[id(waker)][later.run].append(key)
                procs[id(waker)] = waker
                continue
            assert proc.lost_its_claim(earlier.run), (
                f"{ctx}: {key} executed again (pid {later.pid}) although its earlier executor {proc.label} "
                f"(pid {proc.pid}) was never killed nor paused past its lease: a completed step repeated "
                f"(SIGTERM sent: {proc.terminated_ns is not None}, exit {proc.returncode})\n{proc.output()}"
            )
            fenced = not proc.killed and proc.paused_ns is None and proc.fenced_out_of(earlier.run)
            assert later.ns > proc.death_ns() or fenced, (
                f"{ctx}: {key} executed again by pid {later.pid} {(proc.death_ns() - later.ns) / 1e6:.1f} ms "
                f"BEFORE its earlier executor (pid {proc.pid}) was killed or paused (and it never reported its "
                f"claim lost): two live executors\n{proc.output()}"
            )
            charged[id(proc)][earlier.run].append(key)
            procs[id(proc)] = proc
        if len(seq) > 1:
            repeated[key] = len(seq)
    for pid, by_run in woke.items():
        proc = procs[pid]
        for run, run_keys in by_run.items():
            assert len(run_keys) <= FAN_CONCURRENCY, (
                f"{ctx}: paused process {proc.label} (pid {proc.pid}) executed {len(run_keys)} effects of {run} on "
                f"waking that another process had executed meanwhile; at most {FAN_CONCURRENCY} can have been "
                f"about to start when it was paused (its next write is fenced): {run_keys}")
    for pid, by_run in charged.items():
        proc = procs[pid]
        mine = [line for line in lines if flow.executor(line) is proc]
        assert len(by_run) <= max_runs, (
            f"{ctx}: killed process {proc.label} (pid {proc.pid}) left effects of {len(by_run)} runs to re-drive, "
            f"but executes at most {max_runs} at once: {dict(by_run)}\nits ledger lines: {mine}"
        )
        for run, run_keys in by_run.items():
            assert len(run_keys) <= FAN_CONCURRENCY + DEFERRED_STEPS, (
                f"{ctx}: killed process {proc.label} (pid {proc.pid}) left {len(run_keys)} effects of {run} to "
                f"re-drive (at most {FAN_CONCURRENCY} can be in flight, and {DEFERRED_STEPS} finished with "
                f"their entries not yet durable): {run_keys}\nits ledger lines: {mine}"
            )
    return LedgerReport(len(lines), repeated)


def all_runs(store: Store) -> list[RunRecord]:
    return store.list_runs(RunFilter(limit=100_000)).runs
