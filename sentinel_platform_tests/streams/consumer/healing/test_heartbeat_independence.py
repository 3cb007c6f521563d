"""The lease heartbeat depends on no side write.

The heartbeat thread refreshes the worker's lease; the lag key and the peaks record are
written beside it. A side write that keeps failing (here the peaks key holds a string, so
its ``ZADD`` is refused with WRONGTYPE) must neither stop nor delay the refresh: a live
worker whose lease lapsed would be robbed by the others, and would itself be unable to
claim anything (the claim script checks the claimer's lease). Nor may it hold the read
loop up: the worker keeps consuming at full speed and only reports the failed write.
"""

from __future__ import annotations

import time

from sentinel_platform.streams.backlog.peaks import peaks_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import FAST_TIMINGS, StartWorker
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until

LEASE_TTL_S = int(FAST_TIMINGS["SENTINEL_LEASE_TTL_MS"]) / 1000


def _break_peaks(client: RedisClient, keys: StreamKeys) -> None:
    """The documented sorted set, replaced by a string: every lag write is refused."""
    client.delete(peaks_key(keys))
    client.set(peaks_key(keys), "not a sorted set")


def test_a_failing_lag_write_never_lets_the_lease_lapse(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    worker = start_worker().wait_ready(redis_client)
    _break_peaks(redis_client, tx_keys)
    wait_until(lambda: "WRONGTYPE" in worker.text(), 10)  # the lag write has failed

    # Watch the lease for more than three TTLs: it must exist at every look.
    watch_until = time.monotonic() + 3.5 * LEASE_TTL_S
    lapses = 0
    while time.monotonic() < watch_until:
        lapses += not worker.lease_alive(redis_client)
        time.sleep(0.02)
    assert lapses == 0, worker.text()[-4000:]
    assert worker.proc.poll() is None
    assert redis_client.type(peaks_key(tx_keys)) == "string"  # still broken throughout
    assert worker.events("lease_lost") == []  # never expired and taken again
    assert "Traceback" not in worker.text()


def test_a_failing_lag_write_never_holds_the_read_loop_up(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    worker = start_worker().wait_ready(redis_client)
    _break_peaks(redis_client, tx_keys)
    wait_until(lambda: "WRONGTYPE" in worker.text(), 10)

    # One message at a time, the lag written (and refused) after each pass: the loop goes
    # on without the backoff of an outage.
    for n in range(10):
        publish(redis_client, tx_keys, [{"key": f"m{n}"}])
        wait_until(lambda n=n: redis_client.xlen(tx_keys.results) == n + 1, 5)
    assert worker.events("redis_error") == []  # a side write is not an outage
    assert worker.events("side_write_failed"), worker.text()[-4000:]
    assert redis_client.type(peaks_key(tx_keys)) == "string"  # still broken throughout
