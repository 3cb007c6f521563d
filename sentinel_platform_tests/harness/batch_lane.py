"""A stream's batch lane and batch ledger as the tests set them up: entries published for
the batch lane, some delivered to the stream's group, and batches recorded in the
ledger's Redis layout (``batches_key``: the sorted set, each batch's record hash) as the
workers' ledger writes them."""

from __future__ import annotations

from typing import Any

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, batch_stream_key, batches_key
from sentinel_platform_tests.harness.cli import transaction_fields

HOUR_MS = 3_600_000


def fill_batch_lane(client: RedisClient, keys: StreamKeys, entries: int, delivered: int) -> None:
    """``entries`` transactions in the batch lane of ``keys``, the first ``delivered`` of
    them read by the stream's group (pending: taken into batches)."""
    lane = batch_stream_key(keys)
    for n in range(entries):
        fields: dict[Any, Any] = dict(transaction_fields(f"tx-b-{n}"))
        client.xadd(lane, fields)
    client.xgroup_create(lane, keys.group, id="0")
    if delivered:
        client.xreadgroup(keys.group, "w-batch", {lane: ">"}, count=delivered)


def record_batch(
    client: RedisClient,
    keys: StreamKeys,
    local_id: str,
    age_h: float,
    status: str,
    count: int = 2,
    state: str = "submitted",
) -> None:
    """A batch of ``count`` messages in the ledger, created ``age_h`` hours ago on the
    server's clock, in ``state``, the provider's status at the last poll ``status``."""
    now_ms = int(client.time()[0]) * 1000
    created = now_ms - int(age_h * HOUR_MS)
    record: dict[Any, Any] = {
        "state": state,
        "kind": "openai",
        "count": count,
        "created_ms": created,
        "updated_ms": now_ms,
        "batch_id": f"batch_{local_id}",
        "provider_status": status,
    }
    client.zadd(batches_key(keys), {local_id: created})
    client.hset(f"{batches_key(keys)}:{local_id}", mapping=record)
