"""Durable workflows on the SQLite journal against raw one-row durable commits, and against peers (issue 6).

The workload: a ``Local.Workflow`` of 10 ``Py.Function`` steps (a trivial async function returning a small
dict; each step's inputs reference the previous step's result by CEL), journaled by
``durable-journal-sqlite`` (WAL, ``synchronous=FULL``) in a temporary directory on the repository's
filesystem (never tmpfs: the point is a real fsync). Every run is started through the dispatch chokepoint
exactly as a manifest's step would start it, and awaited to completion. Measured in one process, in
interleaved rounds so that other load on the machine hits the figures being compared alike:

- **raw**: ``benchmarks/journal.py``'s plain ``sqlite3`` loop of one-row ``INSERT`` + ``COMMIT`` (WAL, FULL) —
  the rate of a runtime that pays one durable commit per step;
- **sequential**: 300 runs one after another (start, await completion);
- **100 in flight**: 300 runs with at most 100 executing at once (an ``asyncio.Semaphore``).

Steps/s = 10 x runs / elapsed; only the 10 function steps count (not the inputs decision, the admission or the
completion record). Then **recovery**: a child process starts 100 runs and is SIGKILLed once every run is
inside its 6th step (5 step entries durable); this process then loads the same manifest and a resumer
continues all 100 to ``completed`` — the figure is the time from the first sweep to the last completion,
with the application load reported beside it.

``--peers`` installs DBOS and LangGraph into ``benchmarks/.peers-venv`` (never project dependencies) and runs
``benchmarks/peers/*.py`` there on the same workload (10 steps x 300 runs, SQLite, files beside this run's).
Right before and after each peer, the raw rate and telo's two figures are measured again, and the peer is
compared with their mean — the load here moves every figure by several times within minutes.

The workflow runs as shipped — its idempotent steps' entries deferred (docs/guarantees.md "When entries are
durable") — and, beside it, with ``durability: eager`` (every entry durable before the body goes on).

Targets: sequential >= 10 x DBOS steps/s (issue 6) and >= 12 x (issue 14); ``durability: eager`` sequential >=
0.5 x the raw one-commit-per-step rate (issue 14); 100 in flight >= 1.1 x that rate; recovery of 100 interrupted
runs <= 0.5 s. The script exits 0 whatever the verdicts: it measures (``benchmarks/sqlite_floor.py`` shows what
bounds the sequential ones).

    .venv/bin/python benchmarks/durable.py [--peers] [--rounds 3] [--runs 300] [--inflight 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import importlib.util
import json
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
STEPS = 10
HALF = 5  # recovery: runs are interrupted inside step HALF + 1, with HALF step entries durable
PEERS_VENV = HERE / ".peers-venv"
PEER_PINS = ("dbos==3.4.0", "langgraph==1.2.22", "langgraph-checkpoint-sqlite==3.1.2")
# (row name, script under benchmarks/peers, its extra arguments). "DBOS" — WAL, synchronous FULL: the same
# durability settings as telo's journal — is the one the ratios and the target compare with; DBOS's own
# SQLite default (rollback journal) is shown beside it.
PEERS: tuple[tuple[str, str, list[str]], ...] = (
    ("DBOS", "dbos_bench.py", ["--journal", "wal"]),
    ("DBOS, default SQLite journal", "dbos_bench.py", ["--journal", "default"]),
    ("LangGraph", "langgraph_bench.py", []),
)

FUNCTIONS = """\
import asyncio
import os

_HANG_AT = int(os.environ.get("BENCH_HANG_AT", "-1"))  # recovery child only: block in the step whose n is this
_HANG_COUNT = int(os.environ.get("BENCH_HANG_COUNT", "0"))
_hung = 0


async def add(inputs):
    if inputs["n"] == _HANG_AT:
        global _hung
        _hung += 1
        if _hung == _HANG_COUNT:
            print("ready", flush=True)
        await asyncio.Event().wait()
    return {"n": inputs["n"], "tag": inputs["tag"]}
