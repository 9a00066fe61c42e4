"""Durable workflows on the PostgreSQL journal against raw one-row commits, and against DBOS (issue 14).

The workload is ``benchmarks/durable.py``'s — a ``Local.Workflow`` of 10 ``Py.Function`` steps (a trivial async
function returning a small dict; each step's inputs reference the previous step's result by CEL), its
``FUNCTIONS`` and manifest builder imported from there — journaled by ``durable-journal-postgres`` on
PostgreSQL 15 at its default durable settings (``fsync=on``, ``synchronous_commit=on``). Without ``--url`` the
script starts its own throwaway cluster as ``scripts/postgres.sh`` does (``initdb`` from
/usr/lib/postgresql/15/bin, as user ``postgres`` when run as root, ``max_connections=200``, a random port on
127.0.0.1), its data directory on the filesystem of ``--dir`` (the repository; never tmpfs: the point is a
real fsync), and stops and removes it at the end; its own cluster keeps the transaction-id and WAL deltas free
of other users. Measured, each figure a **block**:

- **raw**: psycopg 3, autocommit, ``INSERT INTO t(v) VALUES (%s)`` one row per commit on one connection — the
  rate of a runtime paying one durable commit per step; measured right before and right after every block,
  and each block's ratio is against the mean of those two;
- **telo sequential**: ``--runs`` runs one after another, each started through the dispatch chokepoint and
  awaited to completion; **telo in flight**: ``--runs`` runs with at most ``--inflight`` at once; both with the
  workflow as shipped (``durability: deferred``) and with ``durability: eager``, in ``--rounds`` rounds (a
  figure is the median of its rounds, a ratio the median of the per-round ratios);
- **workers**: ``--due`` runs admitted ``scheduled`` (``telo.operations.starting.schedule``, the workflow's
  digest) and due 2 s + 0.5 s per worker after N ``telo worker MANIFEST --until-idle`` processes
  (``--interval``, and ``--concurrency`` when ``telo worker --help`` lists it) are started at once, so that
  every worker is up when the runs come due. Each count drains ``--drain-rounds`` times (3), the counts
  interleaved, and its figure is the median drain: one drain of 600 runs lasts about a second, and a single
  one moved by ±10 % between identical runs. The step function (``FUNCTIONS`` plus
  a wrapper enabled by ``BENCH_LEDGER``) appends a line with the time to the ledger file ``ledger/<pid>`` of the
  process that runs a run's first step, and of the one that runs its last step; the drain's steps/s is over the
  time from the first run's first step to the last run's last step — what the workers do once started; their
  start-up (loading Python and the manifest, ~0.5 s a process, the same for any count of them) is reported
  beside it — and a run is attributed to the process that ran its last step;
- ``--peers``: **DBOS** 3.4 (``benchmarks/.peers-venv``, installed by ``benchmarks/durable.py``'s helper) with its
  system database on the same server (a database of its own), through ``benchmarks/peers/dbos_pg_bench.py``:
  sequential (sync workflow of 10 ``@DBOS.step()``s), in flight (async workflows), and a DBOS queue
  (``worker_concurrency`` ``--concurrency``, polled every ``--interval``) of ``--due`` workflows drained by 1 and
  2 processes, timed like telo's workers (from the first workflow's dequeue to the last one's completion,
  ``dbos.workflow_status``).

Beside each block's steps/s (only the 10 function steps count): the CPU time per step of the client — this
process's own (``time.process_time()``, all threads) for telo's in-process figures, the DBOS process's own for
DBOS's, and for the drains the worker processes' whole lives, start-up included (``RUSAGE_CHILDREN``) — and of
the PostgreSQL server (utime + stime from /proc of the postmaster, the processes it reaped, and its live
children); "cores busy" is their sum over the elapsed time, so a figure near 2 on 2 cores is CPU-bound and one
well below it waits on fsync. Write transactions per step come from ``txid_current()`` deltas (the probe's own xid
subtracted), WAL bytes per step from ``pg_current_wal_insert_lsn()`` deltas (``pg_wal_lsn_diff``; the probe's
own commit record subtracted); both are server-wide, so a server with other users pollutes them.

vs DBOS compares the two figures' ratios to the raw rate measured beside each: (telo / its raw) / (DBOS / its
raw). Targets: in flight >= 1.0 x raw, >= 5 x DBOS in flight, <= 0.3 write transactions per step;
sequential >= 0.5 x raw, >= 3 x DBOS sequential; 2 workers >= 1.7 x one worker; each of 4 workers runs 15-35 %
of the runs. The script exits 0 whatever the verdicts: it measures.

    .venv/bin/python benchmarks/postgres.py [--peers] [--url URL] [--rounds 3] [--runs 300] [--inflight 100]
                                            [--due 600] [--workers 1,2,4] [--skip-workers] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import importlib.util
import itertools
import json
import os
import platform
import queue
import resource
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

import psycopg
from psycopg import sql

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PG_BIN = Path("/usr/lib/postgresql/15/bin")
TELO = Path(sys.executable).parent / "telo"
JOURNAL_MODULE = "durable-journal-postgres"
CLK_TCK = os.sysconf("SC_CLK_TCK")
VALUE = '{"$telo":"map","value":[["n",1],["tag","s0"]]}'  # a step result's size, for the raw rows
CHILDREN: list[subprocess.Popen[Any]] = []  # every process started here: killed on the way out if still alive


def load_durable() -> Any:
    """``benchmarks/durable.py`` as a module (its workload, manifest builder, TeloBench and peers venv)."""
    spec = importlib.util.spec_from_file_location("telo_bench_durable", HERE / "durable.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


durable = load_durable()
STEPS: int = durable.STEPS

# Appended to durable.FUNCTIONS in the workers' application: the process that runs a run's first step writes a
# ``start <epoch s>`` line to ledger/<its pid>, the one that runs its last step a ``run <epoch s>`` line, so the
# lines count each worker's runs and time the drain from the first step to the last (nothing changes without
# BENCH_LEDGER).
LEDGER = f"""

