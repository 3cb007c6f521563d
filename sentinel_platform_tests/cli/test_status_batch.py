"""``sentinel status`` (the real command, a subprocess) shows a stream's batch lane apart
from its lag: messages waiting for a batch, at the provider, the oldest batch with the
provider's status; a batch past its completion window is a warning, a full batch lane
alone never moves the lag or the zone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sentinel_platform.cli.status_batch import line
from sentinel_platform.exit_codes import EXIT_ELEVATED, EXIT_OK
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, batch_stream_key, batches_key
from sentinel_platform_tests.harness.cli import CliResult, status_of_stream, transaction_fields

HOUR_MS = 3_600_000


def fill_batch_lane(client: RedisClient, keys: StreamKeys, entries: int, batches: int) -> None:
    """``entries`` messages in the batch lane, the first ``batches`` x 2 of them in
    batches at the provider (2 each), as the worker's ledger records them."""
    lane = batch_stream_key(keys)
    for n in range(entries):
        fields: dict[Any, Any] = dict(transaction_fields(f"tx-b-{n}"))
        client.xadd(lane, fields)
    client.xgroup_create(lane, keys.group, id="0")
    client.xreadgroup(keys.group, "w-batch", {lane: ">"}, count=2 * batches)


def _batch(client: RedisClient, keys: StreamKeys, local_id: str, age_h: float, status: str) -> None:
    now_ms = int(client.time()[0]) * 1000
    created = now_ms - int(age_h * HOUR_MS)
    record: dict[Any, Any] = {
        "state": "submitted",
        "kind": "openai",
        "count": 2,
        "created_ms": created,
        "updated_ms": now_ms,
        "batch_id": f"batch_{local_id}",
        "provider_status": status,
    }
    client.zadd(batches_key(keys), {local_id: created})
    client.hset(f"{batches_key(keys)}:{local_id}", mapping=record)


def test_the_batch_lane_is_shown_apart_from_the_lag(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    fill_batch_lane(redis_client, tx_keys, 7, 2)
    _batch(redis_client, tx_keys, "b-1", 2, "in_progress")
    _batch(redis_client, tx_keys, "b-2", 1, "validating")

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
    fill_batch_lane(redis_client, tx_keys, 2, 1)
    _batch(redis_client, tx_keys, "b-late", 25, "finalizing")

    result = sentinel("status", "--json")

    assert result.code == EXIT_ELEVATED, result.err
    [warning] = result.json()["warnings"]  # type: ignore[index]
    assert warning.startswith(f"{tx_keys.stream}: WARN: the oldest batch (submitted, ")
    assert "finalizing" in warning and "24 h completion window" in warning


def test_an_empty_batch_lane_says_nothing() -> None:
    empty = {"waiting": 0, "at_provider": 0, "batches": 0}
    assert line(None) is None and line(empty) is None
    waiting = {**empty, "waiting": 1200}
    assert line(waiting) == "  batch lane (not lag): 1,200 waiting for a batch"
