"""Each stream's batch lane, as the exporter serves it: apart from the lag gauges.

Read over the shards on record of a stream (its own keys when it has one) with
:func:`~sentinel_platform.streams.backlog.at_provider.read_shards_at_provider`, the read
``sentinel status`` and the lag check share. Messages waiting for a provider's batch, or
at the provider, are no lag (nobody waits for them within seconds), so they are gauges of
their own, never part of ``sentinel_stream_lag_messages``; a batch older than its
completion window is alerted on by ``sentinel_batch_oldest_age_seconds``.
:func:`batch_families` is the pure translation into metric families.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from sentinel_platform.registry import StreamSpec
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.at_provider import BatchBacklog, read_shards_at_provider
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.sharding.shards import recorded_keys


def read_stream_batch(client: RedisClient, settings: Settings, spec: StreamSpec) -> BatchBacklog:
    """``spec``'s batch lane over its shards on record."""
    return read_shards_at_provider(client, recorded_keys(client, settings, spec))


def batch_families(
    streams: Sequence[tuple[Sequence[str], BatchBacklog]], labels: Sequence[str]
) -> list[Metric]:
    """The batch lane's gauges per stream (``labels`` its label values, in the order of
    the names in ``labels``): its messages by ``state`` (``waiting`` for a batch,
    ``at_provider``), its batches, and the oldest batch's age (0 when none)."""
    messages = GaugeMetricFamily(
        "sentinel_batch_messages",
        "Messages of the stream's batch lane: waiting for a batch, or at the provider in a "
        "batch; never lag.",
        labels=[*labels, "state"],
    )
    batches = GaugeMetricFamily(
        "sentinel_batch_batches",
        "Batches of the stream's batch lane in the batch ledger (not yet settled).",
        labels=list(labels),
    )
    oldest = GaugeMetricFamily(
        "sentinel_batch_oldest_age_seconds",
        "Age of the oldest batch in the batch ledger; 0 when there is none.",
        labels=list(labels),
    )
    for values, backlog in streams:
        messages.add_metric([*values, "waiting"], backlog.waiting)
        messages.add_metric([*values, "at_provider"], backlog.at_provider)
        batches.add_metric(list(values), backlog.batches)
        oldest.add_metric(list(values), backlog.oldest_age_s or 0.0)
    return [messages, batches, oldest]
