"""A child process for the kill -9 tests: opens a store and works through the op plan until it is killed.

    python -m tests.crash.child_appender --kind sqlite --location /tmp/j.db --start 37 --name appender-4

Protocol on stdout, one line per event, each flushed the moment the call it reports has RETURNED (so the
parent may hold the store to every line it read, however abruptly the child dies afterwards):

- ``ready`` once the store is open (before admitting: a kill after it may land in admission);
- ``admitted <run>`` per run after :meth:`admit` returned (a restart admits again: nothing happens);
- ``ack <path> <seq>`` after op ``i`` appended ``path`` and the store returned the STORED entry with ``seq``;
- ``done <kind> <run>`` after a park, unpark or claim op;
- ``finished`` after op ``--stop - 1`` when ``--stop`` is given (the only clean exit).

Op lines arrive for ops ``--start``, ``--start + 1``, … in order. Any deviation the child can see itself
(a re-append that returns a different record, a refused claim although every earlier holder is dead) is
written to stderr and ends the child with status 2, which the parent reports as a failure.
"""

from __future__ import annotations

import argparse
import os
import sys

if __package__ in (None, ""):  # run by path: make `tests` importable from the repo root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from telo.clock import SYSTEM_CLOCK
from telo.journal.claims import Fence, Holder
from telo.journal.model import Admission
from tests.crash.plan import RUNS, plan
from tests.crash.support import StoreSpec

CLAIM_TTL_MS = 30_000


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _fail(message: str) -> None:
    sys.stderr.write(f"child_appender: {message}\n")
    sys.stderr.flush()
    os._exit(2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    StoreSpec.add_arguments(parser)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--stop", type=int, default=None)
    parser.add_argument("--name", default="appender")
    ns = parser.parse_args(argv)

    holder = Holder.for_this_process(ns.name).to_text()
    store = StoreSpec.from_args(ns).open()
    _say("ready")
    for run in RUNS:
        store.admit(Admission.of(run, workflow="crash"))
        _say(f"admitted {run}")
    tokens: dict[str, int] = {}
    for run in RUNS:
        # Every earlier appender is dead and reaped, so its claim must be taken over at once (claims.py).
        token = store.claim(run, holder, CLAIM_TTL_MS, SYSTEM_CLOCK.now_ms())
        if token is None:
            _fail(f"claim of {run!r} by {holder} refused at start; record: {store.read_run(run)!r}")
        tokens[run] = token

    i = ns.start
    chunk = 512
    ops = plan(i + chunk)
    while ns.stop is None or i < ns.stop:
        if i >= len(ops):
            ops = plan(i + chunk)
        op = ops[i]
        if op.kind == "append":
            assert op.entry is not None
            stored = store.append(op.run, op.entry)
            if not stored.same_record(op.entry) or stored.seq is None:
                _fail(f"op {i}: append of {op.entry!r} to {op.run!r} returned {stored!r}")
            _say(f"ack {stored.path} {stored.seq}")
        elif op.kind == "park":
            assert op.parked is not None
            store.park(op.run, op.parked)
            _say(f"done park {op.run}")
        elif op.kind == "unpark":
            # False is fine: a killed predecessor's unpark may already have landed.
            store.unpark(op.run)
            _say(f"done unpark {op.run}")
        else:
            # (a park released the claim: then it is taken again, under a new token)
            renewed = store.renew(op.run, Fence(holder, tokens[op.run]), CLAIM_TTL_MS, SYSTEM_CLOCK.now_ms())
            if not renewed:
                token = store.claim(op.run, holder, CLAIM_TTL_MS, SYSTEM_CLOCK.now_ms())
                if token is None:
                    _fail(f"op {i}: claim renewal of {op.run!r} by {holder} refused: {store.read_run(op.run)!r}")
                tokens[op.run] = token
            _say(f"done claim {op.run}")
        i += 1
    store.close()
    _say("finished")


if __name__ == "__main__":
    main()
