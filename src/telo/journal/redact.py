"""Hiding passwords in journal URLs and in the messages that repeat them (docs/dashboard.md "Security").

A journal is often named by a URL that carries its password (``postgresql://user:secret@host/db``), and that name
is echoed back: ``telo ui``'s start line and page header, error messages, logs. :func:`redact` is the one
function every such place calls (the CLI and the dashboard alike), here in the journal layer because journals are
what these URLs name, and every layer that shows one sits at or above it.

It rewrites text, not a parsed URL, because it must also clean messages that merely contain a URL (a driver's
"invalid URI" error quotes it whole). It errs towards hiding too much:

- ``scheme://user:PASSWORD@host…`` → ``scheme://user:***@host…``, the password running to the LAST ``@`` of
  the URL, so a password with an unencoded ``@`` or ``/`` is hidden whole (percent-encoded ones are plain text);
- ``password=…`` (and ``sslpassword=``) in a libpq key/value DSN, quoted or not, and as a URL query parameter
  → ``password=***``.

A user name, a host, a port and a SQLite path are kept: they say which journal is meant and are no secret.
"""

from __future__ import annotations

import re
from typing import Final

MASK: Final = "***"

# userinfo with a password: scheme://user:password@ — the user cannot hold ':' ('/', '?', '#', '@' end the
# authority), and the password is greedy up to the last '@' before whitespace.
_URL_PASSWORD: Final = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@]*):\S*@")
# A query parameter: the value ends at the next parameter or fragment.
_QUERY_PASSWORD: Final = re.compile(r"(?P<head>[?&](?:ssl)?password=)[^&#\s]*", re.IGNORECASE)
# A key/value DSN (libpq): a single-quoted value with backslash escapes (an unterminated one runs to the end of
# the text), or an unquoted one up to whitespace. Not after '?' or '&': that is the query form above.
_DSN_PASSWORD: Final = re.compile(
    r"(?P<head>(?<![\w?&])(?:ssl)?password\s*=\s*)(?:'(?:[^'\\]|\\.)*(?:'|$)|[^\s']\S*)",
    re.IGNORECASE | re.DOTALL,
)


def redact(text: str) -> str:
    """``text`` with the password of every URL and DSN in it replaced by ``***`` (see the module docstring)."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@", text)
    text = _QUERY_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)
    return _DSN_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)