"""

MANIFEST = """\
kind: Telo.Application
metadata: { name: DurableBench }
imports: { Local: durable-local, Journal: %(journal_module)s, Py: python }
---
kind: Journal.Journal
metadata: { name: runs }
%(journal_fields)s---
kind: Py.Function
metadata: { name: add }
function: benchfns:add
idempotent: true  # it is; and a run interrupted inside it is re-driven on recovery instead of parked for an operator
---
kind: Local.Workflow
metadata: { name: flow }
journal: !ref runs
durability: %(durability)s
inputs: { start: !cel "inputs.start" }
steps:
  - name: s0
    invoke: !ref add
    inputs: { n: !cel "inputs.start", tag: "s0" }
%(steps)s"""


def manifest_text(journal: str, durability: str = "deferred", journal_module: str = "durable-journal-sqlite",
                  journal_fields: dict[str, str] | None = None) -> str:
    """The benchmark's manifest; ``journal`` is the SQLite journal's path, unless ``journal_fields`` gives the
    journal's fields instead (``benchmarks/postgres.py``: ``durable-journal-postgres`` with ``url`` and ``table``)."""
    fields = {"path": journal} if journal_fields is None else journal_fields
    steps = []
    for i in range(1, STEPS):
        steps.append(textwrap.indent(textwrap.dedent(f"""\
            - name: s{i}
              invoke: !ref add
              inputs: {{ n: !cel "steps.s{i - 1}.result.n + 1", tag: !cel "'s' + string(steps.s{i - 1}.result.n)" }}
            """), "  "))
    return MANIFEST % {"journal_module": journal_module, "steps": "".join(steps), "durability": durability,
                       "journal_fields": "".join(f"{k}: {json.dumps(v)}\n" for k, v in fields.items())}


def write_app(d: Path, journal: str, durability: str = "deferred", **journal_options: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "benchfns.py").write_text(FUNCTIONS)
    (d / "bench.yaml").write_text(manifest_text(journal, durability, **journal_options))
    return d / "bench.yaml"


def load_raw_baseline() -> Any:
    """``benchmarks/journal.py``'s raw one-row durable-commit loop (one baseline for every benchmark)."""
    spec = importlib.util.spec_from_file_location("telo_bench_journal", HERE / "journal.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Raw


# --- telo: throughput ---------------------------------------------------------------------------------------

_SLOT: contextvars.ContextVar[list[Any]] = contextvars.ContextVar("bench_slot")


class TeloBench:
    """An application on one journal; ``start_and_wait`` starts a run through dispatch and awaits it."""

    def __init__(self, manifest: Path) -> None:
        self.manifest = manifest

    async def open(self) -> None:
        from telo.engine.dispatch import dispatch
        from telo.kinds.controllers import load_application
        from telo.runtime.resource import as_invocable

        sys.path.insert(0, str(self.manifest.parent))
        self.app = load_application(self.manifest)
        await self.app.start()
        self.flow = as_invocable(self.app.resources["flow"])
        self.dispatch = dispatch
        hold = self.app.hold

        def capture(awaitable: Any) -> asyncio.Future[Any]:
            # A workflow start returns {runId, status: running} at once and continues the body under an app
            # hold; the benchmark awaits that hold (the run's completion), found through a context variable
            # the starting task set.
            fut = hold(awaitable)
            slot = _SLOT.get(None)
            if slot is not None:
                slot.append(fut)
            return fut

        self.app.hold = capture  # type: ignore[method-assign]

    async def start_and_wait(self, start: int = 0) -> None:
        slot: list[Any] = []
        _SLOT.set(slot)
        out = await self.dispatch(self.flow, {"start": start}, events=self.app.events)
        assert out.get("started"), out
        execution = await slot[0]
        assert execution.status == "completed", (execution.status, execution.error)
        assert execution.executed_steps == STEPS and execution.result["steps"]["s9"]["result"]["n"] == 9

    async def sequential(self, runs: int) -> tuple[float, float]:
        """Steps/s, and durable commits per step (each awaited before the next: nothing to share them with)."""
        store = self.app.resources["runs"].store  # type: ignore[attr-defined]
        commits = store.stats.commits
        t0 = time.perf_counter()
        for _ in range(runs):
            await self.start_and_wait()
        return runs * STEPS / (time.perf_counter() - t0), (store.stats.commits - commits) / (runs * STEPS)

    async def in_flight(self, runs: int, limit: int) -> tuple[float, float]:
        gate = asyncio.Semaphore(limit)
        store = self.app.resources["runs"].store  # type: ignore[attr-defined]
        ops, commits = store.stats.ops, store.stats.commits

        async def one() -> None:
            async with gate:
                await self.start_and_wait()

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(runs)))
        rate = runs * STEPS / (time.perf_counter() - t0)
        return rate, (store.stats.ops - ops) / max(1, store.stats.commits - commits)

    async def close(self) -> None:
        await self.app.close()


