"""The one redaction of journal URLs (telo.journal.redact): passwords hidden, everything else kept."""

from __future__ import annotations

import pytest

from telo.journal.redact import redact


@pytest.mark.parametrize(("given", "shown"), [
    ("postgresql://ada:s3cret@db.example:5432/journal", "postgresql://ada:***@db.example:5432/journal"),
    ("postgres://ada:s3cret@db.example/journal?sslmode=require", "postgres://ada:***@db.example/journal?sslmode=require"),
    # percent-encoded specials: the encoded text is the secret too
    ("postgresql://ada:p%40ss%2Fw%3Ard@db/j", "postgresql://ada:***@db/j"),
    # unencoded '@', '/', ':' in a password: hidden up to the last '@', never cut short
    ("postgresql://ada:p@ss/w:rd@db/j", "postgresql://ada:***@db/j"),
    ("postgresql://:onlypw@db/j", "postgresql://:***@db/j"),
    ("postgresql://ada:@db/j", "postgresql://ada:***@db/j"),
    ("postgresql://db.example/j?user=ada&password=s3cret&sslmode=require",
     "postgresql://db.example/j?user=ada&password=***&sslmode=require"),
    ("host=db.example user=ada password=s3cret dbname=j", "host=db.example user=ada password=*** dbname=j"),
    ("host=db password = 'it\\'s a secret' dbname=j", "host=db password = *** dbname=j"),
    ("host=db sslpassword=k3y", "host=db sslpassword=***"),
    ("password='unterminated and more", "password=***"),
])
def test_passwords_are_hidden(given: str, shown: str) -> None:
    assert redact(given) == shown
    assert redact(shown) == shown  # idempotent: a label redacted twice reads the same


@pytest.mark.parametrize("kept", [
    "postgresql://ada@db.example/journal",  # a user without a password
    "postgresql://db.example:5432/journal",  # no userinfo at all
    "postgresql:///journal?host=/var/run/postgresql",
    "journal.db", "/srv/telo/orders.db", "sqlite:///srv/telo/a:b@c/orders.db", ".telo/journal/",
    "file:///srv/journal", "memory:", "C:\\telo\\j.db",
    "the PostgreSQL journal could not open: FATAL: password authentication failed for user \"ada\"",
])
def test_everything_else_is_kept(kept: str) -> None:
    assert redact(kept) == kept


def test_urls_inside_a_message_are_redacted() -> None:
    message = ('end of string reached when looking for matching "]" in IPv6 host address in URI: '
               '"postgresql://ada:hunter2@[bad/db"; also postgres://bob:pw2@h/x and host=h password=pw3')
    shown = redact(message)
    assert "hunter2" not in shown and "pw2" not in shown and "pw3" not in shown
    assert 'URI: "postgresql://ada:***@[bad/db"' in shown and "postgres://bob:***@h/x" in shown
