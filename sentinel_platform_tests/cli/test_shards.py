"""``sentinel shards raise``: the real command switches a drained stream to the count
its spec declares, and refuses, naming the shard, while a shard still has lag."""

from __future__ import annotations

import json

from sentinel_platform.registry import StreamSpec
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import shard_keys
from sentinel_platform.streams.sharding.record import recorded_tags, tags_on_record
from sentinel_platform_tests.harness.cli import run_sentinel
from sentinel_platform_tests.harness.fixtures.services import SHARDED_MODULE
from sentinel_platform_tests.harness.streams import publish


def test_raise_switches_a_drained_stream_and_refuses_one_with_lag(
    sharded_stream: StreamSpec,
    settings: Settings,
    settings_env: dict[str, str],
    redis_client: RedisClient,
) -> None:
    env = {**settings_env, "SENTINEL_STREAM_MODULES": SHARDED_MODULE}
    two = recorded_tags(redis_client, "sharded", 2)  # recorded before the spec said 3
    shard = shard_keys(settings, sharded_stream, two[1])
    publish(redis_client, shard, [{"key": "k1"}])

    refused = run_sentinel(env, "shards", "raise", "sharded")
    assert refused.code == 1, refused
    assert f"{shard.stream}: lag 1, drain it first" in refused.err
    assert tags_on_record(redis_client, "sharded") == two  # nothing switched

    redis_client.delete(shard.stream)  # drained (as far as the switch can tell)
    done = run_sentinel(env, "shards", "raise", "sharded")
    assert done.code == 0, done
    assert "sharded: 2 -> 3 shards" in done.out
    assert (tags_on_record(redis_client, "sharded") or ())[:2] == two


def test_status_and_dlq_read_the_recorded_shards_while_a_raise_is_pending(
    sharded_stream: StreamSpec,
    settings: Settings,
    settings_env: dict[str, str],
    redis_client: RedisClient,
) -> None:
    env = {**settings_env, "SENTINEL_STREAM_MODULES": SHARDED_MODULE}
    two = recorded_tags(redis_client, "sharded", 2)  # the spec says 3, not yet switched
    publish(redis_client, shard_keys(settings, sharded_stream, two[1]), [{"key": "k1"}])

    status = run_sentinel(env, "status", "--json", "--shards")
    assert status.code in (0, 3, 4, 5), status  # a zone, not an error
    [doc] = [s for s in json.loads(status.out)["streams"] if s["name"] == "sharded"]
    assert [s["lag"] for s in doc["shards"]] == [0, 1]  # the two recorded shards
    assert run_sentinel(env, "dlq", "list", "--json").code == 0
    assert tags_on_record(redis_client, "sharded") == two  # read, never rewritten


def test_an_operator_reading_a_stream_before_any_worker_records_nothing(
    sharded_stream: StreamSpec, settings_env: dict[str, str], redis_client: RedisClient
) -> None:
    env = {**settings_env, "SENTINEL_STREAM_MODULES": SHARDED_MODULE}
    assert run_sentinel(env, "status", "--json").out
    assert tags_on_record(redis_client, "sharded") is None
