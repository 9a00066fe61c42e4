"""`telo stream read RUN NAME` refuses a stream a settled run never wrote (exit 3, "wrote no stream"), but the
same command with --follow prints nothing and exits 0 — a typo in a script that follows a finished run's
stream reads as "the stream was empty". (And the refusal is exit 3, "telo refused", where docs/cli.md's exit 1
is "the thing … is not there", as `telo events get` answers an unpublished event.)"""
from __future__ import annotations

from pathlib import Path

from tests.cli.test_messages_cli import MANIFEST, telo


def test_follow_of_a_stream_a_settled_run_never_wrote_fails_like_a_plain_read(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(MANIFEST)
    telo(tmp_path, "run", "app.yaml")
    j = ("--journal", "runs.db")
    telo(tmp_path, "send", "inbox:1", "cmds", "--payload", "1", *j)
    telo(tmp_path, "send", "inbox:1", "cmds", "--payload", "2", *j)
    assert telo(tmp_path, "worker", "app.yaml", "--until-idle").returncode == 0
    plain = telo(tmp_path, "stream", "read", "inbox:1", "outt", *j)
    follow = telo(tmp_path, "stream", "read", "inbox:1", "outt", "--follow", *j)
    assert plain.returncode != 0 and "wrote no stream" in plain.stderr
    assert follow.returncode == plain.returncode, (plain.returncode, follow.returncode, follow.stderr)
