"""The batch lane's backlog: messages waiting for a batch, at the provider, the oldest
batch; read from the batch lane and the ledger's layout on a real server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.at_provider import (
    NOTHING,
    BatchBacklog,
    combined,
    overdue,
    overdue_text,
    read_at_provider,
    read_shards_at_provider,
    summarise,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import (
    StreamKeys,
    batch_stream_key,
    batches_key,
    shard_keys,
    transaction_keys,
)
from sentinel_platform.streams.plumbing.replies import entries

NOW_MS = 1_000_000_000
HOUR_MS = 3_600_000


def rec(state: str, count: int, age_h: float, status: str = "") -> dict[str, str]:
    record = {"state": state, "count": str(count), "created_ms": str(NOW_MS - int(age_h * HOUR_MS))}
    return {**record, "provider_status": status} if status else record


@pytest.mark.parametrize(
    ("unacked", "records", "expected"),
    [
        (0, [], NOTHING),
        (7, [], BatchBacklog(waiting=7)),
        (
            10,
            [rec("submitted", 4, 2, "in_progress"), rec("recorded", 3, 1)],
            BatchBacklog(3, 7, 2, 7200.0, "submitted", "in_progress"),
        ),
        # a refused batch's messages go another way: waiting, not at the provider
        (
            10,
            [rec("refused", 4, 3), rec("ended", 2, 1, "ended")],
            BatchBacklog(8, 2, 2, 10800.0, "refused", None),
        ),
        # a record settled while it was read is no batch
        (
            5,
            [{}, rec("submitted", 5, 0.5, "validating")],
            BatchBacklog(0, 5, 1, 1800.0, "submitted", "validating"),
        ),
        # the group acknowledged more than the ledger holds: never below nothing
        (1, [rec("ended", 3, 0)], BatchBacklog(0, 3, 1, 0.0, "ended", None)),
    ],
)
def test_the_summary_of_a_batch_lane(
    unacked: int, records: list[Mapping[str, str]], expected: BatchBacklog
) -> None:
    assert summarise(unacked, records, NOW_MS) == expected


def test_shards_add_up_and_the_oldest_batch_is_the_oldest_of_all() -> None:
    a = BatchBacklog(3, 7, 2, 7200.0, "submitted", "in_progress")
    b = BatchBacklog(1, 5, 1, 90_000.0, "submitted", "finalizing")
    assert combined([a, NOTHING, b]) == BatchBacklog(4, 12, 3, 90_000.0, "submitted", "finalizing")
    assert combined([]) == NOTHING


@pytest.mark.parametrize(
    ("age_s", "level"),
    [(None, "ok"), (3600.0, "ok"), (86_400.0, "ok"), (86_401.0, "WARN"), (172_801.0, "ERROR")],
)
def test_a_batch_past_its_completion_window_is_overdue(age_s: float | None, level: str) -> None:
    backlog = BatchBacklog(0, 5, 1, age_s, "submitted", "in_progress")
    assert overdue(backlog) == level
    text = overdue_text(backlog)
    assert (text is None) == (level == "ok")
    if text:
        assert text.startswith(level) and "in_progress" in text and "24 h" in text


def _ledger(client: RedisClient, keys: StreamKeys, local_id: str, fields: dict[Any, Any]) -> None:
    client.zadd(batches_key(keys), {local_id: int(fields["created_ms"])})
    client.hset(f"{batches_key(keys)}:{local_id}", mapping=fields)


def _server_ms(client: RedisClient) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def test_the_batch_lane_is_read_from_its_group_and_the_ledger(
    settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(settings)
    lane = batch_stream_key(keys)
    assert read_at_provider(redis_client, keys) == NOTHING
    for n in range(10):
        redis_client.xadd(lane, {"data": f'{{"id": "t-{n}"}}'})
    # before the group exists, every entry waits
    assert read_at_provider(redis_client, keys).waiting == 10
    redis_client.xgroup_create(lane, keys.group, id="0")
    redis_client.xreadgroup(keys.group, "w-1", {lane: ">"}, count=6)
    first_id, _fields = entries(redis_client.xrange(lane, count=1))[0]
    redis_client.xack(lane, keys.group, first_id)  # one decided: 9 left unacknowledged
    now = _server_ms(redis_client)
    _ledger(redis_client, keys, "b-old", {
        "state": "submitted", "kind": "openai", "count": "3", "provider_status": "in_progress",
        "created_ms": str(now - 2 * HOUR_MS), "updated_ms": str(now),
    })  # fmt: skip
    _ledger(redis_client, keys, "b-new", {
        "state": "recorded", "kind": "openai", "count": "2",
        "created_ms": str(now - HOUR_MS), "updated_ms": str(now),
    })  # fmt: skip

    backlog = read_at_provider(redis_client, keys)

    assert (backlog.waiting, backlog.at_provider, backlog.batches) == (4, 5, 2)
    assert (backlog.oldest_state, backlog.provider_status) == ("submitted", "in_progress")
    assert backlog.oldest_age_s is not None and 7199 <= backlog.oldest_age_s <= 7260
    # the live stream's own lag is untouched by all of it
    assert redis_client.xlen(keys.stream) == 0


def test_a_sharded_streams_batch_lanes_are_summed(
    settings: Settings, redis_client: RedisClient
) -> None:
    shards = [shard_keys(settings, "transactions", f"{{transactions~{k}}}") for k in range(2)]
    for k, keys in enumerate(shards):
        for n in range(k + 2):
            redis_client.xadd(batch_stream_key(keys), {"data": f"{k}-{n}"})
    now = _server_ms(redis_client)
    _ledger(redis_client, shards[1], "b-1", {
        "state": "ended", "kind": "anthropic", "count": "1", "provider_status": "ended",
        "created_ms": str(now - 30 * HOUR_MS), "updated_ms": str(now),
    })  # fmt: skip

    backlog = read_shards_at_provider(redis_client, shards)

    assert (backlog.waiting, backlog.at_provider, backlog.batches) == (4, 1, 1)
    assert overdue(backlog) == "WARN" and backlog.provider_status == "ended"


@pytest.mark.cluster
def test_the_batch_lane_is_read_on_a_cluster(
    cluster_settings: Settings, cluster_client: RedisClient
) -> None:
    keys = transaction_keys(cluster_settings)
    for n in range(3):
        cluster_client.xadd(batch_stream_key(keys), {"data": str(n)})
    now = _server_ms(cluster_client)
    for local_id in ("b-1", "b-2"):
        _ledger(cluster_client, keys, local_id, {
            "state": "submitted", "kind": "openai", "count": "1",
            "provider_status": "in_progress", "created_ms": str(now), "updated_ms": str(now),
        })  # fmt: skip

    backlog = read_at_provider(cluster_client, keys)

    assert (backlog.waiting, backlog.at_provider, backlog.batches) == (1, 2, 2)
    assert batches_key(keys).startswith("{transactions}")
