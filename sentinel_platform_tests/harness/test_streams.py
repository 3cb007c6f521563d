"""The harness's reading of a group's undecided entries, on the suite's real server: what
the benches count as "still waiting" must be exactly the pending and the undelivered."""

from __future__ import annotations

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.streams import undecided


def test_undecided_is_the_pending_and_the_undelivered(
    redis_client: RedisClient, settings: Settings
) -> None:
    keys = transaction_keys(settings)
    ids = [redis_client.xadd(keys.stream, {"data": str(n)}) for n in range(5)]
    redis_client.xgroup_create(keys.stream, keys.group, id="0")
    delivered = redis_client.xreadgroup(keys.group, "c1", {keys.stream: ">"}, count=3)
    ((_, entries),) = delivered
    redis_client.xack(keys.stream, keys.group, entries[0][0])
    assert undecided(redis_client, keys, 100) == {str(i) for i in ids[1:]}
