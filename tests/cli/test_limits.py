"""Issue 15: the real ``telo`` on an alias bomb and on values nested past the value domain's limit — one
clear error each (the domain's ERR_TYPED_FRAME_UNENCODABLE for depth), never a traceback; at the limit, works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(240)

_BOMB = "kind: Telo.Application\nmetadata: { name: Bomb }\nx:\n  a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"  {n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)
_DEEP_JSON = "[" * 600 + "]" * 600

_MODULE = '''
import os
def make(inputs):
    v = "leaf"
    for _ in range(int(os.environ["DEPTH"])):
        v = [v]
    return v
'''
_MANIFEST = """kind: Telo.Application
metadata: { name: Deep }
imports: { Local: durable-local, Durable: durable, Journal: durable-journal-sqlite, Py: python }
targets:
  - name: start
    invoke: !ref wf
    inputs: { id: !cel "inputs.id" }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Py.Function
metadata: { name: make }
function: deepmod:make
---
kind: Durable.Await
metadata: { name: gate }
token: !cel "'gate:' + inputs.id"
---
kind: Local.Workflow
metadata: { name: wf }
journal: !ref runs
runId: !cel "'deep:' + inputs.id"
inputs: { id: !cel "inputs.id" }
steps:
  - name: make
    invoke: !ref make
  - name: gate
    invoke: !ref gate
    inputs: { id: !cel "inputs.id" }
"""

_LITERAL = """kind: Telo.Application
metadata: { name: Literal }
imports: { Run: run, Local: durable-local, Journal: durable-journal-sqlite }
targets:
  - { name: start, invoke: !ref wf, inputs: {} }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./lit.db
---
kind: Run.Value
metadata: { name: echo }
value: !cel "inputs"
---
kind: Local.Workflow
metadata: { name: wf }
journal: !ref runs
runId: lit
steps:
  - name: a
    invoke: !ref echo
    inputs: { x: %s }
"""


def telo(cwd: Path, *args: str, depth: int = 3) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEPTH": str(depth)}
    return subprocess.run([sys.executable, "-m", "telo", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def one_error(out: subprocess.CompletedProcess[str], code: str) -> str:
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "Traceback" not in text and "RecursionError" not in text, text[-2000:]
    assert text.count(code) == 1, text[-2000:]
    return text


def test_check_refuses_an_alias_bomb_with_one_diagnostic(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(_BOMB)
    text = one_error(telo(tmp_path, "check", "bomb.yaml"), "ERR_MANIFEST_YAML")
    assert "bomb.yaml:9:" in text and "100000 nodes" in text and "hint:" in text


def test_check_refuses_a_too_deep_literal_at_its_position(tmp_path: Path) -> None:
    (tmp_path / "deep.yaml").write_text("kind: Telo.Application\nmetadata: { name: Deep }\nx: " + _DEEP_JSON)
    text = one_error(telo(tmp_path, "check", "deep.yaml"), "ERR_TYPED_FRAME_UNENCODABLE")
    assert "deep.yaml:3:203:" in text and "deeper than 200" in text and "hint:" in text


def test_a_literal_at_the_manifest_limit_runs(tmp_path: Path) -> None:
    """A step's `inputs` literal as deep as a manifest may nest (200 levels, counting the document's own): it
    used to pass `telo check` and end `telo run` in a RecursionError of the runtime's compiler past ~300."""
    literal = "[" * 195 + "1" + "]" * 195  # document 1, steps 2, step 3, inputs 4, x 5 … 199 levels
    (tmp_path / "lit.yaml").write_text(_LITERAL % literal)
    assert telo(tmp_path, "check", "lit.yaml").returncode == 0
    ran = telo(tmp_path, "run", "lit.yaml")
    assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr[-2000:]
    result = telo(tmp_path, "result", "lit", "--journal", "lit.db", "--json")
    value, levels = json.loads(result.stdout)["result"]["steps"]["a"]["result"]["x"], 0
    while isinstance(value, list):
        value, levels = value[0], levels + 1
    assert (levels, value) == (195, 1)


def test_frame_encode_input_and_payload_refuse_too_deep_json(tmp_path: Path) -> None:
    (tmp_path / "deepmod.py").write_text(_MODULE)
    (tmp_path / "m.yaml").write_text(_MANIFEST)
    code = "ERR_TYPED_FRAME_UNENCODABLE"
    assert "the value is nested deeper than 499" in one_error(telo(tmp_path, "frame", "encode", _DEEP_JSON), code)
    deeper = "[" * 5000 + "]" * 5000  # past json.loads's own recursion limit too
    assert "the value is nested deeper" in one_error(telo(tmp_path, "frame", "encode", deeper), code)
    ran = telo(tmp_path, "run", "m.yaml", "--input", "id=a", "--input-json", f"x={_DEEP_JSON}")
    assert "--input-json x is nested deeper than 499" in one_error(ran, code)
    delivered = telo(tmp_path, "deliver", "gate:a", "--journal", "runs.db", "--payload", _DEEP_JSON)
    assert "--payload is nested deeper than 499" in one_error(delivered, code)
    at_limit = "[" * 499 + "]" * 499
    assert telo(tmp_path, "frame", "encode", at_limit).stdout.strip() == at_limit


def test_a_step_result_near_the_limit_completes_and_replays(tmp_path: Path) -> None:
    """The step returns 496 nested lists: the run's result ({steps: {make: {result: …}}}) is then exactly at
    the limit of 499. It used to fail the run with INTERNAL_ERROR: RecursionError (telo.values.replica)."""
    (tmp_path / "deepmod.py").write_text(_MODULE)
    (tmp_path / "m.yaml").write_text(_MANIFEST)
    first = telo(tmp_path, "run", "m.yaml", "--input", "id=a", depth=496)
    assert first.returncode == 4 and "Traceback" not in first.stderr, first.stderr[-2000:]  # parked at the gate
    # the delivery resumes the run: `make` replays from the journal (DEPTH=1 would return another value)
    assert telo(tmp_path, "deliver", "gate:a", "--journal", "runs.db", "--payload", "{}").returncode == 0
    second = telo(tmp_path, "run", "m.yaml", "--input", "id=a", depth=1)
    assert second.returncode == 0, (second.stdout + second.stderr)[-2000:]
    result = telo(tmp_path, "result", "deep:a", "--journal", "runs.db", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    value = json.loads(result.stdout)["result"]["steps"]["make"]["result"]
    levels = 0
    while isinstance(value, list):
        value, levels = value[0], levels + 1
    assert (levels, value) == (496, "leaf")
