"""A worker process for the claim-race tests: sweeps due runs, claims them and "executes" them exclusively.

    python -m tests.crash.child_worker --kind file --location /tmp/j --name w1 --ledger L --stop-file S

Each round: ``due_runs(now, 10)``, then ``claim`` each in turn; for a run it won and that is not already
settled (a due list can be stale), it executes:

1. ledger ``start <run> <holder> <monotonic ns> <wall ms>``, and ``start <run>`` on stdout (a kill the
   parent sends after reading that lands mid-execution, with the claim held);
2. sleeps ``--work-ms``, then renews the claim through its fencing token, which must succeed: no one may
   take a live claim;
3. ledger ``end <run> <holder> <monotonic ns> <wall ms>``, then ``complete`` (which releases the claim),
   and ``completed <run>`` on stdout.

The ledger is one file shared by all workers, each line one ``O_APPEND`` write followed by ``fsync``, so
a line is in it before the worker goes on, whatever kills it next. ``CLOCK_MONOTONIC`` is system-wide, so
the parent can order lines of different processes by their times. A refused renewal is written as
``lost …`` and ends the worker with status 2. The worker stops when ``--stop-file`` exists or its parent
is gone.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

if __package__ in (None, ""):  # run by path: make `tests` importable from the repo root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from telo.clock import SYSTEM_CLOCK
from telo.journal.claims import Fence, Holder
from telo.journal.model import Outcome
from tests.crash.support import StoreSpec


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Ledger:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, word: str, run: str, holder: str) -> None:
        line = f"{word} {run} {holder} {time.monotonic_ns()} {SYSTEM_CLOCK.now_ms()}\n".encode()
        os.write(self._fd, line)  # one small O_APPEND write: lines of different workers never interleave
        os.fsync(self._fd)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    StoreSpec.add_arguments(parser)
    parser.add_argument("--name", required=True)
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--ttl-ms", type=int, default=2_000)
    parser.add_argument("--work-ms", type=float, default=3.0)
    ns = parser.parse_args(argv)

    parent = os.getppid()
    holder = Holder.for_this_process(ns.name).to_text()
    ledger = Ledger(ns.ledger)
    store = StoreSpec.from_args(ns).open()
    _say(f"ready {holder}")
    while not os.path.exists(ns.stop_file) and os.getppid() == parent:
        due = store.due_runs(SYSTEM_CLOCK.now_ms(), 10)
        if not due:
            time.sleep(0.005)
            continue
        for run in due:
            token = store.claim(run, holder, ns.ttl_ms, SYSTEM_CLOCK.now_ms())
            if token is None:
                continue
            record = store.read_run(run)
            if record is None or record.terminal:  # settled after our due_runs: nothing to execute
                store.release(run, holder)
                continue
            ledger.write("start", run, holder)
            _say(f"start {run}")
            time.sleep(ns.work_ms / 1000)
            if not store.renew(run, Fence(holder, token), ns.ttl_ms, SYSTEM_CLOCK.now_ms()):
                ledger.write("lost", run, holder)
                sys.stderr.write(f"child_worker: renewal of {run!r} by {holder} refused: {store.read_run(run)!r}\n")
                os._exit(2)
            ledger.write("end", run, holder)
            store.complete(run, Outcome.completed({"by": ns.name}))
            _say(f"completed {run}")
    store.close()


if __name__ == "__main__":
    main()
