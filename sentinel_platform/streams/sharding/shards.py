"""The keys of every shard of a declared stream, as every process names them.

A stream declared with one shard (:attr:`~sentinel_platform.registry.StreamSpec.shards`,
the default) is today's single stream: one set of keys, byte for byte
(``plumbing.keys.keys_for``), and nothing is read from Redis. A stream of N shards is N
streams whose hash tags are the recorded ones (:func:`.record.recorded_tags`), so the
worker, the producer and the operators' tools name the same keys however the cluster's
layout changed since the tags were chosen.
"""

from __future__ import annotations

from typing import Any

from sentinel_platform.registry import StreamSpec, stream_specs
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.keys import StreamKeys, dlq_streams, keys_for, shard_keys
from sentinel_platform.streams.sharding.record import recorded_tags, tags_on_record


def keys_of_shards(client: Any, settings: Settings, spec: StreamSpec) -> tuple[StreamKeys, ...]:
    """The keys of each shard of ``spec``, shard 0 first. One shard: the stream's own keys,
    without a round trip; more: those of the recorded tags (chosen and recorded by the
    first process to ask). Raises ``ShardCountChanged`` when the record holds another
    count than the spec declares."""
    if spec.shards == 1:
        return (keys_for(settings, spec),)
    stream = spec.stream_key(settings)
    return tuple(
        shard_keys(settings, spec, tag) for tag in recorded_tags(client, stream, spec.shards)
    )


def recorded_keys(client: Any, settings: Settings, spec: StreamSpec) -> tuple[StreamKeys, ...]:
    """The keys of the shards ``spec``'s stream has on record, for its readers (the status,
    the sensors): the recorded count, even while a raise to the declared one is pending,
    and nothing written. One shard, or none recorded yet: the stream's own keys."""
    tags = tags_on_record(client, spec.stream_key(settings)) if spec.shards > 1 else None
    if not tags:
        return (keys_for(settings, spec),)
    return tuple(shard_keys(settings, spec, tag) for tag in tags)


def dlq_streams_of(client: Any, settings: Settings) -> list[str]:
    """Every DLQ stream the declared streams may dead-letter to: ``plumbing.keys.dlq_streams``
    and, on a cluster, each recorded shard's own (on one server the shards share the
    server's)."""
    dlqs = set(dlq_streams(settings))
    for spec in stream_specs(settings):
        dlqs.update(keys.dlq for keys in recorded_keys(client, settings, spec))
    return sorted(dlqs)
