"""The dashboard's security points of issue 15 ("The operator console"): a CSRF token bound to the server, no
foreign or ``null`` Origin on a POST, no password of a journal URL shown anywhere, and the access token read
from a file or the environment rather than argv. HTTP tests drive the real Starlette app (TestClient) or the
real ``telo ui`` server."""

from __future__ import annotations

import json
import re
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

pytest.importorskip("starlette", reason="the dashboard needs the `ui` extra")

from starlette.testclient import TestClient

from telo.journal.sqlite import SqliteStore
from telo.server.app import create_app, run_url
from telo.server.security import CSRF_COOKIE, CSRF_FIELD
from tests.pg_support import pg_url
from tests.process import telo
from tests.server.support import parked_run, start_ui, stop

BASE = "http://127.0.0.1:8765"
FORGED = "attacker-chosen-0123456789abcdefABCDEF"  # shaped like a real session id: only the HMAC refuses it


def page_token(client: TestClient, url: str = "/runs/x") -> str:
    """The CSRF token the run page's forms carry (the page also sets the session cookie it is bound to)."""
    found = re.search(rf'name="{CSRF_FIELD}" value="([^"]+)"', client.get(url).text)
    assert found is not None
    return found.group(1)


# --- CSRF ------------------------------------------------------------------------------------------------


def test_an_attacker_chosen_cookie_and_field_pair_is_refused(store: SqliteStore) -> None:
    """Observed (issue 15): with a plain double-submit cookie, a POST carrying `Origin: null` and a cookie the
    attacker planted, repeated in the form field, was accepted."""
    parked_run(store, "flow:x", "go:x")
    url = run_url("flow:x", "/cancel", api=True)
    with TestClient(create_app(store), base_url=BASE) as c:
        c.cookies.set(CSRF_COOKIE, FORGED)
        for headers in ({"origin": "null"}, {}):
            as_form = c.post(url, data={CSRF_FIELD: FORGED}, headers=headers, follow_redirects=False)
            as_json = c.post(url, json={CSRF_FIELD: FORGED}, headers=headers)
            as_header = c.post(url, json={}, headers={**headers, "x-csrf-token": FORGED})
            for r in (as_form, as_json, as_header):
                assert r.status_code == 403 and r.json()["error"]["code"] == "ERR_UI_CSRF", headers
    assert store.read_run("flow:x").status == "parked"  # type: ignore[union-attr]


def test_the_token_is_bound_to_the_server_that_issued_it(store: SqliteStore) -> None:
    parked_run(store, "x", "go:x")
    url = run_url("x", "/cancel", api=True)
    with TestClient(create_app(store), base_url=BASE) as first:
        token = page_token(first)
        session = first.cookies.get(CSRF_COOKIE)
        assert session and token != session  # the cookie holds a session id, never the token
        # Another server (a restart: a new secret) derives another token from the same session id.
        with TestClient(create_app(store), base_url=BASE) as other:
            other.cookies.set(CSRF_COOKIE, session)
            assert other.post(url, json={CSRF_FIELD: token}).status_code == 403
            assert page_token(other) != token
        # ... and a token is good only with the session it was derived from.
        with TestClient(first.app, base_url=BASE) as stranger:
            stranger.get("/runs")
            assert stranger.post(url, json={CSRF_FIELD: token}).status_code == 403
        assert first.post(url, json={CSRF_FIELD: token}).status_code == 200  # no Origin (curl): the token counts
    assert store.read_run("x").status == "cancelled"  # type: ignore[union-attr]


