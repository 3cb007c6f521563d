"""Checks of the URLs settings hold, shared by every concern that takes one.

Each check returns why a URL cannot work, or None, and never quotes the URL: the reason
reaches error messages, and a URL may carry a password.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit


def url_problem(url: str, schemes: tuple[str, ...], needs_host: bool = False) -> str | None:
    """Why ``url`` is not a usable URL of one of ``schemes``, or None. The reason never
    quotes the URL, so it is safe to show whatever the URL carries."""
    allowed = ", ".join(f"{s}://" for s in schemes)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number 0-65535
    except ValueError:
        return f"is not a valid URL (host or port malformed); expected {allowed}"
    if parts.scheme not in schemes:
        return f"scheme {parts.scheme or '(none)'!r} is not one of {allowed}"
    if needs_host and not parts.hostname:
        return f"has no host; expected {allowed}host[:port]/path"
    return None


def tls_problem(url: str) -> str | None:
    """Why a Redis URL's TLS options cannot work, or None: redis-py's ``ssl_*`` options
    on a plain ``redis://`` (or ``unix://``) URL fail at connect with a ``TypeError``.
    Names the options, never their values."""
    parts = urlsplit(url)
    names = sorted({k for k, _ in parse_qsl(parts.query, keep_blank_values=True) if "ssl" in k})
    if names and not parts.scheme.startswith("rediss"):
        return (
            f"has TLS options ({', '.join(names)}) but scheme {parts.scheme!r} does not use "
            "TLS: use rediss:// (or rediss+cluster://)"
        )
    return None