async def throughput(bench: TeloBench, eager: TeloBench, raw: Any, rounds: int, runs: int, limit: int,
                     raw_rows: int) -> dict[str, Any]:
    """``bench`` is the workflow as shipped (deferred entries), ``eager`` the same with ``durability: eager``."""
    raw.chunk(100)  # warm up caches, the WAL files, CEL programs and imports
    for b in (bench, eager):
        await b.sequential(20)
        await b.in_flight(100, limit)
    r_raw, r_seq, r_par, batch, per_step, e_seq, e_par, e_per_step = [], [], [], [], [], [], [], []
    for _ in range(rounds):
        r_raw.append(raw.chunk(raw_rows))
        rate, commits = await bench.sequential(runs)
        r_seq.append(rate)
        per_step.append(commits)
        rate, mean_batch = await bench.in_flight(runs, limit)
        r_par.append(rate)
        batch.append(mean_batch)
        rate, commits = await eager.sequential(runs)
        e_seq.append(rate)
        e_per_step.append(commits)
        e_par.append((await eager.in_flight(runs, limit))[0])
    med = statistics.median

    def ratio(xs: list[float]) -> float:
        return float(med(x / r for x, r in zip(xs, r_raw, strict=True)))

    return {
        "raw": med(r_raw), "raw_range": (min(r_raw), max(r_raw)),
        "seq": med(r_seq), "seq_ratio": ratio(r_seq), "par": med(r_par), "par_ratio": ratio(r_par),
        "par_batch": med(batch), "commits_per_step": med(per_step),
        "eseq": med(e_seq), "eseq_ratio": ratio(e_seq), "epar": med(e_par), "epar_ratio": ratio(e_par),
        "e_commits_per_step": med(e_per_step),
    }


# --- telo: recovery -----------------------------------------------------------------------------------------

def interrupt_child(manifest: str, runs: int) -> None:
    """Child process: start ``runs`` runs; each blocks inside step HALF + 1 (the parent SIGKILLs us then)."""

    async def main() -> None:
        bench = TeloBench(Path(manifest))
        await bench.open()
        for _ in range(runs):
            out = await bench.dispatch(bench.flow, {"start": 0}, events=bench.app.events)
            assert out.get("started"), out
        await asyncio.Event().wait()

    asyncio.run(main())


def interrupt_runs(manifest: Path, journal: str, runs: int) -> None:
    env = dict(os.environ, BENCH_HANG_AT=str(HALF), BENCH_HANG_COUNT=str(runs))
    child = subprocess.Popen([sys.executable, __file__, "--interrupt-child", str(manifest), "--runs", str(runs)],
                             env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"the interrupting child did not get its runs half way: {line!r}")
        # The steps' entries are deferred (docs/guarantees.md): wait until the first HALF of every run are
        # durable, so every run is interrupted at the same point.
        deadline = time.monotonic() + 30
        while count_steps(journal) != [HALF] * runs:
            if time.monotonic() > deadline:
                raise SystemExit("the interrupted runs' first steps did not become durable within 30 s")
            time.sleep(0.005)
    finally:
        os.kill(child.pid, signal.SIGKILL)  # the crash: every run is mid-step, its claim held by a dead pid
        child.wait()


def count_statuses(journal: str) -> dict[str, int]:
    conn = sqlite3.connect(journal)
    try:
        return dict(conn.execute("SELECT status, count(*) FROM telo_durable_runs GROUP BY status").fetchall())
    finally:
        conn.close()


