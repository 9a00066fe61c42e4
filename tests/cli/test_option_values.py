"""A malformed duration or time given to an option is a usage error — exit 2, with the catalogue's code and a
hint — on every command that takes one (a user's walk-through, 2026-12-04: ``telo worker --interval xx`` printed a
``ValueError`` traceback, ``--interval -1s`` was taken, and ``telo result --wait abc``, ``telo events get --wait
zz`` and ``telo schedule --after xx`` exited 3, which docs/cli.md keeps for what telo refuses, not for a
malformed option)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_run_outcome import app
from tests.process import telo


@pytest.mark.parametrize(("args", "says"), [
    (["worker", "{m}", "--interval", "xx", "--until-idle"], "--interval: not a duration: 'xx'"),
    (["worker", "{m}", "--interval", "-1s", "--until-idle"], "--interval: '-1s' cannot be negative"),
    (["worker", "{m}", "--interval", "0s", "--until-idle"], "--interval: '0s' must be more than zero"),
    (["result", "flow:a", "--manifest", "{m}", "--wait", "abc"], "--wait: not a duration: 'abc'"),
    (["events", "get", "flow:a", "x", "--manifest", "{m}", "--wait", "zz"], "--wait: not a duration: 'zz'"),
    (["stream", "read", "flow:a", "s", "--follow", "--manifest", "{m}", "--wait", "-3s"],
     "--wait: '-3s' cannot be negative"),
    (["schedule", "{m}", "flow", "--after", "xx", "--input", "id=s", "--input", "mode=ok"],
     "--after: not a duration: 'xx'"),
    (["schedule", "{m}", "flow", "--at", "yesterday", "--input", "id=s", "--input", "mode=ok"],
     "--at: 'yesterday' is neither epoch milliseconds nor a timestamp"),
])
def test_a_malformed_duration_or_time_is_a_usage_error(tmp_path: Path, args: list[str], says: str) -> None:
    manifest = str(app(tmp_path))
    assert telo("run", manifest, "--input", "id=a", "--input", "mode=ok", "--progress", "off",
                cwd=tmp_path).returncode == 0
    out = telo(*[a.format(m=manifest) for a in args], cwd=tmp_path)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    assert says in out.stderr and "\nhint: " in out.stderr, out.stderr


@pytest.mark.parametrize(("args", "code", "exit_code"), [
    (["status", "flow:a", "--journal", "ftp://x"], "ERR_JOURNAL_URL_INVALID", 3),  # (it said "no journal at")
    (["status", "flow:a", "--journal", "postgresq://ada:pw@db/j"], "ERR_JOURNAL_URL_INVALID", 3),
    (["status", "flow:a", "--manifest", "nothere.yaml"], "ERR_MANIFEST_NOT_FOUND", 2),  # (click's line, no code)
    (["run", "nothere.yaml"], "ERR_MANIFEST_NOT_FOUND", 2),
    (["status", "flow:a"], "ERR_JOURNAL_REQUIRED", 2),  # (click's "Error: name a journal ...", no code)
])
def test_a_journal_or_manifest_that_cannot_be_named_says_so_with_its_code(tmp_path: Path, args: list[str], code: str,
                                                                         exit_code: int) -> None:
    out = telo(*args, cwd=tmp_path)
    assert out.returncode == exit_code, (out.returncode, out.stderr)
    assert out.stderr.startswith(f"error: {code}: ") and "\nhint: " in out.stderr, out.stderr
    assert "pw" not in out.stderr  # (a mistyped URL's password stays out of the message)


def test_an_empty_payload_is_not_json(tmp_path: Path) -> None:
    # (it was read as null, and the Await's schema then said "None is not of type 'object'")
    manifest = str(app(tmp_path))
    assert telo("run", manifest, "--input", "id=p", "--input", "mode=park", "--progress", "off",
                cwd=tmp_path).returncode == 4
    for args in (["deliver", "gate:p"], ["send", "flow:p", "go"]):
        out = telo(*args, "--manifest", manifest, "--payload", "", cwd=tmp_path)
        assert out.returncode == 3, (args, out.returncode, out.stderr)
        assert out.stderr.startswith("error: ERR_DURABLE_PAYLOAD_INVALID: --payload is empty, which is not JSON")
    delivered = telo("deliver", "gate:p", "--manifest", manifest, cwd=tmp_path)  # (no --payload: null, as documented)
    assert delivered.returncode == 0, delivered.stderr
