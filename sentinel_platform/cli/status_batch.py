"""``sentinel status``: a stream's batch lane, apart from its lag.

Messages of past partitions published for the provider's batch API wait in the stream's
batch lane, then at the provider, for up to its completion window; nobody waits for them
within seconds, so they are shown on a line of their own and never in the lag, the zone
or the exit code. The figures are
:func:`~sentinel_platform.streams.backlog.at_provider.read_shards_at_provider`'s, the
read the exporter and the lag check share. A batch older than its completion window is a
warning (:func:`~sentinel_platform.streams.backlog.at_provider.overdue_text`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sentinel_platform.cli.status_provisional import age_text
from sentinel_platform.streams.backlog.at_provider import (
    BatchBacklog,
    overdue_text,
    read_shards_at_provider,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys


def read(client: RedisClient, shards: Sequence[StreamKeys]) -> dict[str, Any]:
    """The batch lane of a stream whose shards' keys are ``shards``, as the status
    document holds it."""
    return read_shards_at_provider(client, shards).as_dict()


def line(lane: Mapping[str, Any] | None) -> str | None:
    """``  batch lane: 1,200 waiting for a batch, 50,000 at the provider in 1 batch,
    oldest 2h 05m (in_progress)``; None when the stream's batch lane is empty."""
    if not lane or not (lane["waiting"] or lane["batches"]):
        return None
    text = f"  batch lane (not lag): {lane['waiting']:,} waiting for a batch"
    if lane["batches"]:
        noun = "batch" if lane["batches"] == 1 else "batches"
        status = lane.get("provider_status") or lane.get("oldest_state") or "?"
        age = lane.get("oldest_age_s")
        oldest = "" if age is None else f", oldest {age_text(age)} ({status})"
        text += f", {lane['at_provider']:,} at the provider in {lane['batches']} {noun}{oldest}"
    return text


def warnings(streams: Sequence[Mapping[str, Any]]) -> list[str]:
    """One sentence per stream whose oldest batch is past its completion window."""
    found = []
    for s in streams:
        lane = s.get("batch")
        if not lane:
            continue
        text = overdue_text(BatchBacklog(**lane))
        if text:
            found.append(f"{s['stream']}: {text}")
    return found
