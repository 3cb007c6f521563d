"""Key names of one stream, derived in one place.

On a single Redis server the names are those of Sentinel-L7 (``sentinel:dlq``,
``sentinel:consumer_lag:<stream>``, ...), so its producers and dashboards keep working.
On a Redis Cluster every key that takes part in an atomic operation with the stream
(DLQ + XACK, result + idempotency marker + XACK, replay) must live in the stream's hash
slot, so the names carry the stream's hash tag instead: ``{transactions}:dlq``. The
stream key itself is unchanged, and the slot of ``{transactions}`` equals the slot of
``transactions``, so both streams may live on different shards.
"""

from __future__ import annotations

from dataclasses import dataclass

from sentinel_platform.registry import AXIOMS, TRANSACTIONS, StreamSpec, spec_for, stream_specs
from sentinel_platform.settings import Settings

#: The consumer name holding messages a stopping worker handed back to its group: it never
#: has a lease, so every worker may claim them (the consumer's outbox hands them back, the
#: operations sensors prune the holder once it is empty).
HANDBACK_CONSUMER = "sentinel-handback"


@dataclass(frozen=True)
class StreamKeys:
    """Every Redis key the platform uses for one stream and its consumer group."""

    stream: str
    group: str
    dlq: str
    results: str
    lag: str
    paused: str
    lease_prefix: str
    marker_prefix: str
    consumers: str
    recent: str | None = None
    #: the stream's re-screen queue: the provisional (rules fallback) verdicts' inputs,
    #: waiting for the model (:mod:`sentinel_platform.streams.backlog.provisional`)
    rescreen: str = ""

    def lease(self, consumer: str) -> str:
        return f"{self.lease_prefix}{consumer}"

    def marker(self, natural_key: str) -> str:
        return f"{self.marker_prefix}{natural_key}"


#: The suffix of a stream's shadow result stream (:func:`shadow_results_key`).
SHADOW_SUFFIX = "shadow"


def shadow_results_key(keys: StreamKeys) -> str:
    """The shadow result stream of ``keys``' stream: where a model on trial writes its
    verdicts beside the live ones, read back by the quality asset. The results stream's
    name with ``:shadow`` (``sentinel:verdicts:shadow``), so on a cluster it shares the
    results' hash slot."""
    return f"{keys.results}:{SHADOW_SUFFIX}"


def _tag(stream: str) -> str:
    # A stream already carrying a hash tag keeps it; otherwise the whole name is the tag.
    if "{" in stream and "}" in stream.split("{", 1)[1]:
        return stream
    return "{" + stream + "}"


def stream_keys(
    settings: Settings,
    stream: str,
    group: str,
    results: str,
    recent: str | None = None,
) -> StreamKeys:
    if settings.is_cluster:
        tag = _tag(stream)
        return StreamKeys(
            stream=stream,
            group=group,
            dlq=f"{tag}:dlq",
            results=f"{tag}:{results.split(':')[-1]}",
            lag=f"{tag}:consumer_lag",
            paused=f"{tag}:producer_paused",
            lease_prefix=f"{tag}:lease:",
            marker_prefix=f"{tag}:done:",
            consumers=f"{tag}:consumers",
            recent=f"{tag}:{recent.split(':')[-1]}" if recent else None,
            rescreen=f"{tag}:rescreen",
        )
    return StreamKeys(
        stream=stream,
        group=group,
        dlq=settings.dlq_stream,
        results=results,
        lag=f"sentinel:consumer_lag:{stream}",
        paused=f"sentinel:producer_paused:{stream}",
        lease_prefix=f"sentinel:lease:{stream}:",
        marker_prefix=f"sentinel:done:{stream}:",
        consumers=f"sentinel:consumers:{stream}",
        recent=recent,
        rescreen=f"sentinel:rescreen:{stream}",
    )


def keys_for(settings: Settings, spec: StreamSpec | str) -> StreamKeys:
    """The keys of one declared stream (a spec or its registry name)."""
    if isinstance(spec, str):
        spec = spec_for(spec, settings)
    return stream_keys(
        settings,
        spec.stream_key(settings),
        spec.group_name(settings),
        spec.results_key(settings),
        spec.recent_key(settings),
    )


def shard_keys(settings: Settings, spec: StreamSpec | str, tag: str) -> StreamKeys:
    """The keys of one shard of a declared stream, whose hash tag is ``tag`` (recorded by
    ``sentinel_platform.streams.sharding.record``): the stream's key with the tag
    appended (``transactions:{transactions~0}``), its group, and on a cluster every
    other key named after that, so the whole shard lives in the tag's slot and keeps
    every single-slot script of a stream. On a single server the shards share the
    server-wide names (the DLQ, the results), as the streams do."""
    base = keys_for(settings, spec)
    return stream_keys(settings, f"{base.stream}:{tag}", base.group, base.results, base.recent)


def transaction_keys(settings: Settings) -> StreamKeys:
    return keys_for(settings, TRANSACTIONS)


