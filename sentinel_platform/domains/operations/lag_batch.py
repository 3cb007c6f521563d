"""The batch lane beside the lag check's verdict: shown, never judged as lag.

A stream's batch lane (messages of past partitions waiting for a provider's batch, or at
the provider) is read with
:func:`~sentinel_platform.streams.backlog.at_provider.read_shards_at_provider` and added
to ``consumer_lag_within_limits``'s metadata (``batch_*``) by the check and by the lag
gate (after the gate's card is made, so its figures never move the gate), leaving the
outcome as the lag made it: the lag gate never holds a publish for the batch lane, and
no lag alert fires for it. A batch past its completion window is said there (``batch_overdue``, a
WARN or ERROR sentence); the alert itself is the exporter's
(``sentinel_batch_oldest_age_seconds``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sentinel_platform.domains.operations.check_verdict import Verdict
from sentinel_platform.registry import StreamSpec
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.at_provider import (
    BatchBacklog,
    overdue,
    overdue_text,
    read_shards_at_provider,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.sharding.shards import recorded_keys


def batch_metadata(backlog: BatchBacklog) -> dict[str, Any]:
    """The batch lane's figures as the lag check's metadata, apart from the lag's."""
    metadata: dict[str, Any] = {
        "batch_waiting": backlog.waiting,
        "batch_at_provider": backlog.at_provider,
        "batch_batches": backlog.batches,
        "batch_overdue_level": overdue(backlog),
    }
    if backlog.oldest_age_s is not None:
        metadata["batch_oldest_age_s"] = backlog.oldest_age_s
        metadata["batch_oldest_state"] = backlog.oldest_state or ""
        metadata["batch_provider_status"] = backlog.provider_status or "not polled yet"
    if text := overdue_text(backlog):
        metadata["batch_overdue"] = text
    return metadata


def with_batch_lane(
    verdict: Verdict, client: RedisClient, settings: Settings, spec: StreamSpec
) -> Verdict:
    """``verdict`` with the stream's batch lane in its metadata; its outcome unchanged."""
    backlog = read_shards_at_provider(client, recorded_keys(client, settings, spec))
    return replace(verdict, metadata={**verdict.metadata, **batch_metadata(backlog)})