def count_steps(journal: str) -> list[int]:
    conn = sqlite3.connect(journal)
    try:
        return [n for (n,) in conn.execute("SELECT count(*) FROM telo_durable_entries WHERE entry_kind = 'step' "
                                            "GROUP BY run")]
    finally:
        conn.close()


async def recover(manifest: Path, runs: int) -> dict[str, float]:
    """Child process: load the manifest, sweep with a resumer until nothing is due; the time it took."""
    sys.path.insert(0, str(manifest.parent))
    from telo.kinds.controllers import load_application
    from telo.kinds.resumer import Resumer
    from telo.kinds.workflow import Workflow
    from telo.manifest import Ref

    t0 = time.perf_counter()
    app = load_application(manifest)
    await app.start()
    wf = app.resources["flow"]
    assert isinstance(wf, Workflow)
    # What `telo worker` builds per workflow (telo.operations.worker), swept until nothing is left.
    resumer = Resumer(app, "worker-flow", {"workflow": Ref("flow", None, app.manifest.resources["flow"].pos),
                                           "interval": "0s"}, None)
    t1 = time.perf_counter()
    resumed = 0
    while True:
        n = await resumer.sweep()
        await app.wait_holds()
        resumed += n
        if n == 0:
            break
    t2 = time.perf_counter()
    completed = sum(1 for e in wf.executions.values() if e.status == "completed" and e.replayed_steps == HALF)
    await resumer.teardown()
    await app.close()
    return {"load_s": t1 - t0, "recover_s": t2 - t1, "resumed": resumed, "completed": completed}


def recovery(d: Path, runs: int) -> dict[str, Any]:
    """Interrupt ``runs`` runs half way, then recover them in a fresh process (as a restarted worker would)."""
    journal = str(d / "recovery.db")
    manifest = write_app(d / "recovery-app", journal)
    interrupt_runs(manifest, journal, runs)
    before = count_statuses(journal)
    steps = count_steps(journal)
    assert before == {"running": runs} and steps == [HALF] * runs, (before, steps)
    done = subprocess.run([sys.executable, __file__, "--recover-child", str(manifest), "--runs", str(runs)],
                          capture_output=True, text=True, check=True)
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    after = count_statuses(journal)
    assert after == {"completed": runs} and out["completed"] == runs, (after, out)
    return out


# --- peers --------------------------------------------------------------------------------------------------

def peers_python() -> tuple[str | None, str]:
    """The peers' venv interpreter (created and filled on first use), or None and why not."""
    py = PEERS_VENV / "bin" / "python"
    stamp = PEERS_VENV / ".installed"
    want = " ".join(PEER_PINS)
    try:
        if not py.exists():
            print(f"creating {PEERS_VENV.relative_to(REPO)} ...", flush=True)
            subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
        if not stamp.exists() or stamp.read_text() != want:
            print(f"installing {want} into {PEERS_VENV.relative_to(REPO)} ...", flush=True)
            done = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                   *PEER_PINS], capture_output=True, text=True)
            if done.returncode != 0:
                return None, f"pip install failed: {done.stderr.strip().splitlines()[-1:]}"
            stamp.write_text(want)
    except (OSError, subprocess.CalledProcessError) as exc:
        return None, f"could not create the peers venv: {exc}"
    return str(py), ""


def run_peer(py: str, script: str, args: list[str], d: Path, runs: int, limit: int,
             timeout: float) -> dict[str, Any]:
    try:
        done = subprocess.run([py, str(HERE / "peers" / script), "--dir", str(d), "--runs", str(runs),
                               "--steps", str(STEPS), "--inflight", str(limit), *args],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:160]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


