"""The provisional verdicts of each stream, as the exporter serves them.

Read over the shards on record of a stream (its own keys when it has one) with
:func:`~sentinel_platform.streams.backlog.provisional_shards.read_shards_provisional`,
the read ``sentinel status`` shares: the verdicts waiting in every shard's re-screen
queue, and the oldest one's age over them all. :func:`provisional_families` is the pure
translation into metric families.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from sentinel_platform.registry import StreamSpec
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.provisional import ProvisionalBacklog
from sentinel_platform.streams.backlog.provisional_shards import read_shards_provisional
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.sharding.shards import recorded_keys


def read_stream_provisional(
    client: RedisClient, settings: Settings, spec: StreamSpec
) -> ProvisionalBacklog:
    """``spec``'s provisional verdicts over its shards on record."""
    return read_shards_provisional(client, recorded_keys(client, settings, spec))


def provisional_families(
    streams: Sequence[tuple[Sequence[str], ProvisionalBacklog]], labels: Sequence[str]
) -> list[Metric]:
    """Two gauges per stream (``labels`` its label values, in the order of the names in
    ``labels``): the verdicts waiting to be re-screened, and the oldest one's age (0
    when none waits)."""
    waiting = GaugeMetricFamily(
        "sentinel_provisional_verdicts",
        "Rules fallbacks made while the analyzer could not be asked, waiting in the "
        "stream's re-screen queue for the model.",
        labels=list(labels),
    )
    oldest = GaugeMetricFamily(
        "sentinel_provisional_oldest_age_seconds",
        "Age of the oldest provisional verdict waiting to be re-screened; 0 when none waits.",
        labels=list(labels),
    )
    for values, backlog in streams:
        waiting.add_metric(list(values), backlog.waiting)
        oldest.add_metric(list(values), backlog.oldest_age_s or 0.0)
    return [waiting, oldest]
