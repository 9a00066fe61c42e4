"""Compact one run in a child process (so a test can SIGKILL compaction at its ``after-snapshot-append`` point).

    python -m tests.crash.workflows.compact_child --kind sqlite --location /tmp/j.db --run R

Prints ``compacted <snapshot seq>`` when :func:`telo.journal.eventlog.compact` returned.
"""

from __future__ import annotations

import argparse

from telo.journal import eventlog
from tests.crash.support import StoreSpec


def main() -> None:
    parser = argparse.ArgumentParser()
    StoreSpec.add_arguments(parser)
    parser.add_argument("--run", required=True)
    ns = parser.parse_args()
    store = StoreSpec.from_args(ns).open()
    try:
        snapshot = eventlog.compact(store, ns.run)
        print(f"compacted {snapshot.seq}", flush=True)
    finally:
        store.close()


if __name__ == "__main__":
    main()
