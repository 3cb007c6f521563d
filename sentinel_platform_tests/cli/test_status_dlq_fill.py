"""``sentinel status`` shows how full each DLQ is against SENTINEL_DLQ_MAXLEN, past which
its oldest dead letters are trimmed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.cli import CliResult


def test_status_shows_the_dlq_fill_against_its_cap(
    cli: Callable[..., CliResult],
    redis_client: RedisClient,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SENTINEL_DLQ_MAXLEN", "100")
    pipe = redis_client.pipeline(transaction=False)
    for n in range(85):
        pipe.xadd(settings.dlq_stream, {"stream": "transactions", "n": str(n)})
    pipe.execute()

    doc = cli("status", "--json").json()
    assert doc["dlq_fill"] == {  # type: ignore[index]
        settings.dlq_stream: {"entries": 85, "cap": 100, "percent": 85, "level": "warning"}
    }
    text = cli("status").out
    assert f"dlq: {settings.dlq_stream} 85 (85% of SENTINEL_DLQ_MAXLEN 100" in text
    assert "sentinel dlq export" in text