def axiom_keys(settings: Settings) -> StreamKeys:
    return keys_for(settings, AXIOMS)


def all_stream_keys(settings: Settings) -> tuple[StreamKeys, ...]:
    """The keys of every declared stream (:func:`~sentinel_platform.registry.stream_specs`)."""
    return tuple(keys_for(settings, spec) for spec in stream_specs(settings))


def dlq_streams(settings: Settings) -> list[str]:
    """Distinct DLQ streams (one on a single server, one per stream on a cluster)."""
    return sorted({keys.dlq for keys in all_stream_keys(settings)})


def attempt_key_prefix(keys: StreamKeys) -> str:
    """The prefix shared by every attempt record of ``keys.stream``; itself names no key.

    Each redelivered message has a record of its own (:func:`attempt_key`), so that one
    message's writes never refresh another's TTL. ``<prefix>*`` matches every record of
    the stream: ``sentinel:attempts:<stream>:`` on one server, ``{<stream>}:attempts:`` on a
    cluster. Derived from the marker prefix, so on a cluster it carries the stream's hash
    tag and every record lives in the stream's slot, next to the keys it is deleted with.
    """
    if ":done:" in keys.marker_prefix:
        return keys.marker_prefix.replace(":done:", ":attempts:", 1)
    return f"{keys.marker_prefix}__attempts:"


def dead_letters_key(keys: StreamKeys) -> str:
    """The sorted set of ``keys.stream``'s dead-lettered message ids (score: when, in ms).

    ``sentinel:dead_lettered:<stream>`` on one server, ``{<stream>}:dead_lettered`` on a
    cluster: derived from the marker prefix, so it shares the stream's hash slot and the
    dead-letter script stays single-slot.
    """
    if ":done:" in keys.marker_prefix:
        return keys.marker_prefix.replace(":done:", ":dead_lettered:", 1).rstrip(":")
    return f"{keys.marker_prefix}__dead_lettered"


def attempt_key(keys: StreamKeys, message_id: str) -> str:
    """The attempt record of one message of ``keys.stream`` (see ``streams.attempts``)."""
    return f"{attempt_key_prefix(keys)}{message_id}"


def _beside_lag(keys: StreamKeys, name: str) -> str:
    """A per-stream key next to the lag key: ``sentinel:<name>:<stream>`` on one server,
    ``{<stream>}:<name>`` (the stream's hash slot) on a cluster."""
    single = "sentinel:consumer_lag:"
    if keys.lag.startswith(single):
        return f"sentinel:{name}:{keys.lag[len(single) :]}"
    return f"{keys.lag.rsplit(':consumer_lag', 1)[0]}:{name}"


def drain_rate_key(keys: StreamKeys) -> str:
    """The fleet's measured drain rate in rows/s (a float, with a TTL; written by
    :func:`~sentinel_platform.streams.backlog.drain.write_drain_rate`)."""
    return _beside_lag(keys, "drain_rate")


def work_seconds_key(keys: StreamKeys) -> str:
    """Seconds of queued work: the lag over the drain rate when it was measured (TTL)."""
    return _beside_lag(keys, "work_seconds")


def holdings_key(keys: StreamKeys) -> str:
    """The consumers that published what they may hold in flight (a sorted set)
    (:mod:`~sentinel_platform.streams.backlog.holdings`); beside the lag key, in its slot."""
    return _beside_lag(keys, "holdings")


def climbing_key(keys: StreamKeys, consumer: str) -> str:
    """Set while ``consumer``'s adaptive limit still climbs (with its holding's TTL):
    ``sentinel:climbing:<stream>:<consumer>``, in the stream's slot on a cluster."""
    return f"{_beside_lag(keys, 'climbing')}:{consumer}"


def holding_key(keys: StreamKeys, consumer: str) -> str:
    """What ``consumer`` may hold in flight now (an integer, with the lag key's TTL):
    ``sentinel:holding:<stream>:<consumer>``, or ``{<stream>}:holding:<consumer>`` on a
    cluster, so the fleet's reader fetches every worker's share from the stream's slot."""
    return f"{_beside_lag(keys, 'holding')}:{consumer}"


def batches_key(keys: StreamKeys) -> str:
    """The stream's batch ledger: its batch lane's batches by when each was recorded (a
    sorted set; :mod:`workers.analyzer.batch.ledger` names each batch's record and
    messages below it): ``sentinel:batches:<stream>`` on one server,
    ``{<stream>}:batches`` on a cluster, so a batch's keys share the stream's slot and
    its scripts stay single-slot."""
    return _beside_lag(keys, "batches")


def batch_stream_key(keys: StreamKeys) -> str:
    """The stream's batch lane: the messages of partitions published for a provider's
    batch API (the stream's own wire fields, read by the stream's group), apart from the
    stream so they are never lag: ``sentinel:batch:<stream>`` on one server,
    ``{<stream>}:batch`` on a cluster, in the stream's hash slot."""
    return _beside_lag(keys, "batch")
