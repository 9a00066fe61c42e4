"""A step's ``timeout`` and a retry's ``initialDelay``/``maxDelay`` take a number of ms or a duration string
(issue 15): ``timeout: 1s`` is ``timeout: 1000`` for the schema, the engine and the static checks alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from telo.analysis import _last_backoff_ms
from telo.engine.steps import InvokeStep, compile_steps
from telo.manifest import ManifestLoadError, load_manifest
from telo.specs.durations import duration_ms

from .engine.fakes import DictCompiler

APP = """\
kind: Telo.Application
metadata: {{name: T}}
imports: {{Run: run, Timer: timer}}
---
kind: Timer.Delay
metadata: {{name: sleepy}}
---
kind: Run.Sequence
metadata: {{name: s}}
steps:
  - name: call
    invoke: !ref sleepy
    inputs: {{duration: 1ms}}
    timeout: {timeout}
    retry: {{attempts: 2, initialDelay: {initial}, maxDelay: {max}}}
"""


@pytest.mark.parametrize(("value", "ms"), [
    (1000, 1000.0), (2.5, 2.5), ("1s", 1000.0), ("200ms", 200.0), ("1.5s", 1500.0), ("2m", 120_000.0),
    ("1h", 3_600_000.0), ("1d", 86_400_000.0), ("0ms", 0.0),
])
def test_a_duration_reads_as_milliseconds(value: object, ms: float) -> None:
    assert duration_ms(value) == ms


@pytest.mark.parametrize("value", ["1 sec", "1sec", "1m30s", "", "ms", "-1s", True, None, [1]])
def test_anything_else_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="milliseconds or a duration"):
        duration_ms(value)


def _compiled(timeout: object, initial: object) -> InvokeStep:
    raw = [{"name": "call", "invoke": "t", "timeout": timeout, "retry": {"attempts": 2, "initialDelay": initial,
                                                                       "maxDelay": "1m"}}]
    [step] = compile_steps(raw, DictCompiler(), where="test")
    assert isinstance(step, InvokeStep)
    return step


def test_the_engine_reads_both_spellings_alike() -> None:
    by_text, by_number = _compiled("1s", "200ms"), _compiled(1000, 200)
    assert by_text.timeout_ms == by_number.timeout_ms == 1000.0
    assert by_text.retry == by_number.retry
    assert by_text.retry is not None and by_text.retry.initial_delay_ms == 200.0
    assert by_text.retry.max_delay_ms == 60_000.0


def test_the_static_checks_read_both_spellings_alike() -> None:
    assert _last_backoff_ms({"attempts": 3, "initialDelay": "10s", "maxDelay": "1m"}) == 40_000.0
    assert _last_backoff_ms({"attempts": 3, "initialDelay": 10_000, "maxDelay": 60_000}) == 40_000.0
    assert _last_backoff_ms({"attempts": 3, "initialDelay": "soon"}) is None


def test_a_manifest_with_duration_strings_loads(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(APP.format(timeout="1s", initial="200ms", max="32s"))
    load_manifest(path, env={})  # no diagnostics: it would raise


def test_a_malformed_duration_is_a_load_error_at_its_position(tmp_path: Path) -> None:
    text = APP.format(timeout="1 sec", initial="200ms", max="32 s")
    path = tmp_path / "app.yaml"
    path.write_text(text)
    with pytest.raises(ManifestLoadError) as info:
        load_manifest(path, env={})
    found = sorted((d.code, d.pos.line, d.pos.column) for d in info.value.diagnostics if d.severity == "error")
    lines = text.splitlines()
    timeout_line = next(i for i, line in enumerate(lines, 1) if "timeout:" in line)
    retry_line = next(i for i, line in enumerate(lines, 1) if "retry:" in line)
    assert found == [
        ("ERR_MANIFEST_VALIDATION_FAILED", timeout_line, lines[timeout_line - 1].index("1 sec") + 1),
        ("ERR_MANIFEST_VALIDATION_FAILED", retry_line, lines[retry_line - 1].index("32 s") + 1),
    ]
    messages = [d.message for d in info.value.diagnostics]
    assert any('"1 sec" is not a duration' in m and "number of milliseconds" in m for m in messages)