async def measure(args: argparse.Namespace, d: Path) -> tuple[dict[str, Any], dict[str, Any],
                                                             dict[str, dict[str, Any]]]:
    raw = load_raw_baseline()(str(d / "raw.db"))
    bench = TeloBench(write_app(d / "app", str(d / "telo.db")))
    eager = TeloBench(write_app(d / "app-eager", str(d / "telo-eager.db"), "eager"))
    await bench.open()
    await eager.open()
    try:
        t = await throughput(bench, eager, raw, args.rounds, args.runs, args.inflight, args.runs * STEPS)
        rec = recovery(d, args.recovery_runs)
        peers: dict[str, dict[str, Any]] = {}
        if args.peers:
            py, why = peers_python()
            for name, script, extra in PEERS:
                if py is None:
                    peers[name] = {"error": why}
                    continue
                print(f"running {name} ...", flush=True)
                # The machine's load moves fsync and CPU rates by several times within minutes here, so the
                # raw commit rate and telo's own figures are measured again right before and after each peer;
                # a peer is compared with those (their mean), not with figures from minutes earlier.
                beside = [await beside_figures(bench, eager, raw, args)]
                peers[name] = run_peer(py, script, extra, Path(tempfile.mkdtemp(prefix="peer-", dir=d)),
                                       args.runs, args.inflight, args.peer_timeout)
                beside.append(await beside_figures(bench, eager, raw, args))
                for key in beside[0]:
                    peers[name][key] = (beside[0][key] + beside[1][key]) / 2
    finally:
        await bench.close()
        await eager.close()
        raw.conn.close()
    return t, rec, peers