_LEDGER_DIR = os.environ.get("BENCH_LEDGER")
if _LEDGER_DIR:
    import time as _time

    _ledger = open(os.path.join(_LEDGER_DIR, str(os.getpid())), "a", buffering=1)
    _add = add

    async def add(inputs):
        out = await _add(inputs)
        if inputs["n"] == 0:
            _ledger.write(f"start {{_time.time()}}\\n")
        if inputs["n"] == {STEPS - 1}:
            _ledger.write(f"run {{_time.time()}}\\n")
        return out
"""


SAY_TO_STDERR = False  # --json: progress goes to stderr, the document alone to stdout


def say(*parts: Any) -> None:
    print(*parts, file=sys.stderr if SAY_TO_STDERR else sys.stdout, flush=True)


# --- the server --------------------------------------------------------------------------------------------

def fs_type(path: Path) -> str:
    """The type of the filesystem ``path`` is on (the longest mount point above it in /proc/mounts)."""
    best, kind = "", "unknown"
    with contextlib.suppress(OSError), open("/proc/mounts") as mounts:
        for line in mounts:
            parts = line.split()
            mount = parts[1].replace("\\040", " ")
            under = str(path).startswith(mount.rstrip("/") + "/") or str(path) == mount
            if under and len(mount) >= len(best):
                best, kind = mount, parts[2]
    return kind


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A throwaway PostgreSQL 15 cluster in ``parent`` (as ``scripts/postgres.sh`` starts one, fsync on)."""

    def __init__(self, parent: Path) -> None:
        self.dir = parent / "pg"
        self.dir.mkdir(mode=0o700)
        self.data = self.dir / "data"
        self.runas = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
        self.started = False
        self.url = ""

    def start(self) -> str:
        if not (PG_BIN / "initdb").exists():
            raise SystemExit(f"no PostgreSQL server binaries in {PG_BIN}: install postgresql-15 or pass --url")
        if self.runas:
            self.dir.parent.chmod(0o711)  # the server's user must reach its directory
            shutil.chown(self.dir, "postgres", "postgres")
        done = subprocess.run([*self.runas, str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres",
                               "-A", "trust", "--no-sync"], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"initdb failed: {done.stderr.strip()[-400:]}")
        for _ in range(3):  # a random port may be taken by the time the server binds it
            port = free_port()
            opts = (f"-p {port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=200")
            done = subprocess.run([*self.runas, str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l",
                                   str(self.dir / "server.log"), "-w", "-t", "60", "-o", opts, "start"],
                                  capture_output=True, text=True)
            if done.returncode == 0:
                self.started = True
                self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
                return self.url
        raise SystemExit(f"the PostgreSQL server did not start (see {self.dir / 'server.log'}): "
                         f"{done.stderr.strip()[-400:]}")

    def postmaster(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        if self.started:
            done = subprocess.run([*self.runas, str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                                   "-t", "60", "stop"], capture_output=True, text=True)
            if done.returncode != 0:  # the postmaster's own pid, from its pid file: an immediate shutdown
                with contextlib.suppress(OSError, ValueError):
                    os.kill(self.postmaster(), signal.SIGQUIT)
            self.started = False


def postmaster_of(conn: psycopg.Connection[Any]) -> int | None:
    """The local postmaster's pid for a server given by URL: the parent of this connection's backend."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    try:
        stat = Path(f"/proc/{row[0]}/stat").read_text()
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        comm = Path(f"/proc/{ppid}/comm").read_text().strip()
    except (OSError, ValueError):
        return None  # a server on another host (or in another pid namespace)
    return ppid if comm.startswith("postgres") else None


def server_cpu_s(postmaster: int | None) -> float | None:
    """CPU seconds of the cluster: the postmaster, the children it reaped, and its live children."""
    if postmaster is None:
        return None
    ticks = 0
    try:
        stat = Path(f"/proc/{postmaster}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    ticks += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue  # exited meanwhile (its time is in the postmaster's cutime from now on)
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == postmaster:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / CLK_TCK


class Meter:
    """Snapshots of the server (xid, WAL position, CPU) and of the client's CPU, on a probe connection."""

    def __init__(self, url: str, postmaster: int | None) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.postmaster = postmaster
        probes = [self.snap() for _ in range(4)]
        # Each probe's txid_current() assigns it an xid and its commit writes a WAL record after the position
        # it read: one of each falls inside every measured window.
        self.probe_wal = min(self.wal_diff(b, a) for a, b in itertools.pairwise(probes))

    def snap(self) -> dict[str, Any]:
        row = self.conn.execute("SELECT txid_current(), pg_current_wal_insert_lsn()::text").fetchone()
        assert row is not None
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {"xid": int(row[0]), "lsn": row[1], "self": time.process_time(),
                "children": usage.ru_utime + usage.ru_stime, "server": server_cpu_s(self.postmaster),
                "t": time.perf_counter()}

    def wal_diff(self, b: dict[str, Any], a: dict[str, Any]) -> float:
        row = self.conn.execute("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)", (b["lsn"], a["lsn"])).fetchone()
        assert row is not None
        return float(row[0])

    def per_step(self, a: dict[str, Any], b: dict[str, Any], steps: int, client: str | float) -> dict[str, Any]:
        """Per step between two snapshots; ``client`` is "self", "children", or CPU seconds reported by a peer."""
        client_s = b[client] - a[client] if isinstance(client, str) else client
        server_s = b["server"] - a["server"] if a["server"] is not None and b["server"] is not None else None
        elapsed = b["t"] - a["t"]
        return {"client_us": client_s / steps * 1e6, "server_us": None if server_s is None else server_s / steps * 1e6,
                "cores": None if server_s is None else (client_s + server_s) / elapsed,
                "xacts": (b["xid"] - a["xid"] - 1) / steps, "wal": (self.wal_diff(b, a) - self.probe_wal) / steps}

    def close(self) -> None:
        self.conn.close()


class Raw:
    """psycopg 3 on one autocommit connection: ``INSERT INTO t(v) VALUES (%s)``, one row per commit."""

    def __init__(self, url: str, table: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(sql.SQL("CREATE TABLE {} (id bigserial PRIMARY KEY, v text NOT NULL)")
                          .format(sql.Identifier(table)))
        self.insert = sql.SQL("INSERT INTO {}(v) VALUES (%s)").format(sql.Identifier(table)).as_string(self.conn)

    def chunk(self, rows: int) -> float:
        conn, insert, params = self.conn, self.insert, (VALUE,)
        t0 = time.perf_counter()
        for _ in range(rows):
            conn.execute(insert, params)  # prepared by psycopg after its first few executions
        return rows / (time.perf_counter() - t0)

    def close(self) -> None:
        self.conn.close()


# --- blocks ------------------------------------------------------------------------------------------------

class Harness:
    """Runs blocks, each between two raw measurements (one shared with the previous block when nothing ran
    in between), and metered."""

    def __init__(self, raw: Raw, meter: Meter, raw_rows: int) -> None:
        self.raw, self.meter, self.raw_rows = raw, meter, raw_rows
        self.fresh: float | None = None  # the raw rate measured right after the last block, while still adjacent
        self.raws: list[dict[str, Any]] = []

    def stale(self) -> None:
        """Something ran since the last block: the next block measures its own raw rate before it."""
        self.fresh = None

    def raw_now(self) -> float:
        a = self.meter.snap()
        rate = self.raw.chunk(self.raw_rows)
        b = self.meter.snap()
        self.raws.append({"rate": rate, **self.meter.per_step(a, b, self.raw_rows, "self")})
        return rate

    async def block(self, steps: int, body: Callable[[], Awaitable[dict[str, Any]]],
                    client: str = "self") -> dict[str, Any]:
        """``body`` returns ``{"rate": steps/s, ...}``, with ``client_cpu_s`` when the client is another process."""
        before = self.fresh if self.fresh is not None else self.raw_now()
        a = self.meter.snap()
        out = await body()
        b = self.meter.snap()
        after = self.raw_now()
        self.fresh = after
        raw = (before + after) / 2
        used: str | float = out.pop("client_cpu_s", client)
        return {**out, "raw": raw, "raw_before": before, "raw_after": after, "ratio": out["rate"] / raw,
                **self.meter.per_step(a, b, steps, used)}


def app_dir(d: Path, url: str, table: str, durability: str = "deferred") -> Path:
    return durable.write_app(d, "", durability, journal_module=JOURNAL_MODULE,
                             journal_fields={"url": url, "table": table})


async def sequential(bench: Any, runs: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    for _ in range(runs):
        await bench.start_and_wait()
    return {"rate": runs * STEPS / (time.perf_counter() - t0)}


async def in_flight(bench: Any, runs: int, limit: int) -> dict[str, Any]:
    gate = asyncio.Semaphore(limit)

    async def one() -> None:
        async with gate:
            await bench.start_and_wait()

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(runs)))
    return {"rate": runs * STEPS / (time.perf_counter() - t0)}


async def telo_rounds(h: Harness, args: argparse.Namespace, url: str, prefix: str,
                      d: Path) -> dict[str, list[dict[str, Any]]]:
    shipped = durable.TeloBench(app_dir(d / "app", url, f"{prefix}_d"))
    eager = durable.TeloBench(app_dir(d / "app-eager", url, f"{prefix}_e", "eager"))
    out: dict[str, list[dict[str, Any]]] = {"seq": [], "par": [], "eseq": [], "epar": []}
    opened = []
    try:
        for b in (shipped, eager):
            await b.open()
            opened.append(b)
        h.raw.chunk(100)  # warm up: connections, caches, CEL programs, imports
        for b in (shipped, eager):
            await sequential(b, 20)
            await in_flight(b, min(100, args.runs), args.inflight)
        h.stale()
        n = args.runs * STEPS
        for r in range(args.rounds):
            say(f"telo round {r + 1}/{args.rounds} ...")
            out["seq"].append(await h.block(n, lambda: sequential(shipped, args.runs)))
            out["par"].append(await h.block(n, lambda: in_flight(shipped, args.runs, args.inflight)))
            out["eseq"].append(await h.block(n, lambda: sequential(eager, args.runs)))
            out["epar"].append(await h.block(n, lambda: in_flight(eager, args.runs, args.inflight)))
    finally:
        for b in opened:
            await b.close()
    return out


async def admit_due(manifest: Path, due: int, at_ms: int | None = None) -> None:
    """``due`` runs ``scheduled`` and due at ``at_ms`` (now by default), with the workflow's run ids and digest
    (``telo schedule``'s way)."""
    from telo.kinds.controllers import load_application
    from telo.operations.starting import schedule

    app = load_application(manifest)
    await app.start()
    try:
        now = app.clock.now_ms() if at_ms is None else at_ms
        gate = asyncio.Semaphore(8)

        async def one() -> None:
            async with gate:
                done = await schedule(app, "flow", {"start": 0}, None, now)
                assert done.scheduled, done

        await asyncio.gather(*(one() for _ in range(due)))
    finally:
        await app.close()


ANY_ROW = sql.SQL("true")


def count_completed(conn: psycopg.Connection[Any], table: str, column: str, status: str,
                    where: sql.Composable = ANY_ROW) -> int:
    row = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE {} = %s AND {}")
                       .format(sql.Identifier(*table.split(".")), sql.Identifier(column), where), (status,)).fetchone()
    assert row is not None
    return int(row[0])


