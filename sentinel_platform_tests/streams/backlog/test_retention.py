"""Workers trim the source stream, but only what every group delivered and acknowledged."""

from __future__ import annotations

import pytest

from sentinel_platform.settings import Settings, SettingsError, load_settings
from sentinel_platform.streams.backlog.retention import (
    GroupPosition,
    retention_state,
    safe_trim_id,
    trim,
)
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.streams import publish, read_and_ack
from sentinel_platform_tests.harness.waits import wait_until

NOW_MS = 1_000_000_000


@pytest.mark.parametrize(
    ("groups", "retention_s", "expected"),
    [
        ([], 0, None),  # no group: nobody has read anything
        ([GroupPosition("g", "0-0", None)], 0, None),  # nothing delivered yet
        ([GroupPosition("g", "500-3", None)], 0, "500-4"),  # all delivered are acked
        ([GroupPosition("g", "500-3", "200-0")], 0, "200-0"),  # oldest pending stays
        (
            [GroupPosition("fast", "900-0", None), GroupPosition("slow", "300-0", None)],
            0,
            "300-1",
        ),  # the slowest group decides
        (
            [GroupPosition("a", "900-0", "100-7"), GroupPosition("b", "50-0", None)],
            0,
            "50-1",
        ),
        ([GroupPosition("g", f"{NOW_MS}-0", None)], 10, f"{NOW_MS - 10_000}-0"),  # age bound
        ([GroupPosition("g", "5-0", None)], 3600, "5-1"),  # the group is the lower bound
    ],
)
def test_the_trim_threshold_keeps_everything_some_group_may_still_need(
    groups: list[GroupPosition], retention_s: int, expected: str | None
) -> None:
    assert safe_trim_id(groups, NOW_MS, retention_s) == expected


def test_workers_trim_only_below_the_slowest_groups_oldest_pending_entry(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    client, keys = redis_client, tx_keys
    ensure_group(client, keys)
    client.xgroup_create(keys.stream, "audit", "0")  # a second, slower reader
    ids = publish(client, keys, [{"key": f"m{n}"} for n in range(100)])
    read = client.xreadgroup("audit", "auditor", {keys.stream: ">"}, count=40)
    client.xack(keys.stream, "audit", *[message_id for message_id, _ in read[0][1][:30]])
    env = {"SENTINEL_STREAM_RETENTION_S": "0", "SENTINEL_STREAM_RETENTION_INTERVAL_S": "1"}
    worker = start_worker(env=env).wait_ready(client)

    wait_until(lambda: client.xlen(keys.results) == 100, 20)
    wait_until(lambda: client.xlen(keys.stream) == 70, 20)
    assert client.xrange(keys.stream, "-", "+", count=1)[0][0] == ids[30]
    wait_until(lambda: worker.events("stream_trimmed"), 5)  # logged after XTRIM returns

    # The slow group finishes: the rest goes too, but never an undelivered entry.
    later = publish(client, keys, [{"key": "late"}])
    client.xack(keys.stream, "audit", *ids[30:40])
    client.xreadgroup("audit", "auditor", {keys.stream: ">"}, count=60)
    client.xack(keys.stream, "audit", *ids[40:])
    wait_until(lambda: client.xlen(keys.stream) == 1, 20)
    assert client.xrange(keys.stream, "-", "+")[0][0] == later[0]
    worker.kill()


def test_acknowledged_entries_stay_for_the_retention_window(
    redis_client: RedisClient, tx_keys: StreamKeys, make_settings
) -> None:
    client, keys = redis_client, tx_keys
    ensure_group(client, keys)
    publish(client, keys, [{"key": f"m{n}"} for n in range(10)])
    acked = read_and_ack(client, keys, 10)
    settings: Settings = make_settings(stream_retention_s=3600)

    assert trim(client, keys, settings) == 0
    state = retention_state(client, keys, settings)
    assert state.entries == 10
    assert state.oldest_id == acked[0]

    assert trim(client, keys, make_settings(stream_retention_s=0)) == 10


def test_a_retention_longer_than_the_idempotency_markers_is_refused_at_start_up() -> None:
    with pytest.raises(SettingsError) as error:
        load_settings(idempotency_ttl_s=3600, stream_retention_s=7200)
    message = str(error.value)
    assert "SENTINEL_STREAM_RETENTION_S" in message
    assert "SENTINEL_IDEMPOTENCY_TTL_S" in message
    with pytest.raises(SettingsError, match="SENTINEL_STREAM_RETENTION_INTERVAL_S"):
        load_settings(idempotency_ttl_s=600, stream_retention_interval_s=900)
    shorter = load_settings(idempotency_ttl_s=600)
    assert shorter.retention_window_s + shorter.stream_retention_interval_s <= 600
