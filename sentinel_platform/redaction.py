"""Hiding secrets in anything that is shown: URLs with credentials, and free text holding them.

A password can sit in a URL's user-info (``redis://user:pw@host``, percent-encoded or not,
even with a stray ``@`` or ``/`` in it) or in its query string (``?password=pw``, which
redis-py honours). Every path that shows a URL (settings errors, connection errors, log
lines, the CLI, Dagster) goes through :func:`redact_url`; :func:`scrub` is the backstop for
text that may carry such a URL somewhere inside. Both err on the side of hiding too much.
Neither ever raises, because an error path that crashes on a malformed URL shows the raw
traceback instead.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

MASK = "***"
#: Query parameters whose value is a credential (compared case-insensitively).
SECRET_PARAMS = frozenset(
    (
        "password",
        "passwd",
        "pwd",
        "pass",
        # redis-py's passphrase of an encrypted TLS client key (rediss://...?ssl_password=).
        "ssl_password",
        "secret",
        "client_secret",
        "token",
        "access_token",
        "auth",
        "api_key",
        "apikey",
        "sig",
        "signature",
    )
)
#: A ``key=value`` pair as in a query string; the key is checked percent-decoded, because
#: redis-py decodes it too (``?pass%77ord=`` is a password).
_PARAM = re.compile(r"(?<![A-Za-z0-9_%.+-])(?P<key>[A-Za-z0-9_%.+-]+)=(?P<value>[^&;#\s]*)")
#: A URL-ish token: a scheme, ``://``, then anything up to whitespace.
_URL_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")


def redact_url(url: str) -> str:
    """``url`` with every secret query value and the password of its user-info replaced by
    ``***``; the scheme, user, host, port and path stay, to ease debugging.

    The user-info is taken to end at the *last* ``@`` (after secret query values are
    masked), so a password holding a stray ``@``, ``/``, ``?`` or ``#`` is hidden whole;
    the price is that a URL with an ``@`` further on may show less than it could.
    """
    if not url:
        return url
    scheme, sep, rest = _redact_params(url).partition("://")
    if not sep:
        return scheme
    userinfo, at, location = rest.rpartition("@")
    if at and ":" in userinfo:
        rest = f"{userinfo.partition(':')[0]}:{MASK}@{location}"
    return f"{scheme}{sep}{rest}"


def scrub(text: str) -> str:
    """``text`` with every URL in it redacted and every ``password=...`` pair masked."""
    return _redact_params(_URL_TOKEN.sub(lambda m: redact_url(m.group(0)), text))


def _redact_params(text: str) -> str:
    return _PARAM.sub(_mask_param, text)


def _mask_param(match: re.Match[str]) -> str:
    if unquote_plus(match["key"]).lower() in SECRET_PARAMS:
        return f"{match['key']}={MASK}"
    return match.group(0)
