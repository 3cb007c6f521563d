"""Provisional verdicts re-screened, as users run it: ``python -m workers.watch_transactions``
with ``SENTINEL_ANALYZER_API=openai`` against a real HTTP server speaking Chat Completions
that goes away (every connection closed unanswered) and comes back.

What is promised: a rules fallback made while the model could not be asked is marked
provisional and queued in the same commit; once the model is back every such message gets
exactly one model verdict naming the provisional one it supersedes (both kept), also when
the worker re-screening it is SIGKILLed half way (another recovers its queue entries);
live traffic is decided before queued messages; a fallback for a reason of the message's
own (an unusable answer) is final and never queued; with ``SENTINEL_ANALYZER_RESCREEN``
off nothing is queued.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
import redis

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.provisional import read_provisional
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform.streams.plumbing.replies import entries
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.processes import Fleet, WorkerProcess, model_api_worker
from sentinel_platform_tests.harness.redis_cluster import RedisClusterProcess
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from sentinel_platform_tests.workers.test_context_refusals_in_worker import LONG_MEMO
from workers.rescreening.queue_keys import rescreen_keys

MESSAGES = 12
#: A breaker that opens after two failures and looks again after half a second, so an
#: outage and its end take a test seconds.
FAST_ANALYZER = {
    "analyzer_breaker_failures": 2,
    "analyzer_breaker_cooldown_s": 0.5,
    "analyzer_timeout_s": 2.0,
}


def _worker(
    fleet: Fleet, settings: Settings, server: ModelApiServer, name: str, **values: Any
) -> WorkerProcess:
    values = {**FAST_ANALYZER, **values}
    return model_api_worker(fleet, settings, name, analyzer_url=server.url, **values)


def _publish(
    client: RedisClient, keys: StreamKeys, prefix: str, count: int, **fields: Any
) -> list[str]:
    return [
        str(
            client.xadd(
                keys.stream, {"data": json.dumps({**BASE, **fields, "id": f"{prefix}-{n}"})}
            )
        )
        for n in range(count)
    ]


def _results(client: RedisClient, keys: StreamKeys) -> list[tuple[str, dict[str, str]]]:
    return entries(client.xrange(keys.results))


def _outage(
    fleet: Fleet, settings: Settings, server: ModelApiServer, client: RedisClient, **values: Any
) -> tuple[WorkerProcess, list[str]]:
    """A worker deciding ``MESSAGES`` transactions while the server is away: every one
    a provisional fallback. The worker and the message ids."""
    server.down = True
    worker = _worker(fleet, settings, server, "outage", **values).wait_ready(client, 60)
    keys = transaction_keys(settings)
    ids = _publish(client, keys, "t", MESSAGES)
    wait_until(lambda: client.xlen(keys.results) == MESSAGES, timeout_s=60, what="fallbacks")
    return worker, ids


def _superseded(client: RedisClient, keys: StreamKeys, ids: list[str]) -> None:
    """Each of ``ids`` has one provisional verdict and exactly one model verdict naming it."""
    results = _results(client, keys)
    provisional = {at: f for at, f in results if f.get("provisional") == "true"}
    rescreens = [f for _at, f in results if "rescreen_of" in f]
    assert sorted(f["source_message_id"] for f in provisional.values()) == sorted(ids)
    assert Counter(f["rescreen_of"] for f in rescreens) == dict.fromkeys(provisional, 1)
    for verdict in rescreens:
        superseded = provisional[verdict["rescreen_of"]]
        assert verdict["driver_used"] == "analyzer", verdict
        assert verdict["source_message_id"] == superseded["source_message_id"]
        assert (verdict["txn_id"], verdict["day"]) == (superseded["txn_id"], "2026-11-21")
        assert verdict["model"] and verdict["narrative"]


def test_an_outages_fallbacks_are_queued_with_them_and_re_screened_once_it_is_over(
    model_api_server: ModelApiServer, fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    worker, ids = _outage(fleet, settings, model_api_server, redis_client)
    keys = transaction_keys(settings)
    results = _results(redis_client, keys)
    assert {f["driver_used"] for _at, f in results} == {"fallback"}
    assert {f["provisional"] for _at, f in results} == {"true"}
    assert {f["fallback_cause"] for _at, f in results} <= {"down", "breaker_open"}
    queued = [f for _at, f in entries(redis_client.xrange(keys.rescreen))]
    by_result = {at: f for at, f in results}
    assert sorted(q["sentinel_rescreen_of"] for q in queued) == sorted(by_result)
    for entry in queued:  # the message itself, next to the verdict it was queued with
        verdict = by_result[entry["sentinel_rescreen_of"]]
        assert entry["sentinel_source_id"] == verdict["source_message_id"]
        assert json.loads(entry["data"])["id"] == verdict["txn_id"]
        assert entry["sentinel_cause"] == verdict["fallback_cause"]
        assert entry["sentinel_day"] == "2026-11-21"
    assert read_provisional(redis_client, keys).waiting == MESSAGES

    model_api_server.down = False
    wait_until(
        lambda: redis_client.xlen(keys.results) == 2 * MESSAGES, timeout_s=60, what="re-screens"
    )
    _superseded(redis_client, keys, ids)
    wait_until(
        lambda: read_provisional(redis_client, keys).waiting == 0, timeout_s=10, what="drained"
    )
    wait_until(lambda: redis_client.xlen(keys.rescreen) == 0, timeout_s=20, what="trimmed")
    assert worker.stop() == 0, worker.tail()


def test_a_worker_killed_mid_re_screen_leaves_each_message_exactly_one_model_verdict(
    model_api_server: ModelApiServer, fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    first, ids = _outage(fleet, settings, model_api_server, redis_client)
    keys = transaction_keys(settings)
    model_api_server.latency_s = 0.3  # each re-screen in flight long enough to be cut
    model_api_server.down = False

    def holds_queue_entries() -> bool:
        try:
            mine = redis_client.xpending_range(
                keys.rescreen, keys.group, "-", "+", 10, consumername=first.consumer
            )
        except redis.ResponseError:  # no group yet: the queue's consumer is starting
            return False
        return bool(mine) and redis_client.xlen(keys.results) > MESSAGES

    wait_until(holds_queue_entries, timeout_s=30, what="the first worker re-screening")
    first.kill()
    second = _worker(fleet, settings, model_api_server, "survivor").wait_ready(redis_client, 60)
    wait_until(
        lambda: redis_client.xlen(keys.results) == 2 * MESSAGES, timeout_s=60, what="re-screens"
    )
    _superseded(redis_client, keys, ids)
    wait_until(
        lambda: read_provisional(redis_client, keys).waiting == 0, timeout_s=10, what="drained"
    )
    assert redis_client.xlen(keys.results) == 2 * MESSAGES  # nothing more came
    assert second.stop() == 0, second.tail()


def test_live_traffic_is_decided_before_queued_messages(
    model_api_server: ModelApiServer, fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    first, _ids = _outage(fleet, settings, model_api_server, redis_client)
    assert first.stop() == 0, first.tail()
    keys = transaction_keys(settings)
    model_api_server.down = False
    model_api_server.latency_s = 0.02
    live = _publish(redis_client, keys, "live", 4 * MESSAGES)
    _worker(fleet, settings, model_api_server, "back", read_count=4).wait_ready(redis_client, 60)
    total = MESSAGES + len(live) + MESSAGES
    wait_until(lambda: redis_client.xlen(keys.results) == total, timeout_s=90, what="verdicts")
    order = [
        "rescreen" if "rescreen_of" in f else "live"
        for _at, f in _results(redis_client, keys)[MESSAGES:]
    ]
    assert order == ["live"] * len(live) + ["rescreen"] * MESSAGES, order


@pytest.mark.parametrize("cause", ["unusable", "refused"])
def test_a_fallback_for_a_reason_of_the_messages_own_is_final_and_never_queued(
    model_api_server: ModelApiServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
    cause: str,
) -> None:
    memo: dict[str, str] = {}
    if cause == "unusable":
        model_api_server.cut_every = 1  # every answer cut at max_tokens: billed, no verdict
    else:
        model_api_server.context_tokens = 700  # a long memo does not fit: refused as too long
        model_api_server.context_dialect = "openai"
        memo = {"message": LONG_MEMO}
    closed = {"analyzer_breaker_failures": 10}  # the breaker stays closed: all are answers
    worker = _worker(fleet, settings, model_api_server, "cut", **closed)
    worker.wait_ready(redis_client, 60)
    keys = transaction_keys(settings)
    _publish(redis_client, keys, "c", 3, **memo)
    wait_until(lambda: redis_client.xlen(keys.results) == 3, timeout_s=60, what="fallbacks")
    results = [f for _at, f in _results(redis_client, keys)]
    assert {(f["driver_used"], f["fallback_cause"]) for f in results} == {("fallback", cause)}
    assert not any("provisional" in f for f in results)
    assert redis_client.xlen(keys.rescreen) == 0  # the commit would have queued it with them
    assert worker.stop() == 0, worker.tail()


def test_with_re_screening_off_a_fallback_is_provisional_but_nothing_is_queued(
    model_api_server: ModelApiServer, fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    worker, _ids = _outage(fleet, settings, model_api_server, redis_client, analyzer_rescreen=False)
    keys = transaction_keys(settings)
    assert {f["provisional"] for _at, f in _results(redis_client, keys)} == {"true"}
    assert redis_client.xlen(keys.rescreen) == 0  # the commit would have queued it with them
    assert worker.stop() == 0, worker.tail()


@pytest.mark.cluster
def test_on_a_cluster_the_queue_shares_its_streams_slot_and_is_re_screened(
    redis_cluster: RedisClusterProcess,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    model_api_server: ModelApiServer,
    fleet: Fleet,
) -> None:
    worker, ids = _outage(fleet, cluster_settings, model_api_server, cluster_client)
    keys = transaction_keys(cluster_settings)
    assert keys.rescreen.startswith("{transactions}")
    assert cluster_client.xlen(keys.rescreen) == MESSAGES  # queued by the commit's script
    model_api_server.down = False
    wait_until(
        lambda: cluster_client.xlen(keys.results) == 2 * MESSAGES, timeout_s=60, what="re-screens"
    )
    _superseded(cluster_client, keys, ids)
    assert worker.stop() == 0, worker.tail()


def test_the_queue_consumer_starts_only_once_the_queue_holds_an_entry(
    model_api_server: ModelApiServer, fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(settings)
    queue = rescreen_keys(keys)
    worker = _worker(fleet, settings, model_api_server, "lazy").wait_ready(redis_client, 60)
    _publish(redis_client, keys, "ok", 3)
    wait_until(lambda: redis_client.xlen(keys.results) == 3, timeout_s=60, what="verdicts")
    assert not redis_client.exists(queue.lease(worker.consumer)), "no lease for an empty queue"
    model_api_server.down = True
    ids = _publish(redis_client, keys, "t", 3)
    wait_until(lambda: redis_client.xlen(keys.results) == 6, timeout_s=60, what="fallbacks")
    model_api_server.down = False
    wait_until(
        lambda: redis_client.exists(queue.lease(worker.consumer)),
        timeout_s=30,
        what="the queue's consumer started",
    )
    wait_until(
        lambda: sum("rescreen_of" in f for _at, f in _results(redis_client, keys)) == 3,
        timeout_s=60,
        what="the queued messages re-screened",
    )
    _superseded(redis_client, keys, ids)
    assert worker.stop() == 0, worker.tail()
