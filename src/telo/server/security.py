"""The dashboard's access rules, applied before any page or API endpoint runs (docs/dashboard.md "Security").

- **Loopback by default.** Binding a host that is not loopback requires a token (:func:`check_bind`).
- **Token.** With a token, every request must carry it: ``Authorization: Bearer <token>``, or ``?token=<token>``
  once — answered with a session cookie (HttpOnly, SameSite=Strict) and, for a GET, a redirect to the same URL
  without the token, so it does not stay in the address bar or the history.
- **Host header.** Without a token, only loopback host names are answered: a page on another site that
  rebinds its DNS name to 127.0.0.1 reaches the port, but its requests carry its own host name (DNS rebinding).
- **CSRF.** A POST whose ``Origin`` is present and not the dashboard's own (``null`` included) is refused. Else
  it is accepted when it carries the bearer header (a browser never adds it by itself), an ``Origin`` equal to
  the dashboard's own, ``Sec-Fetch-Site: same-origin``, or the CSRF token in the form's ``csrf`` field or an
  ``X-CSRF-Token`` header — :func:`csrf_ok`. The token is ``HMAC(server secret, session id)``
  (:func:`csrf_token`): the session id is a random value in an HttpOnly, SameSite=Strict cookie, the secret is
  drawn afresh by every server (:func:`telo.server.app.create_app`). A plain double-submit cookie would accept
  any cookie an attacker manages to plant (a sibling host, plain HTTP) together with the same value in the form;
  bound to the secret, a token can only come from a page this server rendered for that session.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import re
from http.cookies import SimpleCookie
from typing import Final
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from telo.clock import token_urlsafe
from telo.errors import Code, TeloError

SESSION_COOKIE: Final = "telo_ui_session"
CSRF_COOKIE: Final = "telo_ui_csrf"  # the CSRF session id; the token is derived from it, never stored in it
CSRF_FIELD: Final = "csrf"
CSRF_HEADER: Final = "x-csrf-token"

# The pages load their script and style from /static only: no inline code, nothing from elsewhere, no framing.
SECURITY_HEADERS: Final = (
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
     b"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    # same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" even with a same-origin
    # form, which the CSRF rule refuses (it cannot be told from a foreign one); a URL still never leaves as a
    # Referer.
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name, IPv6 with or without brackets) is this machine only."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve a non-loopback address without a token: the dashboard can deliver, cancel and resume."""
    if not is_loopback(host) and not token:
        raise TeloError(
            Code.UI_TOKEN_REQUIRED,
            f"binding {host!r} would expose the dashboard beyond this machine without a token",
            hint="pass --token-file PATH or set TELO_UI_TOKEN (or --token), or bind 127.0.0.1",
        )


# What a session id issued by :class:`Guard` looks like (token_urlsafe(24)); any other cookie value is replaced.
_SESSION_ID: Final = re.compile(r"[A-Za-z0-9_-]{32,64}")


def csrf_token(secret: bytes, session_id: str) -> str:
    """The CSRF token of a session: only a holder of this server's secret can compute it, so a cookie an attacker
    chose is worthless without the page the server rendered for it."""
    return hmac.new(secret, b"telo-ui-csrf:" + session_id.encode(), hashlib.sha256).hexdigest()


def session_value(token: str) -> str:
    """The session cookie's value: derived from the token, so the cookie never holds the token itself."""
    return hmac.new(token.encode(), b"telo-ui-session", hashlib.sha256).hexdigest()


