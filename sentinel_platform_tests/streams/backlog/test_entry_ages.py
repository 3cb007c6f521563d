"""Message ages from stream entry ids: the pure arithmetic from a table, and the group's
oldest pending entry read from the real Redis (whoever holds it, 0 when none)."""

from __future__ import annotations

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.entry_ages import (
    age_s,
    entry_time_s,
    oldest_pending_age_s,
    oldest_pending_id,
    server_now_s,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys


@pytest.mark.parametrize(
    ("entry_id", "now_s", "expected"),
    [
        ("1700000000000-0", 1_700_000_000.0, 0.0),
        ("1700000000000-7", 1_700_000_002.5, 2.5),
        ("1700000000250-0", 1_700_000_060.0, 59.75),
        ("1700000005000-0", 1_700_000_000.0, 0.0),  # a clock behind the server's: never < 0
    ],
)
def test_age_is_now_minus_the_time_in_the_id(entry_id: str, now_s: float, expected: float) -> None:
    assert age_s(entry_id, now_s) == pytest.approx(expected)


def test_an_id_that_is_no_entry_id_is_refused() -> None:
    with pytest.raises(ValueError):
        entry_time_s("not-an-id")


def test_the_oldest_pending_entry_is_the_groups_whoever_holds_it(
    redis_client: RedisClient, settings: Settings
) -> None:
    keys = transaction_keys(settings)
    assert oldest_pending_id(redis_client, keys) is None  # no stream, no group yet
    now_s = server_now_s(redis_client)
    assert oldest_pending_age_s(redis_client, keys, now_s) == 0.0
    base_ms = int(now_s * 1000) - 90_000
    redis_client.xgroup_create(keys.stream, keys.group, id="0", mkstream=True)
    for n in range(4):
        redis_client.xadd(keys.stream, {"n": str(n)}, id=f"{base_ms + n * 1000}-0")
    assert oldest_pending_age_s(redis_client, keys, now_s) == 0.0  # backlog, none pending
    redis_client.xreadgroup(keys.group, "a", {keys.stream: ">"}, count=1)
    redis_client.xreadgroup(keys.group, "b", {keys.stream: ">"}, count=2)
    redis_client.xack(keys.stream, keys.group, f"{base_ms}-0")  # a's entry done: b's is oldest
    assert oldest_pending_id(redis_client, keys) == f"{base_ms + 1000}-0"
    assert oldest_pending_age_s(redis_client, keys, now_s) == pytest.approx(89.0, abs=0.01)
