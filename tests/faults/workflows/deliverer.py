"""A deliverer process for the racing-deliveries test: once the ``--go`` file exists, deliver a payload naming
this process to ``approve:0`` … ``approve:<tokens - 1>`` (telo.durable.waits.deliver, the path every delivery
takes), and write ``{token: payload}`` for every delivery it was told succeeded to ``--out``."""

from __future__ import annotations

import argparse
import json
import os
import time

from telo.durable.waits import deliver
from tests.crash.support import StoreSpec


def main() -> None:
    parser = argparse.ArgumentParser()
    StoreSpec.add_arguments(parser)
    parser.add_argument("--name", required=True)
    parser.add_argument("--tokens", type=int, required=True)
    parser.add_argument("--go", required=True)
    parser.add_argument("--out", required=True)
    ns = parser.parse_args()
    won: dict[str, str] = {}
    with StoreSpec.from_args(ns).open() as store:
        while not os.path.exists(ns.go):
            time.sleep(0.001)
        for i in range(ns.tokens):
            payload = {"by": ns.name}
            if deliver(store, f"approve:{i}", payload)["delivered"]:
                won[f"approve:{i}"] = json.dumps(payload, separators=(",", ":"))
    with open(ns.out, "w") as f:
        json.dump(won, f)


if __name__ == "__main__":
    main()
