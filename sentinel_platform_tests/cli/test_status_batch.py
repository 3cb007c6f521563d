"""``sentinel status`` (the real command, a subprocess) shows a stream's batch lane apart
from its lag: messages waiting for a batch, at the provider, the oldest batch with the
provider's status; a batch past its completion window is a warning, a full batch lane
alone never moves the lag or the zone."""

from __future__ import annotations

import time
from collections.abc import Callable

from sentinel_platform.cli.status_batch import line
from sentinel_platform.exit_codes import EXIT_ELEVATED, EXIT_OK
from sentinel_platform.streams.backlog.progress import record_publish
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.batch_lane import fill_batch_lane, record_batch
from sentinel_platform_tests.harness.cli import CliResult, status_of_stream


def test_the_batch_lane_is_shown_apart_from_the_lag(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    fill_batch_lane(redis_client, tx_keys, 7, 4)
    record_batch(redis_client, tx_keys, "b-1", 2, "in_progress")
    record_batch(redis_client, tx_keys, "b-2", 1, "validating")

    result = sentinel("status", "--json")

    assert result.code == EXIT_OK, result.err
    doc: dict = result.json()  # type: ignore[assignment]
    stream = status_of_stream(doc, tx_keys.stream)
    lane = stream["batch"]
    assert (lane["waiting"], lane["at_provider"], lane["batches"]) == (3, 4, 2)
    assert (lane["oldest_state"], lane["provider_status"]) == ("submitted", "in_progress")
    assert 7200 <= lane["oldest_age_s"] < 7200 + 60
    assert (stream["lag"], stream["zone"], doc["warnings"]) == (0, "nominal", [])
    text = sentinel("status").out
    assert (
        "  batch lane (not lag): 3 waiting for a batch, 4 at the provider in 2 batches, "
        "oldest 2h 0" in text
    ), text
    assert "(in_progress)" in text


def test_a_batch_past_its_completion_window_is_a_warning(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    fill_batch_lane(redis_client, tx_keys, 2, 2)
    record_batch(redis_client, tx_keys, "b-late", 25, "finalizing")

    result = sentinel("status", "--json")

    assert result.code == EXIT_ELEVATED, result.err
    [warning] = result.json()["warnings"]  # type: ignore[index]
    assert warning.startswith(f"{tx_keys.stream}: WARN: the oldest batch (submitted, ")
    assert "finalizing" in warning and "24 h completion window" in warning


def test_the_last_publish_says_it_went_to_the_batch_lane(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    fields = {"run_id": "0123456789", "partition": "2026-11-02", "rows": 500, "at": time.time()}
    record_publish(redis_client, tx_keys, {**fields, "outcome": "success", "lane": "batch"})

    result = sentinel("status", "--json")

    assert status_of_stream(result.json(), tx_keys.stream)["last_publish"]["lane"] == "batch"
    assert "last publish: 2026-11-02 (500 rows) to the batch lane at " in sentinel("status").out


def test_an_empty_batch_lane_says_nothing() -> None:
    empty = {"waiting": 0, "at_provider": 0, "batches": 0}
    assert line(None) is None and line(empty) is None
    waiting = {**empty, "waiting": 1200}
    assert line(waiting) == "  batch lane (not lag): 1,200 waiting for a batch"
