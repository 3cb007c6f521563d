"""The producer guards the platform no longer uses, kept only to be measured against.

Each takes a client, the stream keys, the settings, a stop predicate and a source of
entries, publishes until the predicate says stop, and returns how many entries it sent.
All read the signal the original read: the lag key the workers write (missing = 0).

* ``binary``: the first Sentinel-L7 guard: one XADD at a time at full speed; at or above
  ``lag_pause`` poll until the lag is below it. No soft zone.
* ``original``: Sentinel-L7's two-threshold guard: read the lag key before every XADD;
  above ``lag_pause`` poll until it is not; above ``lag_warn`` sleep a fixed
  ``lag_warn_sleep_ms``.
* ``fixed``: the same fixed soft sleep in pipelined batches of ``publish_batch_size``
  (the batched variant the platform shipped before the measured-rate controller).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.keys import StreamKeys

Stop = Callable[[], bool]
Entries = Iterator[dict[Any, Any]]


def lag_key(client: redis.Redis, keys: StreamKeys) -> int:
    """The original's reading: the worker-written key, missing = 0."""
    value = client.get(keys.lag)
    return int(value) if value is not None else 0


def _poll_below(
    client: redis.Redis, keys: StreamKeys, limit: int, poll_s: float, stop: Stop
) -> None:
    while lag_key(client, keys) >= limit and not stop():
        time.sleep(poll_s)


def binary(
    client: redis.Redis, keys: StreamKeys, settings: Settings, stop: Stop, entries: Entries
) -> int:
    sent = 0
    poll_s = settings.lag_pause_poll_ms / 1000
    for fields in entries:
        if stop():
            break
        _poll_below(client, keys, settings.lag_pause, poll_s, stop)
        client.xadd(keys.stream, fields)
        sent += 1
    return sent


def original(
    client: redis.Redis, keys: StreamKeys, settings: Settings, stop: Stop, entries: Entries
) -> int:
    sent = 0
    poll_s = settings.lag_pause_poll_ms / 1000
    for fields in entries:
        if stop():
            break
        lag = lag_key(client, keys)
        if lag > settings.lag_pause:
            _poll_below(client, keys, settings.lag_pause + 1, poll_s, stop)
        elif lag > settings.lag_warn:
            time.sleep(settings.lag_warn_sleep_ms / 1000)
        client.xadd(keys.stream, fields)
        sent += 1
    return sent


def fixed(
    client: redis.Redis, keys: StreamKeys, settings: Settings, stop: Stop, entries: Entries
) -> int:
    sent = 0
    poll_s = settings.lag_pause_poll_ms / 1000
    while not stop():
        lag = lag_key(client, keys)
        if lag >= settings.lag_pause:
            _poll_below(client, keys, settings.lag_pause, poll_s, stop)
            continue
        if lag >= settings.lag_warn:
            time.sleep(settings.lag_warn_sleep_ms / 1000)
        batch = list(itertools.islice(entries, settings.publish_batch_size))
        pipe = client.pipeline(transaction=False)
        for fields in batch:
            pipe.xadd(keys.stream, fields)
        pipe.execute()
        sent += len(batch)
    return sent


GUARDS: dict[str, Callable[[redis.Redis, StreamKeys, Settings, Stop, Entries], int]] = {
    "binary": binary,
    "original": original,
    "fixed": fixed,
}