def test_the_csrf_session_cookie_is_httponly_and_strict(store: SqliteStore) -> None:
    with TestClient(create_app(store), base_url=BASE) as c:
        cookie = c.get("/runs").headers["set-cookie"]
        assert cookie.startswith(f"{CSRF_COOKIE}=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert "set-cookie" not in c.get("/runs").headers  # issued once per session, not on every page


@pytest.mark.parametrize("origin", ["null", "http://evil.example", "http://127.0.0.1:9999", "https://127.0.0.1:8765"])
def test_a_post_with_a_foreign_or_null_origin_is_refused_even_with_a_valid_token(store: SqliteStore,
                                                                                 origin: str) -> None:
    parked_run(store, "x", "go:x")
    url = run_url("x", "/cancel", api=True)
    with TestClient(create_app(store), base_url=BASE) as c:
        token = page_token(c)
        r = c.post(url, data={CSRF_FIELD: token}, headers={"origin": origin}, follow_redirects=False)
        assert r.status_code == 403 and r.json()["error"]["code"] == "ERR_UI_CSRF"
        assert c.post(url, json={}, headers={"origin": origin, "x-csrf-token": token}).status_code == 403
        same = c.post(url, data={CSRF_FIELD: token}, headers={"origin": BASE}, follow_redirects=False)
        assert same.status_code == 303 and "level=ok" in same.headers["location"]
    with TestClient(create_app(store, token="t0ken"), base_url=BASE) as bearer:
        auth = {"authorization": "Bearer t0ken"}
        resume = run_url("x", "/resume", api=True)
        assert bearer.post(resume, json={}, headers={**auth, "origin": origin}).status_code == 403
        assert bearer.post(resume, json={}, headers=auth).status_code == 409  # let through: the run settled


# --- no password shown -----------------------------------------------------------------------------------


def test_the_page_header_never_shows_the_journal_password(store: SqliteStore) -> None:
    label = "postgresql://ada:s3cr%40t@db.example:5432/journal"
    with TestClient(create_app(store, journal_label=label), base_url=BASE) as c:
        for page in (c.get("/runs"), c.get(run_url("nope"))):
            assert "s3cr" not in page.text and "postgresql://ada:***@db.example:5432/journal" in page.text


@pytest.mark.parametrize("journal", ["postgresql://ada:hunter2@[bad/db", "postgresq://ada:hunter2@db/j",
                                     "host=127.0.0.1 password=hunter2 junk"])
def test_cli_errors_never_print_the_journal_password(tmp_path: Path, journal: str) -> None:
    for args in (["ui", "--journal", journal], ["runs", "list", "--journal", journal]):
        out = telo(*args, cwd=tmp_path, timeout=30)
        assert out.returncode != 0 and "ERR_" in out.stderr, out.stderr
        assert "hunter2" not in out.stderr + out.stdout, out.stderr


@pytest.fixture
def pg_journal_with_password() -> Iterator[str]:
    """A fresh database on the test server, named by a URL that carries a password (the test server trusts
    local connections, so any password is accepted)."""
    import psycopg

    base = urlsplit(pg_url())
    name = f"t_ui_{secrets.token_hex(4)}"
    with psycopg.connect(pg_url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    user = base.username or "postgres"
    host = base.hostname or "127.0.0.1"
    netloc = f"{user}:hunter2@{host}" + (f":{base.port}" if base.port else "")
    try:
        yield urlunsplit((base.scheme, netloc, f"/{name}", "", ""))
    finally:
        with psycopg.connect(pg_url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
def test_telo_ui_never_shows_the_postgres_password(pg_journal_with_password: str, tmp_path: Path) -> None:
    journal = pg_journal_with_password
    proc, url, line = start_ui(journal, tmp_path)
    try:
        shown = journal.replace(":hunter2@", ":***@")
        assert "hunter2" not in line and f"serving {shown} at" in line
        with urllib.request.urlopen(url + "runs", timeout=5) as r:
            page = r.read().decode()
        assert "hunter2" not in page and shown in page
        with urllib.request.urlopen(url + "api/runs", timeout=5) as r:
            assert "hunter2" not in r.read().decode()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url + "api/runs/nope", timeout=5)
        assert "hunter2" not in missing.value.read().decode()
    finally:
        stop(proc)
        assert proc.stderr is not None
        assert "hunter2" not in proc.stderr.read()


# --- the access token off argv ---------------------------------------------------------------------------


def _status(url: str, token: str | None) -> int:
    request = urllib.request.Request(url + "api/runs", headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_token_can_come_from_a_file_or_the_environment(tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    SqliteStore(str(journal)).close()
    token_file = tmp_path / "ui-token"
    token_file.write_text("fr0m-a-file\n")  # the trailing newline an editor or `echo` leaves is not the token
    proc, url, line = start_ui(journal, tmp_path, "--token-file", str(token_file))
    try:
        assert "(token required)" in line and "fr0m-a-file" not in line
        assert _status(url, None) == 401 and _status(url, "fr0m-a-file") == 200
    finally:
        stop(proc)
    # --token-file beats TELO_UI_TOKEN: the flag is the more specific choice.
    proc, url, _ = start_ui(journal, tmp_path, "--token-file", str(token_file), env={"TELO_UI_TOKEN": "fr0m-env"})
    try:
        assert _status(url, "fr0m-env") == 401 and _status(url, "fr0m-a-file") == 200
    finally:
        stop(proc)
    proc, url, _ = start_ui(journal, tmp_path, env={"TELO_UI_TOKEN": "fr0m-env"})
    try:
        assert _status(url, None) == 401 and _status(url, "fr0m-env") == 200
    finally:
        stop(proc)


def test_a_bad_token_source_is_refused_before_serving(tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    SqliteStore(str(journal)).close()
    token_file = tmp_path / "ui-token"
    token_file.write_text("t0ken")
    both = telo("ui", "--journal", str(journal), "--token", "t0ken", "--token-file", str(token_file), cwd=tmp_path,
                timeout=30)
    assert both.returncode == 2 and "--token-file" in both.stderr and "t0ken" not in both.stderr
    (tmp_path / "empty").write_text("\n")
    empty = telo("ui", "--journal", str(journal), "--token-file", str(tmp_path / "empty"), cwd=tmp_path, timeout=30)
    assert empty.returncode == 2 and "empty" in empty.stderr
    missing = telo("ui", "--journal", str(journal), "--token-file", str(tmp_path / "nope"), cwd=tmp_path, timeout=30)
    assert missing.returncode == 2 and "nope" in missing.stderr


def test_the_json_api_body_has_no_token_field_left_over(store: SqliteStore) -> None:
    """The CSRF field of a JSON body is the check's, not the action's: a deliver still reads its own fields."""
    parked_run(store, "d", "go:d")
    with TestClient(create_app(store), base_url=BASE) as c:
        token = page_token(c, run_url("d"))
        r = c.post("/api/deliver", content=json.dumps({CSRF_FIELD: token, "token": "go:d", "payload": 1}),
                   headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.json() == {"delivered": True, "run": "d"}
