"""A stream's batch lane, seen by the consumer machinery as a stream of its own.

The batch lane (:func:`~sentinel_platform.streams.plumbing.keys.batch_stream_key`) is
read by the stream's own group name and its verdicts go to the stream's results with the
stream's own idempotency markers: a message is decided once whichever lane it came by
(a partition published to both lanes gets one verdict per message). Its leases,
consumer registry, lag and pause keys are its own, so it is never counted as the
stream's lag and never paused by its backpressure. Its DLQ is the stream's. No recent
feed: the feed shows live verdicts. On a cluster every key keeps the stream's hash tag,
so a commit stays single-slot.
"""

from __future__ import annotations

from sentinel_platform.streams.plumbing.keys import StreamKeys, batch_stream_key

#: What the lane's own keys add to the stream's.
SUFFIX = "batch"


def batch_keys(keys: StreamKeys) -> StreamKeys:
    """The keys of ``keys``' batch lane as a consumer's stream."""
    return StreamKeys(
        stream=batch_stream_key(keys),
        group=keys.group,
        dlq=keys.dlq,
        results=keys.results,
        lag=_lag_key(keys.lag),
        paused=f"{keys.paused}:{SUFFIX}",
        lease_prefix=f"{keys.lease_prefix}{SUFFIX}:",
        marker_prefix=keys.marker_prefix,
        consumers=f"{keys.consumers}:{SUFFIX}",
        recent=None,
        rescreen=keys.rescreen,
    )


def _lag_key(lag: str) -> str:
    """The lane's lag key, of the shape the keys beside a lag key are derived from."""
    cluster = ":consumer_lag"
    if lag.endswith(cluster) and not lag.startswith("sentinel:consumer_lag:"):
        return f"{lag[: -len(cluster)]}:{SUFFIX}{cluster}"
    return f"{lag}:{SUFFIX}"
