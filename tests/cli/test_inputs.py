"""``--input k=v`` gives text unless the workflow it reaches declares a type (issue 15; docs/cli.md "Inputs").

Through the real ``telo`` command on the shared test manifest (tests/cli/support.py), whose workflow declares
``inputType`` (``gate``/``fail`` booleans, ``sleep`` a number, ``id`` a string) and whose target passes the
command line's inputs straight through. Before, every value that parsed as JSON was JSON: ``--input id=007``
started a run of id ``7`` (here: failed evaluating ``'flow:' + inputs.id``), and nothing checked the inputs
before a run was admitted.
"""

from __future__ import annotations

from tests.cli.support import Env


def _inputs(env: Env, run: str) -> object:
    return env.json("runs", "show", run)["inputs"]


def test_an_id_that_looks_like_a_number_stays_text(sqlite_env: Env) -> None:
    env = sqlite_env
    out = env.telo("run", "m.yaml", "--input", "id=007", "--input", "gate=false", "--input", "sleep=0")
    assert out.returncode == 0, out.stderr
    assert "run 'flow:007': completed" in out.stdout, out.stdout
    assert _inputs(env, "flow:007") == {"id": "007", "gate": False, "fail": False, "sleep": 0}


def test_text_the_declared_type_refuses_is_a_usage_error_and_nothing_is_admitted(sqlite_env: Env) -> None:
    env = sqlite_env
    out = env.telo("run", "m.yaml", "--input", "id=a", "--input", "sleep=soon")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "error: ERR_INPUT_INVALID: --input sleep='soon': flow's inputType declares 'sleep' as number" \
        in out.stderr, out.stderr
    assert "--input-json sleep=" in out.stderr and "Traceback" not in out.stderr
    # JSON of the wrong type passes the command line and is refused where the workflow is dispatched
    out = env.telo("run", "m.yaml", "--input", "id=b", "--input-json", 'gate="yes"')
    assert out.returncode == 2 and "ERR_INPUT_INVALID" in out.stderr and "/gate" in out.stderr, out.stderr
    assert env.json("runs", "list")["runs"] == [] and env.ledger() == []


def test_schedule_types_and_checks_by_the_workflows_input_type(sqlite_env: Env) -> None:
    env = sqlite_env
    refused = env.telo("schedule", "m.yaml", "flow", "--after", "1h", "--input", "id=s1", "--input", "gate=maybe")
    assert refused.returncode == 2 and "flow's inputType declares 'gate' as boolean" in refused.stderr
    refused = env.telo("schedule", "m.yaml", "flow", "--after", "1h", "--input", "id=s1", "--input-json", "fail=1")
    assert refused.returncode == 2 and "ERR_INPUT_INVALID" in refused.stderr and "/fail" in refused.stderr
    assert env.json("runs", "list")["runs"] == []
    ok = env.telo("schedule", "m.yaml", "flow", "--after", "1h", "--input", "id=s2", "--input", "gate=true",
                  "--run-id", "flow:s2")
    assert ok.returncode == 0, ok.stderr
    assert _inputs(env, "flow:s2") == {"id": "s2", "gate": True, "fail": False, "sleep": 0}  # defaults filled
