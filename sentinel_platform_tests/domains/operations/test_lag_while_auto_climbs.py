"""A limit that is still climbing is not backpressure: the lag check against a real worker.

The journey's case: a worker on the default (``auto``) asks a 0.2 s analyzer; a burst of
170 messages lands while its limit still climbs from its start. The messages waiting then
are many seconds of work at the drain rate of the first seconds, but the worker takes more
of them at once with every round trip: no backpressure and no advice to raise the concurrency
while it climbs. A worker pinned to one call at a time holds the same burst for real:
backpressure, and the advice.
"""

from __future__ import annotations

import time
from typing import Any

from sentinel_platform.domains.operations.check_verdict import Verdict
from sentinel_platform.domains.operations.lag_verdict import evaluate_lag
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.drain import DrainMeter, completed_count, write_drain_rate
from sentinel_platform.streams.operators.group_view import lag_snapshot
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.processes import Fleet, child_env, wait_leases
from sentinel_platform_tests.harness.streams import sample_transaction

BURST = 170
ADVICE = "raise SENTINEL_WORKER_CONCURRENCY"


def _watch(
    client: RedisClient, keys: StreamKeys, settings: Settings, seconds: float
) -> list[Verdict]:
    """Play the producer's part (measure and publish the drain rate) and the lag check's
    (a verdict every 0.25 s) until the burst is drained, publishing would pause (backpressure) or
    ``seconds`` pass."""
    meter, verdicts = DrainMeter(), []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        group = next(g for g in client.xinfo_groups(keys.stream) if g["name"] == keys.group)
        read, pending = group.get("entries-read"), int(group["pending"])
        lag = int(group.get("lag") or 0) + pending
        done = completed_count(None if read is None else int(read), pending)
        rate = meter.observe(time.monotonic(), done, lag)
        if rate is not None:
            write_drain_rate(client, keys, rate, lag)
        verdicts.append(evaluate_lag(lag_snapshot(client, keys), settings))
        if client.xlen(keys.results) >= BURST or verdicts[-1].blocks:
            break  # drained, or alarmed: either answers the question
        time.sleep(0.25)
    return verdicts


def _burst(
    fleet: Fleet,
    redis_client: RedisClient,
    settings: Settings,
    analyzer: AnalyzerServer,
    idle_s: float = 0.0,
    **more: Any,
) -> list[Verdict]:
    analyzer.mode, analyzer.delay_s = "slow", 0.2
    keys = transaction_keys(settings)
    env = child_env(settings.redis_url_value, settings.home_dir, analyzer_url=analyzer.url, **more)
    worker = fleet.worker("transactions", "climber", env)
    wait_leases(redis_client, keys, [worker], timeout_s=60)
    time.sleep(idle_s)  # the scenario: a worker idle this long before its first message
    for n in range(BURST):
        redis_client.xadd(keys.stream, sample_transaction(n).to_fields())
    return _watch(redis_client, keys, settings, 45.0)


def _alarmed(verdicts: list[Verdict]) -> list[str]:
    return [v.description for v in verdicts if v.blocks or ADVICE in v.description]


def test_a_burst_while_auto_still_climbs_raises_no_error_and_no_advice_to_raise_it(
    fleet: Fleet, redis_client: RedisClient, settings: Settings, analyzer_server: AnalyzerServer
) -> None:
    verdicts = _burst(fleet, redis_client, settings, analyzer_server)
    assert not _alarmed(verdicts)
    assert redis_client.xlen(transaction_keys(settings).results) == BURST, "not drained"
    climbing = [v for v in verdicts if v.metadata.get("limit_climbing")]
    assert climbing, "the worker never said its limit was climbing"


def test_a_burst_after_the_worker_idled_past_its_climb_memory_raises_no_error(
    fleet: Fleet, redis_client: RedisClient, settings: Settings, analyzer_server: AnalyzerServer
) -> None:
    """A worker started, then idle (``sentinel up`` before the first publish): its limit
    was never tested, so its climb starts with the first burst, however long it waited."""
    memory_s = 2  # the climb's memory is the holding's TTL
    verdicts = _burst(
        fleet, redis_client, settings, analyzer_server, 2.5 * memory_s, lag_key_ttl_s=memory_s
    )
    assert not _alarmed(verdicts)
    assert redis_client.xlen(transaction_keys(settings).results) == BURST, "not drained"
    assert any(v.metadata.get("limit_climbing") for v in verdicts)


def test_the_same_burst_on_a_worker_pinned_to_one_call_is_backpressure_with_the_advice(
    fleet: Fleet, redis_client: RedisClient, settings: Settings, analyzer_server: AnalyzerServer
) -> None:
    verdicts = _burst(fleet, redis_client, settings, analyzer_server, worker_concurrency=1)
    alarmed = [v for v in verdicts if v.blocks and ADVICE in v.description]
    assert alarmed, [v.description for v in verdicts]
    assert not any(v.metadata.get("limit_climbing") for v in verdicts)
