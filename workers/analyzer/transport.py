"""The analyzer's HTTP reading, below :class:`~workers.analyzer.client.HttpAnalyzer`: a
reply read within its deadline and size cap, a refusal's body for
:func:`~workers.analyzer.answers.refusals.refusal`, and the URL's user-info as Basic auth.

Kept apart from the client so the client holds only the call's life (breaker, limits,
outcomes) and each reading rule is one small function.
"""

from __future__ import annotations

import time
from urllib.parse import unquote, urlsplit, urlunsplit

import urllib3
from urllib3.util import make_headers

from workers.analyzer.answers.replies import AnalyzerDown, AnalyzerError, describe

#: A reply larger than this is not an assessment; refuse it rather than buffer it.
MAX_REPLY_BYTES = 64 * 1024
READ_CHUNK_BYTES = 16 * 1024


def read_refusal(response: urllib3.BaseHTTPResponse, deadline: float) -> bytes:
    """A refusal's body for :func:`~workers.analyzer.answers.refusals.refusal`, through the same cap
    and deadline as a reply; what could not be read is left out (the status still counts)."""
    try:
        return read_reply(response, deadline)
    except AnalyzerError:
        return b""


def read_reply(response: urllib3.BaseHTTPResponse, deadline: float) -> bytes:
    """The whole body, refusing one larger than ``MAX_REPLY_BYTES`` or slower than ``deadline``.

    Reads one socket read at a time, so a server that trickles bytes cannot stretch the
    call past the deadline by more than one read timeout.
    """
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := response.read1(READ_CHUNK_BYTES):
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise AnalyzerError(f"reply larger than {MAX_REPLY_BYTES} bytes")
            if time.monotonic() > deadline:
                raise AnalyzerError("reply took longer than the timeout to arrive")
            chunks.append(chunk)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise AnalyzerDown(f"analyzer reply broke off ({describe(exc)})") from None
    return b"".join(chunks)


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """The URL without its user-info, and the Basic auth header it stood for (if any)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, {}
    netloc = parts.netloc.rpartition("@")[2]
    target = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    return target, make_headers(basic_auth=f"{user}:{password}")