async def beside_figures(bench: TeloBench, eager: TeloBench, raw: Any,
                         args: argparse.Namespace) -> dict[str, float]:
    return {"raw": raw.chunk(args.runs * STEPS // 3),
            "telo_seq": (await bench.sequential(args.runs))[0],
            "telo_par": (await bench.in_flight(args.runs, args.inflight))[0],
            "telo_eseq": (await eager.sequential(args.runs))[0],
            "telo_epar": (await eager.in_flight(args.runs, args.inflight))[0]}


# --- report -------------------------------------------------------------------------------------------------

def fmt_rate(x: float | None) -> str:
    return f"{x:,.0f}" if x is not None else "n/a"


def fmt_ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of (raw, sequential, in flight)")
    ap.add_argument("--runs", type=int, default=300, help="workflow runs per workload and round")
    ap.add_argument("--inflight", type=int, default=100, help="concurrency limit of the in-flight workload")
    ap.add_argument("--recovery-runs", type=int, default=100)
    ap.add_argument("--peers", action="store_true", help="also measure DBOS and LangGraph (separate venv)")
    ap.add_argument("--peer-timeout", type=float, default=600.0)
    ap.add_argument("--dir", default=str(REPO), help="where the temporary database files go (not tmpfs)")
    ap.add_argument("--interrupt-child", help=argparse.SUPPRESS)
    ap.add_argument("--recover-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.interrupt_child:
        interrupt_child(args.interrupt_child, args.runs)
        return 0
    if args.recover_child:
        print(json.dumps(asyncio.run(recover(Path(args.recover_child), args.runs))))
        return 0

    sys.path.insert(0, str(REPO / "src"))
    print(f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, WAL, synchronous=FULL, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start; files under {args.dir}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix=".bench-durable-", dir=args.dir) as tmp:
        t, rec, peers = asyncio.run(measure(args, Path(tmp)))
        load_end = os.getloadavg()[0]

    raw = t["raw"]
    dbos = peers.get("DBOS", {})
    dbos_seq, dbos_par = dbos.get("sequential"), dbos.get("in_flight")
    seq_vs_dbos = dbos["telo_seq"] / dbos_seq if dbos_seq else None
    rows: list[tuple[str, str, str, str]] = [
        ("raw one-row durable commits (1 per step)", fmt_rate(raw), "1.00x", "-"),
        (f"telo sequential ({args.runs} x {STEPS} steps)", fmt_rate(t["seq"]), f"{t['seq_ratio']:.2f}x",
         fmt_ratio(dbos.get("telo_seq"), dbos_seq)),
        (f"telo {args.inflight} in flight ({args.runs} x {STEPS} steps)", fmt_rate(t["par"]),
         f"{t['par_ratio']:.2f}x", fmt_ratio(dbos.get("telo_par"), dbos_par)),
        ("telo sequential, durability: eager", fmt_rate(t["eseq"]), f"{t['eseq_ratio']:.2f}x",
         fmt_ratio(dbos.get("telo_eseq"), dbos_seq)),
        (f"telo {args.inflight} in flight, durability: eager", fmt_rate(t["epar"]), f"{t['epar_ratio']:.2f}x",
         fmt_ratio(dbos.get("telo_epar"), dbos_par)),
    ]
    for name in peers:
        p = peers[name]
        if "error" in p:
            rows.append((f"{name}", f"n/a ({p['error']})", "-", "-"))
            continue
        note = f" [{p['note']}]" if p.get("note") else ""
        rows.append((f"{name} sequential{note}", fmt_rate(p.get("sequential")),
                     fmt_ratio(p.get("sequential"), p["raw"]), "1.00x" if name == "DBOS" else "-"))
        if p.get("in_flight") is not None:
            rows.append((f"{name} {args.inflight} in flight{note}", fmt_rate(p["in_flight"]),
                         fmt_ratio(p["in_flight"], p["raw"]), "1.00x" if name == "DBOS" else "-"))
        elif p.get("in_flight_error"):
            rows.append((f"{name} {args.inflight} in flight", f"n/a ({p['in_flight_error']})", "-", "-"))
    w = max(len(r[0]) for r in rows)
    print()
    print(f"| {'workload':<{w}} | steps/s | vs raw commits | vs DBOS |")
    print(f"|{'-' * (w + 2)}|--------:|---------------:|--------:|")
    for r in rows:
        print(f"| {r[0]:<{w}} | {r[1]:>7} | {r[2]:>14} | {r[3]:>7} |")
    print()
    print(f"raw commits: median of {args.rounds} rounds of {args.runs * STEPS} "
          f"(range {t['raw_range'][0]:,.0f}..{t['raw_range'][1]:,.0f}/s); telo ratios: median of per-round ratios; "
          f"telo sequential: {t['commits_per_step']:.2f} durable commits per step (the steps' entries are "
          f"deferred — idempotent steps — and commit in the writer's batches behind the body; a run waits for "
          f"its admission and its completion), eager {t['e_commits_per_step']:.2f}; in flight: mean group-commit "
          f"batch {t['par_batch']:.1f} writes")
    for name, p in peers.items():
        if "raw" in p:
            print(f"beside {name} (mean of right before and after it): raw commits {p['raw']:,.0f}/s, telo "
                  f"sequential {p['telo_seq']:,.0f} and in flight {p['telo_par']:,.0f} steps/s (eager: "
                  f"{p['telo_eseq']:,.0f} and {p['telo_epar']:,.0f})")
    if dbos_seq:
        print("vs DBOS: telo's figures measured beside DBOS over DBOS's; a peer's vs raw: over the raw rate beside it")
    print(f"recovery of {args.recovery_runs} runs interrupted after step {HALF} (SIGKILL): "
          f"{rec['recover_s']:.3f} s from the first sweep to the last completion "
          f"(+ {rec['load_s']:.3f} s application load)")
    print(f"load average {load_end:.2f} at end")
    print()
    vs_dbos = "n/a (run with --peers)" if seq_vs_dbos is None and not args.peers else \
        "n/a (DBOS not measured)" if seq_vs_dbos is None else f"{seq_vs_dbos:.1f}x"
    verdicts = [
        ("sequential >= 10x DBOS steps/s (issue 6)", None if seq_vs_dbos is None else seq_vs_dbos >= 10, vs_dbos),
        ("sequential >= 12x DBOS steps/s (issue 14)", None if seq_vs_dbos is None else seq_vs_dbos >= 12, vs_dbos),
        ("sequential, durability: eager >= 0.5x raw one-commit-per-step (issue 14)", t["eseq_ratio"] >= 0.5,
         f"{t['eseq_ratio']:.2f}x"),
        (f"{args.inflight} in flight >= 1.1x raw one-commit-per-step", t["par_ratio"] >= 1.1,
         f"{t['par_ratio']:.2f}x"),
        (f"recovery of {args.recovery_runs} interrupted runs <= 0.5 s", rec["recover_s"] <= 0.5,
         f"{rec['recover_s']:.3f} s"),
    ]
    for what, ok, got in verdicts:
        print(f"target {what}: {got} — {'met' if ok else 'NOT met' if ok is not None else 'not measured'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