def stop_processes(procs: list[subprocess.Popen[Any]], grace: float = 5.0) -> None:
    """Terminate, then kill, the given processes that are still running (only ours, by their pid)."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        if p.poll() is None:
            p.kill()
            p.wait()


def start_process(cmd: list[str], log: Path, **kwargs: Any) -> subprocess.Popen[Any]:
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stderr=err, **kwargs)
    CHILDREN.append(proc)
    return proc


def wait_drained(procs: list[subprocess.Popen[Any]], logs: list[Path], done: Callable[[], bool], timeout: float,
                 what: str) -> float:
    """Poll ``done`` until true; the time it became true. Raises if the processes all exit or time runs out."""
    deadline = time.monotonic() + timeout
    while not done():
        if all(p.poll() is not None for p in procs) and not done():
            tails = [(log.read_text().strip().splitlines() or ["no output"])[-1][:200] for log in logs]
            raise RuntimeError(f"{what}: every process exited before the runs were drained "
                               f"(exit codes {[p.returncode for p in procs]}; last lines {tails})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not drained within {timeout:.0f} s")
        time.sleep(0.025)
    return time.perf_counter()


async def telo_workers(h: Harness, args: argparse.Namespace, url: str, prefix: str, d: Path,
                       n: int, extra: list[str]) -> dict[str, Any]:
    """``args.due`` due runs drained by ``n`` ``telo worker`` processes."""
    from telo.journal.postgres_schema import names_for

    table = f"{prefix}_w{n}"
    base = d / f"workers-{n}"
    manifest = app_dir(base, url, table)
    (base / "benchfns.py").write_text(durable.FUNCTIONS + LEDGER)
    ledger = base / "ledger"
    ledger.mkdir()
    # Due a minute from now (`--until-idle` workers wait for runs due within a minute), then — once admitted —
    # brought forward to a moment the workers will all have started by: the drain is what they do once up.
    await admit_due(manifest, args.due, int(time.time() * 1000) + 60_000)
    h.stale()
    runs_table = names_for(table, None).runs
    conn = h.meter.conn
    lead_ms = 2_000 + 500 * n
    env = dict(os.environ, BENCH_LEDGER=str(ledger))
    cmd = [str(TELO), "worker", str(manifest), "--until-idle", "--interval", args.interval, *extra]
    procs: list[subprocess.Popen[Any]] = []
    logs = [base / f"worker-{i}.log" for i in range(n)]

    async def drain() -> dict[str, Any]:
        t0 = time.perf_counter()
        conn.execute(sql.SQL("UPDATE {} SET due_at = %s").format(sql.Identifier(runs_table)),
                     (int(time.time() * 1000) + lead_ms,))
        try:
            for log in logs:
                procs.append(start_process(cmd, log, env=env, cwd=base, stdout=subprocess.DEVNULL))
            t1 = wait_drained(procs, logs, lambda: count_completed(conn, runs_table, "status", "completed") >= args.due,
                              args.worker_timeout, f"{n} telo worker(s)")
            for p in procs:  # --until-idle: each exits once nothing is due or running
                p.wait(timeout=60)
        finally:
            stop_processes(procs)
        lines = {p.name: [line.split() for line in p.read_text().splitlines()] for p in ledger.iterdir()}
        counts = {pid: sum(1 for kind, _ in mine if kind == "run") for pid, mine in lines.items()}
        first = min(float(at) for mine in lines.values() for kind, at in mine if kind == "start")
        last = max(float(at) for mine in lines.values() for kind, at in mine if kind == "run")
        runs_by_worker = [counts.get(str(p.pid), 0) for p in procs]
        # The drain's rate: from the first run's first step to the last run's last step, so that the processes'
        # start-up (loading Python and the manifest, the same for every count of workers) does not dilute it.
        return {"rate": args.due * STEPS / (last - first), "drain_s": last - first, "elapsed_s": t1 - t0,
                "exit_codes": [p.returncode for p in procs],
                "runs_by_worker": runs_by_worker, "shares": [c / args.due for c in runs_by_worker]}

    return await h.block(args.due * STEPS, drain, client="children")


# --- DBOS ----------------------------------------------------------------------------------------------------

class Peer:
    """``benchmarks/peers/dbos_pg_bench.py --role app``: one phase per command, one JSON line per phase."""

    def __init__(self, py: str, url: str, args: argparse.Namespace, log: Path) -> None:
        self.proc = start_process([py, str(HERE / "peers" / "dbos_pg_bench.py"), "--url", url, "--runs",
                                   str(args.runs), "--steps", str(STEPS), "--inflight", str(args.inflight),
                                   "--concurrency", str(args.concurrency), "--poll", str(interval_s(args))],
                                  log, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        self.timeout = args.peer_timeout
        self.log = log

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line)
        self.lines.put(None)

    def reply(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"DBOS: no answer within {self.timeout:.0f} s") from None
            if line is None:
                tail = (self.log.read_text().strip().splitlines() or ["no output"])[-1]
                raise RuntimeError(f"DBOS exited ({self.proc.wait()}): {tail[:200]}")
            if line.startswith("{"):
                out: dict[str, Any] = json.loads(line)
                if "error" in out:
                    raise RuntimeError(f"DBOS: {out['error']}")
                return out

    def command(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.reply()

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            if self.proc.poll() is None:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
        stop_processes([self.proc])


def interval_s(args: argparse.Namespace) -> float:
    """``--interval`` (a CEL duration like telo worker's) in seconds, for DBOS's queue polling interval."""
    text = args.interval.strip()
    for unit, scale in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0), ("m", 60.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    return float(text)


async def dbos(h: Harness, args: argparse.Namespace, url: str, dbname: str, d: Path) -> dict[str, Any]:
    py, why = durable.peers_python()
    if py is None:
        return {"error": why}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    dbos_url = urllib.parse.urlsplit(url)._replace(path="/" + dbname).geturl()
    base = d / "dbos"
    base.mkdir()
    out: dict[str, Any] = {}
    say("running DBOS ...")
    peer = Peer(py, dbos_url, args, base / "app.log")
    try:
        peer.reply()  # launched and warmed up
        h.stale()
        n = args.runs * STEPS

        def phase(name: str) -> Callable[[], Awaitable[dict[str, Any]]]:
            async def body() -> dict[str, Any]:
                got = peer.command(name)
                return {"rate": got["steps_per_s"], "client_cpu_s": got["cpu_s"]}
            return body

        out["seq"] = await h.block(n, phase("sequential"))
        out["par"] = await h.block(n, phase("in_flight"))
        with psycopg.connect(dbos_url, autocommit=True) as conn:
            for workers in (1, 2):
                name = f"bench{workers}"
                peer.command(f"enqueue {name} {args.due}")
                h.stale()
                out[f"queue{workers}"] = await h.block(args.due * STEPS, dbos_drain(py, dbos_url, name, workers,
                                                                                    conn, args, base),
                                                       client="children")
    finally:
        peer.close()
    return out


def dbos_drain(py: str, url: str, name: str, n: int, conn: psycopg.Connection[Any], args: argparse.Namespace,
               base: Path) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def body() -> dict[str, Any]:
        procs: list[subprocess.Popen[Any]] = []
        logs = [base / f"{name}-w{i}.log" for i in range(n)]
        t0 = time.perf_counter()
        try:
            for i, log in enumerate(logs):
                procs.append(start_process([py, str(HERE / "peers" / "dbos_pg_bench.py"), "--url", url, "--role",
                                            "worker", "--queue", name, "--executor", f"{name}-w{i}"],
                                           log, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True))
            where = sql.SQL("queue_name = {}").format(sql.Literal(name))
            t1 = wait_drained(procs, logs, lambda: count_completed(conn, "dbos.workflow_status", "status", "SUCCESS",
                                                             where) >= args.due, args.worker_timeout,
                              f"DBOS queue, {n} process(es)")
            for p in procs:  # the queue is drained: each process shuts DBOS down once its stdin closes
                assert p.stdin is not None
                p.stdin.close()
            for p in procs:
                p.wait(timeout=60)
        finally:
            stop_processes(procs)
        rows = conn.execute("SELECT executor_id, count(*) FROM dbos.workflow_status WHERE queue_name = %s "
                            "GROUP BY executor_id", (name,)).fetchall()
        by = dict(rows)
        counts = [int(by.get(f"{name}-w{i}", 0)) for i in range(n)]
        span = conn.execute("SELECT min(started_at_epoch_ms), max(updated_at) FROM dbos.workflow_status "
                            "WHERE queue_name = %s", (name,)).fetchone()
        assert span is not None
        drain_s = (span[1] - span[0]) / 1000  # first dequeue to last completion, as telo's drain (telo_workers)
        return {"rate": args.due * STEPS / drain_s, "drain_s": drain_s, "elapsed_s": t1 - t0,
                "launch_rate": args.due * STEPS / (t1 - t0), "runs_by_worker": counts,
                "shares": [c / args.due for c in counts]}
    return body


# --- the run -------------------------------------------------------------------------------------------------

async def measure(args: argparse.Namespace, url: str, postmaster: int | None, d: Path,
                  own_cluster: bool) -> dict[str, Any]:
    prefix = "tb" + secrets.token_hex(4)  # fresh tables (and database) on a shared server
    dbname = "dbos_bench" if own_cluster else f"dbos_bench_{prefix}"
    meter = Meter(url, postmaster)
    raw = Raw(url, f"{prefix}_raw")
    h = Harness(raw, meter, max(100, args.runs * STEPS // 3))
    result: dict[str, Any] = {"prefix": prefix}
    dbos_created = False
    try:
        result["telo"] = await telo_rounds(h, args, url, prefix, d)
        if not args.skip_workers:
            helptext = subprocess.run([str(TELO), "worker", "--help"], capture_output=True, text=True).stdout
            extra = ["--concurrency", str(args.concurrency)] if "--concurrency" in helptext else []
            result["worker_options"] = ["--interval", args.interval, *extra]
            drains: dict[int, list[dict[str, Any]]] = {n: [] for n in args.workers}
            for r in range(args.drain_rounds):  # interleaved, so that the machine's mood hits every count alike
                for n in args.workers:
                    say(f"draining {args.due} due runs with {n} telo worker(s), round {r + 1}/{args.drain_rounds} ...")
                    drains[n].append(await telo_workers(h, args, url, f"{prefix}r{r}", d / f"round-{r}", n, extra))
            # a count's figure is its median round (the shares and CPU that round's)
            result["workers"] = {n: sorted(rs, key=lambda x: x["rate"])[len(rs) // 2] for n, rs in drains.items()}
            result["drain_rates"] = {n: [x["rate"] for x in rs] for n, rs in drains.items()}
        if args.peers:
            dbos_created = True
            try:
                result["dbos"] = await dbos(h, args, url, dbname, d)
            except RuntimeError as exc:
                result["dbos"] = {"error": str(exc)}
        result["raws"] = h.raws
    finally:
        raw.close()
        meter.close()
        if not own_cluster:
            drop_own(url, prefix, dbname if dbos_created else None)
    return result


def drop_own(url: str, prefix: str, dbname: str | None) -> None:
    """On a shared server: drop this run's tables (named ``<prefix>_…``) and DBOS database, nothing else."""
    with contextlib.suppress(psycopg.Error), psycopg.connect(url, autocommit=True) as conn:
        tables = [t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                                             "AND starts_with(tablename, %s)", (prefix + "_",)).fetchall()]
        for t in tables:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(t)))
        if dbname is not None:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))


