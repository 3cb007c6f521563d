"""Two launches never fill one stream's re-screen queue at once (a real Valkey)."""

from __future__ import annotations

import pytest

from sentinel_platform.domains.rescreening.queueing import (
    LaunchInProgress,
    lease_key,
    queue_day,
    scan,
)
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.streams import sample_transaction

DAY = "2026-11-26"


def test_a_launch_while_another_holds_the_lease_queues_nothing_and_names_it(
    settings: Settings, redis_client: RedisClient
) -> None:
    txn = transaction_keys(settings)
    source = redis_client.xadd(txn.stream, sample_transaction(0).to_fields())
    fields = {"source_message_id": str(source), "provisional": "true", "day": DAY}
    redis_client.xadd(txn.results, {**fields, "fallback_cause": "down"})
    redis_client.set(lease_key(txn), "run abc", px=60_000)

    with pytest.raises(LaunchInProgress, match="run abc"):
        queue_day(redis_client, txn, DAY, owner="run def")
    assert redis_client.xlen(txn.rescreen) == 0
    assert redis_client.get(lease_key(txn)) == "run abc"  # not released by another

    redis_client.delete(lease_key(txn))
    assert queue_day(redis_client, txn, DAY, owner="run def").queued == 1
    assert not redis_client.exists(lease_key(txn))  # released when done


def test_scan_reads_every_entry_across_pages(redis_client: RedisClient) -> None:
    pipe = redis_client.pipeline(transaction=False)
    for i in range(2_500):
        pipe.xadd("s", {"i": str(i)})
    pipe.execute()
    assert [int(f["i"]) for _, f in scan(redis_client, "s")] == list(range(2_500))
