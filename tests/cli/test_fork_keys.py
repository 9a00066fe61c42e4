"""``telo fork --keep-keys`` (issue 15, "The CLI tells the truth"; event-log spec §2, §6) on every journal: the
workflow's effect writes the idempotency key it received to the ledger, so the test reads off which keys the
fork's re-executed steps were handed — the original's with ``--keep-keys``, the fork's own without — by a
worker, another process than the one that made the fork."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from tests.cli.support import Env
from tests.cli.test_time_travel import checkpoint_seq

pytestmark = pytest.mark.timeout(240)


def test_a_fork_with_keep_keys_re_executes_under_the_originals_keys(env: Env) -> None:
    env.run("k")
    seq = checkpoint_seq(env, "flow:k", "steps/first")

    kept = env.j("fork", "flow:k", str(seq), "--run-id", "flow:k-kept", "--keep-keys", "--json")
    assert kept.returncode == 0, kept.stderr
    assert json.loads(kept.stdout) == {"run": "flow:k-kept", "forkedFrom": "flow:k", "checkpoint": seq,
                                       "status": "running", "keepsKeysOf": "flow:k"}
    assert "hint: the steps after the checkpoint execute again under flow:k's idempotency keys (flow:k/steps/…), " \
        "not new ones: a system that deduplicates by key answers them from its record of flow:k's effects" \
        in kept.stderr
    own = env.j("fork", "flow:k", str(seq), "--run-id", "flow:k-own")
    assert own.returncode == 0, own.stderr
    assert "under the new run's idempotency keys (flow:k-own/steps/…)" in own.stderr
    assert "fork with --keep-keys to execute them under the original's keys instead" in own.stderr
    assert "keepsKeysOf" not in own.stdout

    # A fork of the kept fork (from its copied checkpoint), keeping keys: the ROOT's keys, not flow:k-kept's.
    deeper = env.json("fork", "flow:k-kept", str(checkpoint_seq(env, "flow:k-kept", "steps/first")),
                      "--run-id", "flow:k-kept2", "--keep-keys")
    assert deeper["keepsKeysOf"] == "flow:k" and deeper["forkedFrom"] == "flow:k-kept"

    env.telo("worker", "m.yaml", "--until-idle", "--interval", "200ms", check=True)
    for run in ("flow:k-kept", "flow:k-own", "flow:k-kept2"):
        assert env.json("runs", "show", run)["status"] == "completed"
    ledger = Counter(env.ledger())
    assert ledger == {"flow:k/steps/first": 1,  # before the checkpoint: copied, never re-executed
                      "flow:k/steps/second": 3, "flow:k/steps/third": 3,  # the original, kept, kept2
                      "flow:k-own/steps/second": 1, "flow:k-own/steps/third": 1}

    shown = env.json("runs", "show", "flow:k-kept")
    assert (shown["forkedFrom"], shown["forkCheckpoint"], shown["keepsKeysOf"]) == ("flow:k", seq, "flow:k")
    plain = env.json("runs", "show", "flow:k-own")
    assert plain["forkedFrom"] == "flow:k" and "keepsKeysOf" not in plain
    assert "forkedFrom" not in env.json("runs", "show", "flow:k")
    human = env.j("runs", "show", "flow:k-kept2")
    assert re.search(r"keepsKeysOf: flow:k$", human.stdout, re.M) and re.search(r"forkedFrom: flow:k-kept$",
                                                                                human.stdout, re.M)
    # The journal shows the keys the effects were handed, and the decision in the fork's @forked record.
    entries = env.json("runs", "journal", "flow:k-kept")["entries"]
    assert {e["idempotencyKey"] for e in entries if e["path"] == "steps/third"} == {"flow:k/steps/third"}
    assert next(e for e in entries if e["path"] == "@forked")["value"] == {"from": "flow:k", "checkpoint": seq,
                                                                          "keys": "flow:k"}
