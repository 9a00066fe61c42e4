"""Manifest problems `telo run` and `telo check` meet before anything runs are reported as manifest problems
(a user's walk-through, 2026-12-04): a Python function that does not import exited 1 with no position, as if
something had run and failed; a manifest that is not UTF-8 text was "ERR_MANIFEST_NOT_FOUND: cannot read
manifest" with Python's codec message."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.test_run_outcome import app
from tests.process import telo


def test_a_function_that_does_not_import_is_a_manifest_problem_at_its_position(tmp_path: Path) -> None:
    manifest = app(tmp_path)
    manifest.write_text(manifest.read_text().replace("function: steps:work", "function: steps:workk"))
    out = telo("run", str(manifest), "--input", "id=a", "--input", "mode=ok", "--progress", "off", cwd=tmp_path)
    assert out.returncode == 3, (out.returncode, out.stderr)  # refused before anything ran, as an invalid manifest
    assert re.search(r"flow\.yaml:\d+:\d+: ERR_PYTHON_FUNCTION_NOT_FOUND .*has no 'workk'.*did you mean 'work'",
                     out.stderr), out.stderr
    assert "nothing was run" in out.stderr and "a line the step prints" not in out.stdout + out.stderr


def test_a_manifest_that_is_not_utf8_says_where(tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_bytes(b"kind: Telo.Application\nmetadata: { name: \xb8x }\n")
    checked = telo("check", str(manifest), cwd=tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    said = checked.stdout + checked.stderr
    assert "bad.yaml:2:19: ERR_MANIFEST_YAML the manifest is not UTF-8 text: byte 0xb8" in said, said
    assert "codec" not in said and "ERR_MANIFEST_NOT_FOUND" not in said
    ran = telo("run", str(manifest), cwd=tmp_path)
    assert ran.returncode == 3 and "ERR_MANIFEST_YAML" in ran.stdout + ran.stderr, ran.stdout + ran.stderr


def test_a_manifest_with_crlf_line_ends_reads_as_before(tmp_path: Path) -> None:
    # (the manifest is now read as bytes, to say where a non-UTF-8 byte is: its line ends still read as \n)
    manifest = tmp_path / "crlf.yaml"
    manifest.write_bytes(b"kind: Telo.Application\r\nmetadata: { name: Crlf }\r\ntargets: [ nope ]\r\n")
    checked = telo("check", str(manifest), cwd=tmp_path)
    said = checked.stdout + checked.stderr
    assert "crlf.yaml:3:" in said and "\r" not in said, repr(said)
