"""What a model API's refusal means: wait (busy), stop (exhausted), down or wrong.

One pure function per answer, :func:`refusal`, from the API's kind, the HTTP status, the
headers and the (capped) body, so every documented answer of every provider is one row of
a table test. The meanings are those of :mod:`workers.analyzer.replies`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal

from sentinel_platform.streams.consumer.processor import Busy
from workers.analyzer.replies import AnalyzerError, status_error

ApiKind = Literal["sentinel", "openai", "anthropic"]


def refusal(
    api: ApiKind, status: int, headers: Mapping[str, str], body: bytes, now: datetime
) -> AnalyzerError | Busy:
    """The error a non-2xx answer of ``api`` means (the body is read and capped by the
    caller; it may be empty)."""
    return status_error(status, headers.get("Retry-After"), now)
