"""``sentinel status`` shows the server's ``maxmemory-policy`` and what the platform makes
of it (ok, warn, refuse, unknown)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.cli import CliResult


@pytest.mark.parametrize(
    ("policy", "verdict", "named"),
    [
        ("noeviction", "ok", ()),
        ("volatile-lru", "warn", ("TTL",)),
        ("allkeys-lru", "refuse", ("SENTINEL_ALLOW_EVICTING_SERVER",)),
    ],
)
def test_status_shows_the_eviction_policy_and_its_verdict(
    cli: Callable[..., CliResult],
    redis_client: RedisClient,
    eviction_policy: Callable[[str], None],
    policy: str,
    verdict: str,
    named: tuple[str, ...],
) -> None:
    eviction_policy(policy)

    doc = cli("status", "--json").json()
    text = cli("status").out

    assert isinstance(doc, dict)
    shown = doc["redis_eviction"]
    assert (shown["policy"], shown["verdict"]) == (policy, verdict)
    assert f"maxmemory-policy {policy} ({verdict})" in text
    for name in named:
        assert name in shown["message"] and name in text


def test_status_notes_a_server_hiding_its_eviction_policy(
    cli: Callable[..., CliResult],
    redis_client: RedisClient,
    policy_hidden_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDIS_URL", policy_hidden_url)

    doc = cli("status", "--json").json()
    text = cli("status").out

    assert isinstance(doc, dict)
    assert (doc["redis_eviction"]["policy"], doc["redis_eviction"]["verdict"]) == (None, "unknown")
    assert "maxmemory-policy not reported (unknown)" in text