def server_info(url: str) -> dict[str, str]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('server_version'), current_setting('fsync'), "
                           "current_setting('synchronous_commit'), current_setting('wal_sync_method'), "
                           "current_setting('max_connections')").fetchone()
    assert row is not None
    return dict(zip(("version", "fsync", "synchronous_commit", "wal_sync_method", "max_connections"), row,
                    strict=True))


def git_commit() -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + (" + uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else "")


# --- report ------------------------------------------------------------------------------------------------

def med(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return float(statistics.median(vals)) if vals else None


def summary(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """A figure over its rounds: the median of each field."""
    keys = ("rate", "ratio", "raw", "client_us", "server_us", "cores", "xacts", "wal")
    return {k: med([b.get(k) for b in blocks]) for k in keys}


def fmt(x: float | None, spec: str = ",.0f", suffix: str = "") -> str:
    return "n/a" if x is None else f"{x:{spec}}{suffix}"


def report(args: argparse.Namespace, info: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
    """The rows and verdicts (printed unless --json)."""
    t = {k: summary(v) for k, v in res["telo"].items()}
    workers = {n: w for n, w in res.get("workers", {}).items()}
    db = res.get("dbos", {})
    db_ok = "error" not in db and bool(db)
    raw = summary(res["raws"])

    def vs(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
        return a["ratio"] / b["ratio"] if a and b and a.get("ratio") and b.get("ratio") else None

    rows: list[dict[str, Any]] = [{"name": "raw one-row commits (1 per step; per commit)", **raw, "ratio": 1.0}]
    names = {"seq": f"telo sequential ({args.runs} x {STEPS} steps)",
             "par": f"telo {args.inflight} in flight ({args.runs} x {STEPS} steps)",
             "eseq": "telo sequential, durability: eager", "epar": f"telo {args.inflight} in flight, durability: eager"}
    peer_of = {"seq": "seq", "par": "par", "eseq": "seq", "epar": "par"}
    for k, name in names.items():
        rows.append({"name": name, **t[k], "vs_dbos": vs(t[k], db.get(peer_of[k]) if db_ok else None)})
    for n, w in workers.items():
        rows.append({"name": f"telo worker x {n} ({args.due} due runs)", **w,
                     "vs_dbos": vs(w, db.get(f"queue{n}")) if db_ok else None})
    if db_ok:
        rows.append({"name": "DBOS sequential", **db["seq"], "vs_dbos": 1.0})
        rows.append({"name": f"DBOS {args.inflight} in flight (async workflows)", **db["par"], "vs_dbos": 1.0})
        for n in (1, 2):
            rows.append({"name": f"DBOS queue x {n} process(es) ({args.due} workflows)", **db[f"queue{n}"],
                         "vs_dbos": 1.0})
    w1, w2, w4 = workers.get(1), workers.get(2), workers.get(4)
    two_over_one = w2["rate"] / w1["rate"] if w1 and w2 else None
    seq_db = t["seq"]["ratio"] / db["seq"]["ratio"] if db_ok else None
    par_db = t["par"]["ratio"] / db["par"]["ratio"] if db_ok else None
    no_peer = "n/a (run with --peers)" if not args.peers else f"n/a (DBOS: {db.get('error', 'not measured')})"
    verdicts = [
        (f"{args.inflight} in flight >= 1.0x raw", t["par"]["ratio"] >= 1.0, f"{t['par']['ratio']:.2f}x"),
        (f"{args.inflight} in flight >= 5x DBOS {args.inflight} in flight", None if par_db is None else par_db >= 5,
         no_peer if par_db is None else f"{par_db:.2f}x"),
        (f"{args.inflight} in flight <= 0.3 write transactions per step", t["par"]["xacts"] <= 0.3,
         f"{t['par']['xacts']:.2f}"),
        ("sequential >= 0.5x raw", t["seq"]["ratio"] >= 0.5, f"{t['seq']['ratio']:.2f}x"),
        ("sequential >= 3x DBOS sequential", None if seq_db is None else seq_db >= 3,
         no_peer if seq_db is None else f"{seq_db:.2f}x"),
        (f"{args.due} due runs: 2 workers >= 1.7x one worker", None if two_over_one is None else two_over_one >= 1.7,
         "n/a (needs --workers with 1 and 2)" if two_over_one is None else f"{two_over_one:.2f}x"),
        ("each of 4 workers runs 15-35 % of the runs",
         None if w4 is None else all(0.15 <= s <= 0.35 for s in w4["shares"]),
         "n/a (needs --workers with 4)" if w4 is None else " ".join(f"{s:.0%}" for s in w4["shares"])),
    ]
    return {"info": info, "rows": rows, "verdicts": [{"target": a, "met": b, "measured": c} for a, b, c in verdicts],
            "two_workers_over_one": two_over_one, "workers": workers, "dbos": db, "telo_rounds": res["telo"],
            "raws": res["raws"], "worker_options": res.get("worker_options"),
            "drain_rates": res.get("drain_rates", {})}


def print_report(args: argparse.Namespace, rep: dict[str, Any]) -> None:
    info = rep["info"]
    cols = ("steps/s", "vs raw", "vs DBOS", "client CPU µs/step", "server CPU µs/step", "cores busy",
            "write xacts/step", "WAL B/step")
    cells = [[r["name"], fmt(r["rate"]), fmt(r.get("ratio"), ".2f", "x"), fmt(r.get("vs_dbos"), ".2f", "x")
              if r.get("vs_dbos") is not None else "-", fmt(r.get("client_us")), fmt(r.get("server_us")),
              fmt(r.get("cores"), ".2f"), fmt(r.get("xacts"), ".2f"), fmt(r.get("wal"))] for r in rep["rows"]]
    w = max(len(c[0]) for c in cells)
    widths = [max(len(col), *(len(c[i + 1]) for c in cells)) for i, col in enumerate(cols)]
    print()
    print(f"| {'workload':<{w}} | " + " | ".join(f"{col:>{wd}}" for col, wd in zip(cols, widths, strict=True)) + " |")
    print(f"|{'-' * (w + 2)}|" + "|".join("-" * (wd + 1) + ":" for wd in widths) + "|")
    for c in cells:
        print(f"| {c[0]:<{w}} | " + " | ".join(f"{x:>{wd}}" for x, wd in zip(c[1:], widths, strict=True)) + " |")
    print()
    raws = [r["rate"] for r in rep["raws"]]
    print(f"raw: {len(raws)} measurements of {max(100, args.runs * STEPS // 3)} commits, before and after every "
          f"block (range {min(raws):,.0f}..{max(raws):,.0f}/s); a block's vs raw is over the mean of the two beside "
          f"it; telo figures: median of {args.rounds} rounds; vs DBOS: (figure / raw beside it) over (DBOS's / raw "
          f"beside it); client CPU: this process (telo sequential and in flight), the DBOS process (DBOS sequential "
          f"and in flight), the worker processes' whole lives, their start-up included (drains: so it overstates "
          f"their CPU per step); drains: steps/s from the first run's first step to the last run's last step (telo), "
          f"first dequeue to last completion (DBOS), the processes' start-up excluded; cores busy: "
          f"(client + server CPU) / elapsed")
    for n, wk in rep["workers"].items():
        print(f"{n} telo worker(s): drained in {wk['drain_s']:.2f} s (first step to last; launched "
              f"{2 + 0.5 * n:.1f} s before the runs came due), runs per worker {wk['runs_by_worker']} "
              f"({' '.join(f'{s:.0%}' for s in wk['shares'])}), exit codes {wk['exit_codes']}")
    if rep["two_workers_over_one"] is not None:
        print(f"2 workers / 1 worker: {rep['two_workers_over_one']:.2f}x (medians of "
              f"{args.drain_rounds} drains each: " + "; ".join(
                  f"{n}: " + ", ".join(f"{x:,.0f}" for x in xs) for n, xs in rep["drain_rates"].items()) + " steps/s)")
    if rep["worker_options"] is not None:
        print(f"telo worker options: --until-idle {' '.join(rep['worker_options'])}")
    db = rep["dbos"]
    if db and "error" in db:
        print(f"DBOS: n/a ({db['error']})")
    elif db:
        for n in (1, 2):
            q = db[f"queue{n}"]
            print(f"DBOS queue, {n} process(es): drained in {q['drain_s']:.2f} s (first dequeue to last completion; "
                  f"{q['elapsed_s']:.2f} s from launching the processes), workflows per process {q['runs_by_worker']}"
                  f" (worker_concurrency {args.concurrency}, polling_interval_sec {interval_s(args)})")
    print(f"load average {info['load_end']:.2f} at end")
    print()
    for v in rep["verdicts"]:
        state = "met" if v["met"] else "NOT met" if v["met"] is not None else "not measured"
        print(f"target {v['target']}: {v['measured']} — {state}")


def main() -> int:
    global SAY_TO_STDERR
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="an existing server (postgresql://…); default: a throwaway cluster of our own")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of telo's four in-process figures")
    ap.add_argument("--runs", type=int, default=300, help="workflow runs per in-process figure")
    ap.add_argument("--inflight", type=int, default=100, help="concurrency limit of the in-flight figures")
    ap.add_argument("--due", type=int, default=600, help="due runs drained by the workers (and DBOS's queue)")
    ap.add_argument("--workers", default="1,2,4", help="worker process counts to drain the due runs with")
    ap.add_argument("--drain-rounds", type=int, default=3, help="drains per worker count (the median is reported)")
    ap.add_argument("--concurrency", type=int, default=50,
                    help="telo worker --concurrency (when it has that option) and the DBOS queue's worker_concurrency")
    ap.add_argument("--interval", default="100ms",
                    help="telo worker --interval, and the DBOS queue's polling interval (a duration: 100ms, 1s)")
    ap.add_argument("--skip-workers", action="store_true", help="do not measure the workers")
    ap.add_argument("--peers", action="store_true", help="also measure DBOS 3.4 (in benchmarks/.peers-venv)")
    ap.add_argument("--peer-timeout", type=float, default=600.0)
    ap.add_argument("--worker-timeout", type=float, default=600.0, help="seconds a drain may take")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    ap.add_argument("--dir", default=str(REPO), help="where the cluster and the apps go (not tmpfs)")
    args = ap.parse_args()
    args.workers = [int(x) for x in args.workers.split(",") if x.strip()]
    SAY_TO_STDERR = args.json
    sys.path.insert(0, str(REPO / "src"))
    # SIGTERM unwinds like Ctrl-C: the cluster is stopped and the worker processes are killed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))

    fs = fs_type(Path(args.dir).resolve())
    if fs in ("tmpfs", "ramfs"):
        raise SystemExit(f"{args.dir} is on {fs}: its fsync is free; pass --dir on a disk")
    load_start = os.getloadavg()[0]
    started = datetime.datetime.now(datetime.UTC)
    with tempfile.TemporaryDirectory(prefix=".bench-postgres-", dir=args.dir) as tmp:
        d = Path(tmp)
        cluster = None if args.url else Cluster(d)
        try:
            if cluster is not None:
                url = cluster.start()
                postmaster: int | None = cluster.postmaster()
            else:
                url = args.url
                with psycopg.connect(url, autocommit=True) as conn:
                    postmaster = postmaster_of(conn)
            info: dict[str, Any] = {
                "date": started.strftime("%Y-%m-%d %H:%M UTC"), "commit": git_commit(),
                "python": platform.python_version(), "cores": os.cpu_count(), "load_start": load_start,
                "server": "own throwaway cluster" if cluster else "--url (shared: xid and WAL deltas may include "
                          "other users')", "files": f"{d} ({fs})", **server_info(url),
                "server_cpu": "n/a (the server's processes are not visible here)" if postmaster is None else
                              f"/proc of postmaster {postmaster} and its children",
            }
            say(f"python {info['python']}, PostgreSQL {info['version']} (fsync={info['fsync']}, synchronous_commit="
                f"{info['synchronous_commit']}, wal_sync_method={info['wal_sync_method']}), {info['cores']} cores, "
                f"load average {load_start:.2f} at start; {info['server']}; files under {info['files']}; commit "
                f"{info['commit']}, {info['date']}")
            res = asyncio.run(measure(args, url, postmaster, d, cluster is not None))
        finally:
            stop_processes(CHILDREN)
            if cluster is not None:
                cluster.stop()
    info["load_end"] = os.getloadavg()[0]
    rep = report(args, info, res)
    if args.json:
        print(json.dumps(rep, indent=1, default=str))
    else:
        print_report(args, rep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
