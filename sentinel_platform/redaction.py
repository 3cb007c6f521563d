"""Hiding secrets in anything that is shown: URLs with credentials, and free text holding them.

A password can sit in a URL's user-info (``redis://user:pw@host``, percent-encoded or not,
even with a stray ``@`` or ``/`` in it) or in its query string (``?password=pw``, which
redis-py honours). Every path that shows a URL (settings errors, connection errors, log
lines, the CLI, Dagster) goes through :func:`redact_url`; :func:`scrub` is the backstop for
text that may carry such a URL somewhere inside. Both err on the side of hiding too much.
Neither ever raises, because an error path that crashes on a malformed URL shows the raw
traceback instead.

Text need not hold the URL at all to leak its password: libpq quotes a bad token of a DSN
(``invalid percent-encoded token: "50%off-pw"``) or a fragment of it (``missing "=" after
"pw"``). So the settings :func:`remember_secret` every secret value they load, and
:func:`scrub` also masks every known password wherever it appears, raw, percent-decoded or
percent-encoded, and any quoted text that is a piece of one.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

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
#: Secret in a URL's query only (a hosted model API's ``?key=``): in free text
#: ``key=value`` is as often an example of a syntax (a settings error's).
URL_SECRET_PARAMS = frozenset(("key",))
#: Names ending so are credentials too, after ``-`` is read as ``_`` (``api-key``,
#: ``Subscription-Key``, ``X-Amz-Signature``, ``refresh_token``). Not every ``_key``:
#: ``partition_key`` or ``run_key`` in Dagster's texts name no secret.
SECRET_SUFFIXES = (
    *("api_key", "access_key", "secret_key", "private_key", "subscription_key", "account_key"),
    *("_token", "_secret", "_password", "_signature", "_credential"),
)
#: A ``key=value`` pair as in a query string; the key is checked percent-decoded, because
#: redis-py decodes it too (``?pass%77ord=`` is a password).
_PARAM = re.compile(r"(?<![A-Za-z0-9_%.+-])(?P<key>[A-Za-z0-9_%.+-]+)=(?P<value>[^&;#\s]*)")
#: A URL-ish token: a scheme, ``://``, then anything up to whitespace.
_URL_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
#: Text in double or single quotes, as libpq and psycopg2 quote a token of a DSN.
_QUOTED = re.compile(r"\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)'")

#: The shortest text masked as (a piece of) a known password: shorter ones tell next to
#: nothing and would mask ports, digits and single letters all over every message.
MIN_PIECE = 3


@dataclass(frozen=True)
class KnownSecrets:
    """The passwords of the secret settings loaded in this process (:func:`remember_secret`).

    ``forms``: every way one may be shown (raw, percent-decoded, percent-encoded), masked
    wherever they appear; ``plain``: raw and decoded only, whose quoted pieces are masked
    too (a percent-encoded form's pieces, like ``25``, are ordinary text).
    """

    forms: frozenset[str] = frozenset()
    plain: frozenset[str] = frozenset()

    def __or__(self, other: KnownSecrets) -> KnownSecrets:
        return KnownSecrets(self.forms | other.forms, self.plain | other.plain)


_known_lock = threading.Lock()
_known = KnownSecrets()


def redact_url(url: str) -> str:
    """``url`` with every secret query value and the password of its user-info replaced by
    ``***``; the scheme, user, host, port and path stay, to ease debugging.

    The user-info is taken to end at the *last* ``@`` (after secret query values are
    masked), so a password holding a stray ``@``, ``/``, ``?`` or ``#`` is hidden whole;
    the price is that a URL with an ``@`` further on may show less than it could.
    """
    if not url:
        return url
    scheme, sep, rest = _redact_params(url, in_url=True).partition("://")
    if not sep:
        return scheme
    userinfo, at, location = rest.rpartition("@")
    if at and ":" in userinfo:
        rest = f"{userinfo.partition(':')[0]}:{MASK}@{location}"
    return f"{scheme}{sep}{rest}"


def scrub(text: str) -> str:
    """``text`` with every known secret (:func:`remember_secret`) and every quoted piece of
    one masked, every URL in it redacted and every ``password=...`` pair masked."""
    text = _mask_known(text, _known)
    return _redact_params(_URL_TOKEN.sub(lambda m: redact_url(m.group(0)), text))


def remember_secret(value: str) -> None:
    """Have :func:`scrub` mask the password parts of ``value`` (a secret setting) from now on,
    in this process, wherever they appear. Never raises."""
    global _known
    secrets = secret_forms(value)
    if not (secrets.forms <= _known.forms and secrets.plain <= _known.plain):
        with _known_lock:
            _known = _known | secrets


def secret_forms(value: str) -> KnownSecrets:
    """The strings that reveal the secret of a setting's value, as any reader may show them.

    For a URL: its user-info password, cut at the first ``@`` (SQLAlchemy's reading), at
    the last one (:func:`redact_url`'s) and as ``urlsplit`` (redis-py's) reads it, and the
    value of every secret query parameter; for any other value, the value itself. Each in
    its raw, percent-decoded (``%2F`` and ``+`` kinds) and percent-encoded form; none
    shorter than :data:`MIN_PIECE`.
    """
    try:
        parts = _secret_parts(value) if "://" in value else {value}
    except ValueError:  # urlsplit on a broken host; the other readings still count
        parts = {value}
    plain = {d for part in parts for d in (part, unquote(part), unquote_plus(part))}
    forms = plain | {quote(d, safe="") for d in plain} | {quote_plus(d, safe="") for d in plain}
    return KnownSecrets(_long(forms), _long(plain))


def _long(texts: set[str]) -> frozenset[str]:
    return frozenset(text for text in texts if len(text.strip()) >= MIN_PIECE)


def _secret_parts(url: str) -> set[str]:
    rest = url.partition("://")[2]
    parts = {m["value"] for m in _PARAM.finditer(url) if _is_secret_key(m["key"], True)}
    first = rest.partition("@")
    if first[1]:
        parts.add(first[0].partition(":")[2])
        parts.add(rest.rpartition("@")[0].partition(":")[2])
    parts.add(urlsplit(url).password or "")
    return parts


def _mask_known(text: str, known: KnownSecrets) -> str:
    """``text`` with each known secret form masked (longest first), then any quoted text
    that is a piece of one: libpq quotes the word of a DSN it trips on, a password's too."""
    if not known.forms or not text:
        return text
    for form in sorted(known.forms, key=len, reverse=True):
        text = text.replace(form, MASK)

    def quoted(match: re.Match[str]) -> str:
        inner = match["dq"] if match["dq"] is not None else match["sq"]
        piece = len(inner.strip()) >= MIN_PIECE and inner != MASK
        if piece and any(inner in plain for plain in known.plain):
            return match.group(0).replace(inner, MASK)
        return match.group(0)

    return _QUOTED.sub(quoted, text)


def _redact_params(text: str, in_url: bool = False) -> str:
    """``text`` with the value of every secret ``name=value`` pair masked (``in_url``:
    ``text`` is a URL, whose query may also name :data:`URL_SECRET_PARAMS`)."""

    def mask(match: re.Match[str]) -> str:
        if _is_secret_key(match["key"], in_url):
            return f"{match['key']}={MASK}"
        return match.group(0)

    return _PARAM.sub(mask, text)


def _is_secret_key(key: str, in_url: bool) -> bool:
    name = unquote_plus(key).lower().replace("-", "_")
    if in_url and name in URL_SECRET_PARAMS:
        return True
    return name in SECRET_PARAMS or name.endswith(SECRET_SUFFIXES)
