"""How far the workers got: entries processed per group, the recent rate, the last publish.

``entries-read`` of ``XINFO GROUPS`` counts every entry the group was ever handed (Redis
7+), the operator's "did my run get processed?". A rate needs two readings apart in
time, so readers (the lag sensor each tick, ``sentinel status`` each call) append
``(time, entries-read)`` samples to a small sorted set per stream, trimmed to
``SAMPLE_HORIZON_S``; the rate over the last minute is computed from the oldest sample
in that minute and the current reading.

The publisher keeps the outcome of its last publish per stream in a hash (run, partition,
rows, time, outcome, first line of the error), so the status can answer "what was last
published, and did it work?" without opening Dagster's database.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import redis

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.replies import field_args, text, text_dict

#: Samples older than this are dropped.
SAMPLE_HORIZON_S = 600
#: The rate is taken over at most this long.
RATE_WINDOW_S = 60
#: Two readings closer than this give no meaningful rate.
MIN_SPAN_S = 5
LAST_PUBLISH_TTL_S = 30 * 86_400


def samples_key(keys: StreamKeys) -> str:
    """Derived from the lag key, so it shares the stream's hash slot on a cluster."""
    return f"{keys.lag}:processed"


def last_publish_key(keys: StreamKeys) -> str:
    return f"{keys.lag}:last_publish"


def entries_read(client: RedisClient, keys: StreamKeys) -> int | None:
    """The group's ``entries-read``, or None (no stream or group yet, or unknown)."""
    try:
        groups = client.xinfo_groups(keys.stream)
    except redis.ResponseError:
        return None
    group = next((g for g in groups if g["name"] == keys.group), None)
    value = group.get("entries-read") if group else None
    return None if value is None else int(value)


def record_sample(client: RedisClient, keys: StreamKeys, count: int, now_s: float) -> None:
    key = samples_key(keys)
    millis = int(now_s * 1000)
    pipe = client.pipeline(transaction=False)
    pipe.zadd(key, {f"{millis}:{count}": millis})
    pipe.zremrangebyscore(key, "-inf", millis - SAMPLE_HORIZON_S * 1000)
    pipe.expire(key, SAMPLE_HORIZON_S)
    pipe.execute()


def read_samples(client: RedisClient, keys: StreamKeys) -> list[tuple[float, int]]:
    """``(time_s, entries_read)`` oldest first."""
    out = []
    # Without WITHSCORES, ZRANGE returns members only.
    for member in cast("list[bytes | str]", client.zrange(samples_key(keys), 0, -1)):
        millis, count = text(member).split(":", 1)
        out.append((int(millis) / 1000, int(count)))
    return out


def rate_per_s(
    samples: Sequence[tuple[float, int]],
    now_s: float,
    current: int,
    window_s: int = RATE_WINDOW_S,
    min_span_s: int = MIN_SPAN_S,
) -> float | None:
    """Entries per second over the last ``window_s``, from the oldest sample inside it.

    None when no sample is old enough to measure against. A counter that went down (the
    group was recreated) restarts the count rather than giving a negative rate.
    """
    inside = [(t, n) for t, n in samples if now_s - window_s <= t <= now_s - min_span_s]
    if not inside:
        return None
    start_s, start = inside[0]
    done = current - start if current >= start else current
    return done / (now_s - start_s)


@dataclass(frozen=True)
class Progress:
    processed: int | None
    rate_per_s: float | None


def progress(client: RedisClient, keys: StreamKeys, now_s: float | None = None) -> Progress:
    """The current count and the last minute's rate; the reading is kept as a sample."""
    now_s = time.time() if now_s is None else now_s
    count = entries_read(client, keys)
    if count is None:
        return Progress(None, None)
    rate = rate_per_s(read_samples(client, keys), now_s, count)
    record_sample(client, keys, count, now_s)
    return Progress(count, rate)


def summed(parts: Sequence[Progress]) -> Progress:
    """The progress of a sharded stream from its shards': the counts and rates added, None
    where no shard has one. Each shard keeps its own samples (those ``sentinel status``
    reads per shard), so no sample set ever mixes two counters."""
    counts = [part.processed for part in parts if part.processed is not None]
    rates = [part.rate_per_s for part in parts if part.rate_per_s is not None]
    return Progress(sum(counts) if counts else None, sum(rates) if rates else None)


def record_publish(client: RedisClient, keys: StreamKeys, fields: Mapping[str, object]) -> None:
    """Replace the stream's last-publish record (values stored as text; None as empty)."""
    key = last_publish_key(keys)
    mapping = {k: "" if v is None else str(v) for k, v in fields.items()}
    pipe = client.pipeline(transaction=True)
    pipe.delete(key)
    pipe.hset(key, mapping=field_args(mapping))
    pipe.expire(key, LAST_PUBLISH_TTL_S)
    pipe.execute()


def last_publish(client: RedisClient, keys: StreamKeys) -> dict[str, str] | None:
    return text_dict(client.hgetall(last_publish_key(keys))) or None
