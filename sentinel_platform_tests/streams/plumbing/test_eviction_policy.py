"""The eviction-policy decision: refuse ``allkeys-*`` unless accepted, warn on ``volatile-*``,
a note when the server hides the policy; read from ``INFO memory`` on a real server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform.streams.plumbing.eviction_policy import (
    ALLOW_SETTING,
    assess,
    assess_servers,
    read_policies,
    server_verdict,
)

REFUSAL_NAMES = (ALLOW_SETTING, "maxmemory-policy", "noeviction", "volatile-")


def test_the_setting_named_in_the_messages_is_the_settings_field() -> None:
    assert ALLOW_SETTING == "SENTINEL_ALLOW_EVICTING_SERVER"
    assert load_settings().allow_evicting_server is False
    assert load_settings(allow_evicting_server=True).allow_evicting_server is True


@pytest.mark.parametrize(
    ("policy", "allow", "level", "accepted", "named"),
    [
        ("noeviction", False, "ok", False, ("noeviction",)),
        ("noeviction", True, "ok", False, ("noeviction",)),
        ("allkeys-lru", False, "refuse", False, ("allkeys-lru", *REFUSAL_NAMES)),
        ("allkeys-lfu", False, "refuse", False, ("allkeys-lfu", *REFUSAL_NAMES)),
        ("allkeys-random", False, "refuse", False, ("allkeys-random", *REFUSAL_NAMES)),
        ("ALLKEYS-LRU", False, "refuse", False, ("allkeys-lru", *REFUSAL_NAMES)),
        ("allkeys-lru", True, "warn", True, ("allkeys-lru", f"{ALLOW_SETTING}=true")),
        ("volatile-lru", False, "warn", False, ("volatile-lru", "noeviction", "TTL")),
        ("volatile-lfu", False, "warn", False, ("volatile-lfu", "noeviction")),
        ("volatile-random", False, "warn", False, ("volatile-random", "noeviction")),
        ("volatile-ttl", False, "warn", False, ("volatile-ttl", "noeviction")),
        ("volatile-ttl", True, "warn", False, ("volatile-ttl", "noeviction")),
        (None, False, "unknown", False, ("maxmemory-policy", "noeviction", ALLOW_SETTING)),
        ("", False, "unknown", False, ("maxmemory-policy", "noeviction")),
        ("evict-some-day", False, "warn", False, ("evict-some-day", "noeviction")),
    ],
)
def test_assess_decides_from_the_policy_and_the_setting(
    policy: str | None, allow: bool, level: str, accepted: bool, named: tuple[str, ...]
) -> None:
    verdict = assess(policy, allow)

    assert (verdict.level, verdict.accepted) == (level, accepted)
    assert verdict.refused is (level == "refuse")
    for name in named:
        assert name in verdict.message, (name, verdict.message)
    assert verdict.policy == (policy.lower() if policy else None)


@pytest.mark.parametrize(
    ("policies", "level", "policy", "named"),
    [
        ({"": "noeviction"}, "ok", "noeviction", ()),
        ({"a:1": "noeviction", "b:2": "noeviction"}, "ok", "noeviction", ()),
        ({"a:1": "noeviction", "b:2": "allkeys-lru"}, "refuse", "allkeys-lru", ("b:2",)),
        ({"a:1": "volatile-lru", "b:2": "allkeys-lfu"}, "refuse", "allkeys-lfu", ("b:2",)),
        ({"a:1": None, "b:2": "volatile-ttl"}, "warn", "volatile-ttl", ("b:2",)),
        ({"a:1": None, "b:2": "noeviction"}, "unknown", None, ("a:1",)),
        ({}, "unknown", None, ()),
    ],
)
def test_the_worst_server_decides(
    policies: dict[str, str | None], level: str, policy: str | None, named: tuple[str, ...]
) -> None:
    verdict = assess_servers(policies, allow_evicting=False)

    assert (verdict.level, verdict.policy) == (level, policy)
    for name in named:
        assert name in verdict.message
    if set(policies) == {""}:
        assert verdict.message == assess(policies[""], False).message


def test_read_from_info_memory_of_the_real_server(
    redis_client: RedisClient, settings: Settings, eviction_policy: Callable[[str], None]
) -> None:
    assert list(read_policies(redis_client).values()) == ["noeviction"]
    assert server_verdict(redis_client, allow_evicting=False).level == "ok"

    eviction_policy("allkeys-lru")
    assert list(read_policies(redis_client).values()) == ["allkeys-lru"]
    refused = server_verdict(redis_client, allow_evicting=False)
    assert refused.refused and ALLOW_SETTING in refused.message
    assert server_verdict(redis_client, allow_evicting=True).level == "warn"

    eviction_policy("volatile-lru")
    assert server_verdict(redis_client, allow_evicting=False).level == "warn"


def test_a_server_hiding_the_policy_gets_a_note(
    redis_client: RedisClient,
    make_settings: Callable[..., Settings],
    policy_hidden_url: str,
    eviction_policy: Callable[[str], None],
) -> None:
    eviction_policy("allkeys-lru")  # what the hidden user cannot see
    with connect(make_settings(redis_url=policy_hidden_url)) as hidden:
        assert list(read_policies(hidden).values()) == [None]
        verdict = server_verdict(hidden, allow_evicting=False)
    assert verdict.level == "unknown" and not verdict.refused
    assert "maxmemory-policy" in verdict.message
