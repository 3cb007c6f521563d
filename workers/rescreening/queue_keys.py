"""A stream's re-screen queue, seen by the consumer loop as a stream of its own.

The queue (``StreamKeys.rescreen``) is read by the stream's own group name, and its
verdicts go to the stream's results; everything else is the queue's own, so that a
re-screen is settled apart from the message's live delivery: its idempotency markers
(one re-screen per provisional verdict, whatever the live marker says), its leases and
consumer registry (a worker's live and re-screen consumers share a name), its lag key
(the producers pace on the stream's lag, never on the queue's). The DLQ is the stream's:
an unreadable queue entry is dead-lettered beside the stream's. No recent feed: the
feed shows live verdicts. On a cluster every key keeps the stream's hash tag, so the
queue's commit stays single-slot.
"""

from __future__ import annotations

from sentinel_platform.streams.plumbing.keys import StreamKeys

#: What the queue's own keys add to the stream's.
SUFFIX = "rescreen"


def rescreen_keys(keys: StreamKeys) -> StreamKeys:
    """The keys of ``keys``' re-screen queue as a consumer's stream (``keys.rescreen``
    must be set)."""
    if not keys.rescreen:
        raise ValueError(f"stream {keys.stream} has no re-screen queue")
    return StreamKeys(
        stream=keys.rescreen,
        group=keys.group,
        dlq=keys.dlq,
        results=keys.results,
        lag=_lag_key(keys.lag),
        paused=f"{keys.paused}:{SUFFIX}",
        lease_prefix=f"{keys.lease_prefix}{SUFFIX}:",
        marker_prefix=f"{keys.marker_prefix}{SUFFIX}:",
        consumers=f"{keys.consumers}:{SUFFIX}",
        recent=None,
        rescreen="",
    )


def _lag_key(lag: str) -> str:
    """The queue's lag key, of the shape the keys beside a lag key are derived from
    (``sentinel:consumer_lag:<stream>:rescreen``, ``{<stream>}:rescreen:consumer_lag``)."""
    cluster = ":consumer_lag"
    if lag.endswith(cluster) and not lag.startswith("sentinel:consumer_lag:"):
        return f"{lag[: -len(cluster)]}:{SUFFIX}{cluster}"
    return f"{lag}:{SUFFIX}"