def _host_name(host_header: str) -> str:
    if host_header.startswith("["):
        return host_header[: host_header.find("]") + 1]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class Guard:
    """ASGI middleware enforcing the module docstring's rules, and routing on the RAW path.

    Routing on the raw path keeps a run id's percent-encoded ``/`` inside its own segment: decoded, a run
    named ``a/journal`` would be indistinguishable from the journal of run ``a``. Endpoints decode their path
    parameters themselves (:func:`telo.server.operate.run_param`)."""

    def __init__(self, app: ASGIApp, *, token: str | None, csrf_secret: bytes) -> None:
        self.app = app
        self.token = token or None
        self.session = session_value(token) if token else None
        self.csrf_secret = csrf_secret

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = scope.get("raw_path")
        if isinstance(raw, bytes | bytearray) and raw:
            scope = {**scope, "path": bytes(raw).decode("latin-1")}
        request = Request(scope)
        cookies_out: list[str] = []
        if self.token is None:
            if not is_loopback(_host_name(request.headers.get("host", ""))):
                await _deny(scope, send, 421, Code.UI_HOST_REFUSED,
                            "this dashboard answers loopback host names only (it has no token)")
                return
        else:
            via = self._authenticated(request)
            if via is None:
                await _deny(scope, send, 401, Code.UI_TOKEN_REQUIRED,
                            "this dashboard requires its token: send 'Authorization: Bearer <token>', "
                            "or open it once with ?token=<token>")
                return
            if via == "query":
                cookies_out.append(_cookie(SESSION_COOKIE, self.session or "", http_only=True))
                if request.method in ("GET", "HEAD"):
                    await _redirect_without_token(scope, send, cookies_out)
                    return
            scope.setdefault("state", {})["auth"] = via
        session_id = request.cookies.get(CSRF_COOKIE)
        if not session_id or not _SESSION_ID.fullmatch(session_id):
            session_id = token_urlsafe(24)
            cookies_out.append(_cookie(CSRF_COOKIE, session_id, http_only=True))
        # Recomputed on every request, never looked up: the server keeps no session table.
        scope.setdefault("state", {})["csrf"] = csrf_token(self.csrf_secret, session_id)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS:
                    if name.decode() not in headers:
                        headers.append(name.decode(), value.decode())
                for cookie in cookies_out:
                    headers.append("set-cookie", cookie)
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _authenticated(self, request: Request) -> str | None:
        """How the request proved it holds the token ("bearer", "cookie", "query"), or None."""
        assert self.token is not None and self.session is not None
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode()):
            return "bearer"
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie and hmac.compare_digest(cookie.encode(), self.session.encode()):
            return "cookie"
        query = request.query_params.get("token")
        if query and hmac.compare_digest(query.encode(), self.token.encode()):
            return "query"
        return None


def _cookie(name: str, value: str, *, http_only: bool) -> str:
    jar: SimpleCookie = SimpleCookie()
    jar[name] = value
    morsel = jar[name]
    morsel["path"] = "/"
    morsel["samesite"] = "Strict"
    morsel["httponly"] = http_only
    return morsel.OutputString()


async def _deny(scope: Scope, send: Send, status: int, code: str, message: str) -> None:
    path = str(scope.get("path", ""))
    if path.startswith("/api/"):
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        ctype = b"application/json"
    else:
        body = (f"<!doctype html><meta charset=utf-8><title>telo ui</title><p>{code}: {message}</p>\n").encode()
        ctype = b"text/html; charset=utf-8"
    headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode()), *SECURITY_HEADERS]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="telo ui"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _redirect_without_token(scope: Scope, send: Send, cookies: list[str]) -> None:
    query = [(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
             if k != "token"]
    location = str(scope.get("root_path", "")) + str(scope["path"]) + (f"?{urlencode(query)}" if query else "")
    headers = [(b"location", location.encode("latin-1")), (b"content-length", b"0"), *SECURITY_HEADERS]
    headers += [(b"set-cookie", c.encode("latin-1")) for c in cookies]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def csrf_ok(request: Request, supplied: str | None) -> bool:
    """Whether a POST comes from the dashboard's own pages or from a client holding the bearer token."""
    origin = request.headers.get("origin")
    # Browsers send Origin with every POST and a page cannot forge it: a foreign one is refused outright, even
    # with a valid token or the bearer header. So is "null" (a sandboxed frame, a data: URL, a privacy mask):
    # it cannot be told from a foreign one, and the dashboard's own pages never send it (Referrer-Policy).
    if origin is not None and origin != own_origin(request):
        return False
    if origin is not None or request.scope.get("state", {}).get("auth") == "bearer":
        return True
    if request.headers.get("sec-fetch-site") == "same-origin":  # set by the browser alone, like Origin
        return True
    # No Origin (curl, a script): only the session's CSRF token, recomputed from its cookie, vouches for it.
    expected = request.scope.get("state", {}).get("csrf")
    given = supplied or request.headers.get(CSRF_HEADER)
    return bool(expected and given and hmac.compare_digest(str(given).encode(), str(expected).encode()))
