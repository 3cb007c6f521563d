"""The batch lane's HTTP: a few JSON calls and one long read of results, line by line.

A batch API is called seldom (submit, a poll every while, one read of the results), so
it has a pool of its own rather than a permit of the real-time path's
(:class:`~workers.analyzer.exchange.Exchange`): a results file of hundreds of megabytes
must never hold a connection a live message waits for. What an answer means is read as
the real-time path reads it: a non-2xx through the API's ``misconfigured`` then
:func:`~workers.analyzer.answers.refusals.refusal` (busy, exhausted, down, wrong; their
text scrubbed of any key the answer echoed), no answer as *down*
(:func:`~workers.analyzer.answers.replies.unreachable`). The key's headers are the
real-time call's (``ModelApi.auth_headers``), credentials in the URL go as Basic auth.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

import urllib3

from workers.analyzer.answers.refusals import refusal
from workers.analyzer.answers.replies import AnalyzerDown, AnalyzerError, describe, unreachable
from workers.analyzer.apis.model_api import ModelApi
from workers.analyzer.transport import MAX_REPLY_BYTES, read_refusal, read_reply, split_credentials

#: A line of results longer than this is no answer of ours (a verdict is a few KiB).
MAX_LINE_BYTES = 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024
Auth = Callable[[str], Mapping[str, str]]


class BatchHttp:
    """Calls of one batch API for ``api`` below ``base_url`` (``SENTINEL_ANALYZER_URL``),
    each bounded by ``timeout_s`` per connect and per read. ``auth`` gives the key's
    headers for a URL (default: ``api.auth_headers``, the real-time call's)."""

    def __init__(
        self, api: ModelApi, base_url: str, timeout_s: float, auth: Auth | None = None
    ) -> None:
        self.api = api
        self.base_url, credentials = split_credentials(base_url)
        self.basic = credentials
        self.auth: Auth = auth or api.auth_headers
        self.timeout_s = timeout_s
        self._pool = urllib3.PoolManager(
            num_pools=2,
            maxsize=1,
            timeout=urllib3.Timeout(connect=timeout_s, read=timeout_s),
            retries=False,
        )

    def close(self) -> None:
        self._pool.clear()

    def json(
        self, method: str, url: str, body: bytes | None = None, content_type: str = ""
    ) -> dict[str, Any]:
        """One call answered with a JSON object (capped at the real-time reply's size)."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        response = self._open(method, url, body, headers)
        try:
            reply = read_reply(response, time.monotonic() + self.timeout_s)
        finally:
            response.release_conn()
        try:
            value = json.loads(reply)
        except ValueError:
            raise AnalyzerError(
                f"batch API answered {len(reply)} bytes that are not JSON"
            ) from None
        if not isinstance(value, dict):
            raise AnalyzerError("batch API answered JSON that is not an object")
        return value

    def lines(self, url: str) -> Iterator[bytes]:
        """The non-blank lines of a JSONL body, read as they arrive (a results file may
        be far larger than memory should hold at once)."""
        response = self._open("GET", url, None, {"Accept": "application/binary"})
        pending = b""
        try:
            while chunk := response.read1(READ_CHUNK_BYTES):
                pending += chunk
                *complete, pending = pending.split(b"\n")
                if len(pending) > MAX_LINE_BYTES:
                    raise AnalyzerError(f"a results line is longer than {MAX_LINE_BYTES} bytes")
                yield from (line for line in complete if line.strip())
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise AnalyzerDown(f"batch results broke off ({describe(exc)})") from None
        finally:
            response.close()
            response.release_conn()
        if pending.strip():
            yield pending

    def _open(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str]
    ) -> urllib3.BaseHTTPResponse:
        """The answer's head, its body unread; a non-2xx raised as what it means."""
        sent = {**headers, **self.basic, **self.auth(url)}
        try:
            response = self._pool.request(
                method, url, body=body, headers=sent, preload_content=False
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise unreachable(exc) from None
        if 200 <= response.status < 300:
            return response
        try:
            refused = read_refusal(response, time.monotonic() + self.timeout_s)
        finally:
            response.close()
            response.release_conn()
        now = datetime.now(timezone.utc)
        raise self.api.misconfigured(response.status, refused) or refusal(
            self.api.kind, response.status, response.headers, refused, now
        )


__all__ = ["MAX_LINE_BYTES", "MAX_REPLY_BYTES", "BatchHttp"]
