"""`telo stream read RUN NAME` refused a stream a settled run never wrote with exit 3, while the same command with
--follow printed nothing and exited 0 — a typo in a script following a finished run's stream read as "the stream
was empty" (issue 18 review, bug 6). Both exit 1 now, docs/cli.md's "not there" (ERR_DURABLE_STREAM_NOT_FOUND), as
`telo events get` answers an unpublished event."""
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
    assert follow.returncode == plain.returncode == 1, (plain.returncode, follow.returncode, follow.stderr)
    assert "ERR_DURABLE_STREAM_NOT_FOUND" in follow.stderr and "telo stream list" in follow.stderr
