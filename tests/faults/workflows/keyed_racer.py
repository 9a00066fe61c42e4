"""One racer of tests/faults/test_queue_admission_race.py: loads the manifest (its journal from the environment),
then, at the wall-clock times the plan gives — the same for every racer, so their starts meet — starts runs of the
keyed queues' workflows through the Python API, then waits for the runs it was answered with. Prints one line per
start, ``ANSWER {json}``: the run it names, whether it started one, its status, or the error code.

    python keyed_racer.py MANIFEST RACER PLAN_JSON

PLAN_JSON: ``[{"at": epoch s, "workflow": name, "ids": [run input ids…], "wait": bool, "tenant"?: key}, …]`` (the
key, ``inputs.tenant``, is ``acme`` unless the step names another).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import telo
from telo.errors import TeloError


def main() -> None:
    manifest, racer, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    answers: list[dict[str, Any]] = []
    refs: list[tuple[dict[str, Any], Any]] = []
    with telo.load(manifest) as app:
        print(f"LOADED {racer} {time.time():.3f}", flush=True)
        for step in plan:
            while time.time() < step["at"]:
                time.sleep(0.0005)
            for ident in step["ids"]:
                answer: dict[str, Any] = {"workflow": step["workflow"], "id": ident, "at": round(time.time(), 3)}
                try:
                    ref = app.start(step["workflow"], {"id": ident, "tenant": step.get("tenant", "acme")})
                    answer.update(run=ref.run_id, started=ref.started, status=ref.status)
                    if step["wait"] and ref.status != "skipped":
                        refs.append((answer, ref))
                except TeloError as exc:
                    answer.update(error=str(exc.code), run=exc.data.get("run"), message=exc.message)
                answer["took"] = round(time.time() - answer["at"], 3)
                answers.append(answer)
        for answer, ref in refs:
            answer["final"] = app.wait(ref, timeout="30s").status
    for answer in answers:
        print("ANSWER " + json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
