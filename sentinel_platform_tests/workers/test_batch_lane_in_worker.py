"""The batch lane as users run it: ``python -m workers.watch_transactions`` with
``SENTINEL_ANALYZER_API=openai`` or ``anthropic`` pointed at a real HTTP server speaking
that provider's batch API (and its real-time API, for the live stream), a real Redis.

What is promised: every message put in the stream's batch lane (the live stream's wire
fields, as the publish path writes them) is decided exactly once, with ``lane=batch``,
through one batch; a request that comes back ``errored`` or ``expired`` follows
``SENTINEL_ANALYZER_WHEN_DOWN``; a batch that fails as a whole is told apart from its
lines; a worker killed while its batch is at the provider loses nothing and submits
nothing twice (another worker resumes polling it); the live stream's messages are decided
in real time meanwhile; an API without a batch lane decides the lane's messages in real
time, said once at start-up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, cast

import pytest
import redis

from sentinel_platform.schemas import Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import (
    batch_stream_key,
    batches_key,
    transaction_keys,
)
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.batch_api_server import BatchApiServer
from sentinel_platform_tests.harness.processes import (
    FAST_TIMINGS,
    Fleet,
    WorkerProcess,
    child_env,
    model_api_worker,
)
from sentinel_platform_tests.harness.waits import WaitTimeout, wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE

KEY = "sk-B4tch-L4ne-W0rker-K3y-0123456789"
#: The lane's timings in these tests: polls and the gather window of a fraction of a second.
FAST_LANE = {
    "analyzer_batch_lane": "on",  # the stub stands in for the provider's own host
    "analyzer_batch_poll_s": 0.1,
    "analyzer_batch_poll_max_s": 0.3,
    "analyzer_batch_gather_s": 0.3,
}
APIS = ("openai", "anthropic")


def lane_worker(
    fleet: Fleet, settings: Settings, server: BatchApiServer, name: str, api: str, **values: Any
) -> WorkerProcess:
    base = f"{server.url}/v1" if api == "openai" else server.url
    values = {"analyzer_url": base, "analyzer_api_key": KEY, **FAST_LANE, **values}
    return model_api_worker(fleet, settings, name, api=api, **values)


def transactions(prefix: str, count: int) -> list[dict[str, str]]:
    """Transactions as their stream carries them (``WireModel.to_fields``)."""
    return [
        Transaction(**{**BASE, "id": f"{prefix}-{n}", "amount": 100.0 + n}).to_fields()
        for n in range(count)
    ]


def publish(client: RedisClient, stream: str, entries: list[dict[str, str]]) -> None:
    pipe = client.pipeline(transaction=False)
    for fields in entries:
        pipe.xadd(stream, cast(dict[Any, Any], fields))
    pipe.execute()


def verdicts(client: RedisClient, settings: Settings) -> list[dict[str, str]]:
    keys = transaction_keys(settings)
    return [dict(fields) for _, fields in cast(list[Any], client.xrange(keys.results))]


def wait_for_verdicts(
    client: RedisClient, settings: Settings, count: int, worker: WorkerProcess
) -> list[dict[str, str]]:
    waited(lambda: len(verdicts(client, settings)) >= count, worker, f"{count} verdicts")
    return verdicts(client, settings)


def waited(condition: Callable[[], object], worker: WorkerProcess, what: str) -> None:
    """:func:`wait_until`, the worker's last lines in the failure."""
    try:
        wait_until(condition, timeout_s=30, what=what)
    except WaitTimeout as exc:
        raise AssertionError(f"{exc}\n{worker.tail(20)}") from None


def lane_pending(client: RedisClient, settings: Settings) -> int:
    """The lane's pending entries; 0 before the lane's process has made its group (at id
    0: an entry published before it is still read)."""
    keys = transaction_keys(settings)
    try:
        return int(client.xpending(batch_stream_key(keys), keys.group)["pending"])
    except redis.ResponseError as exc:
        if "NOGROUP" not in str(exc):
            raise
        return 0


def settled(client: RedisClient, settings: Settings) -> bool:
    """The ledger is empty and nothing of the lane is pending."""
    keys = transaction_keys(settings)
    return client.zcard(batches_key(keys)) == 0 and lane_pending(client, settings) == 0


def once_each(found: list[dict[str, str]], ids: list[str]) -> None:
    counts = Counter(v["txn_id"] for v in found)
    assert sorted(counts) == sorted(ids)
    assert set(counts.values()) == {1}, counts


@pytest.mark.parametrize("api", APIS)
def test_each_batch_message_is_decided_once_in_one_batch_while_live_ones_stay_real_time(
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
    batch_api_server: BatchApiServer,
    api: str,
) -> None:
    keys = transaction_keys(settings)
    worker = lane_worker(fleet, settings, batch_api_server, "lane-1", api).wait_ready(redis_client)
    past, live = transactions("past", 12), transactions("live", 3)
    publish(redis_client, batch_stream_key(keys), past)
    publish(redis_client, keys.stream, live)
    found = wait_for_verdicts(redis_client, settings, 15, worker)
    batch = [v for v in found if v.get("lane") == "batch"]
    once_each(batch, [f"past-{n}" for n in range(12)])
    assert {v["driver_used"] for v in batch} == {"analyzer"}
    assert all(v["model"] and v["input_tokens"] and v["narrative"] for v in batch)
    realtime = [v for v in found if "lane" not in v]
    once_each(realtime, [f"live-{n}" for n in range(3)])
    assert batch_api_server.submissions() == 1
    assert batch_api_server.realtime_calls() == 3  # the batch's messages never went real time
    wait_until(lambda: settled(redis_client, settings), timeout_s=10)
    (started,) = worker.events("batch_lane_started")
    assert started["mode"] == "batch" and started["api"] == api
    assert KEY not in worker.text()


@pytest.mark.parametrize(("api", "when_down"), [("openai", "rules"), ("anthropic", "rules")])
def test_errored_and_expired_requests_follow_when_down_rules(
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
    batch_api_server: BatchApiServer,
    api: str,
    when_down: str,
) -> None:
    batch_api_server.errored_every, batch_api_server.expired_every = 3, 4
    keys = transaction_keys(settings)
    worker = lane_worker(
        fleet, settings, batch_api_server, "lane-1", api, analyzer_when_down=when_down
    ).wait_ready(redis_client)
    past = transactions("past", 8)
    publish(redis_client, batch_stream_key(keys), past)
    found = wait_for_verdicts(redis_client, settings, 8, worker)
    once_each(found, [f"past-{n}" for n in range(8)])
    # the stub answers by position in its batch: 3 and 6 errored, 4 and 8 expired
    (custom_ids,) = [b["custom_ids"] for b in batch_api_server.batches.values()]
    position = {cid: n for n, cid in enumerate(custom_ids, 1)}
    by_id = {v["source_message_id"]: v for v in found}
    for custom_id, n in position.items():
        verdict = by_id[custom_id]
        assert verdict["lane"] == "batch"
        expected = {3: "batch_errored", 6: "batch_errored", 4: "batch_expired"}.get(n)
        if n == 8:
            expected = "batch_expired"
        if expected is None:
            assert verdict["driver_used"] == "analyzer"
        else:
            assert verdict["driver_used"] == "fallback"
            assert verdict["fallback_cause"] == expected
            assert "provisional" not in verdict  # final: the lane is for past data
    wait_until(lambda: settled(redis_client, settings), timeout_s=10)
    assert batch_api_server.submissions() == 1


def test_expired_requests_go_back_to_the_lane_under_when_down_wait(
    fleet: Fleet, settings: Settings, redis_client: RedisClient, batch_api_server: BatchApiServer
) -> None:
    batch_api_server.expired_every = 4
    keys = transaction_keys(settings)
    worker = lane_worker(
        fleet, settings, batch_api_server, "lane-1", "openai", analyzer_when_down="wait"
    ).wait_ready(redis_client)
    publish(redis_client, batch_stream_key(keys), transactions("past", 8))
    found = wait_for_verdicts(redis_client, settings, 8, worker)
    once_each(found, [f"past-{n}" for n in range(8)])
    assert {v["driver_used"] for v in found} == {"analyzer"}
    assert batch_api_server.submissions() == 2  # the two expired ones, sent again
    wait_until(lambda: settled(redis_client, settings), timeout_s=10)


@pytest.mark.parametrize(
    ("api", "cause"), [("openai", "batch_failed"), ("anthropic", "batch_refused")]
)
def test_a_batch_failed_as_a_whole_is_told_apart_from_its_lines(
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
    batch_api_server: BatchApiServer,
    api: str,
    cause: str,
) -> None:
    batch_api_server.fail_batch = True
    keys = transaction_keys(settings)
    worker = lane_worker(fleet, settings, batch_api_server, "lane-1", api).wait_ready(redis_client)
    publish(redis_client, batch_stream_key(keys), transactions("past", 5))
    found = wait_for_verdicts(redis_client, settings, 5, worker)
    once_each(found, [f"past-{n}" for n in range(5)])
    assert {(v["driver_used"], v["fallback_cause"], v["lane"]) for v in found} == {
        ("fallback", cause, "batch")
    }
    wait_until(lambda: settled(redis_client, settings), timeout_s=10)


@pytest.mark.parametrize("api", APIS)
def test_a_worker_killed_while_its_batch_is_at_the_provider_is_resumed_without_a_second_submission(
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
    batch_api_server: BatchApiServer,
    api: str,
) -> None:
    batch_api_server.polls_to_end = 10**6  # at the provider until the test lets it end
    keys = transaction_keys(settings)
    first = lane_worker(fleet, settings, batch_api_server, "lane-1", api).wait_ready(redis_client)
    publish(redis_client, batch_stream_key(keys), transactions("past", 10))
    index = batches_key(keys)

    def polled_at_provider() -> bool:
        local_ids = cast(list[str], redis_client.zrange(index, 0, -1))
        return len(local_ids) == 1 and bool(
            redis_client.hget(f"{index}:{local_ids[0]}", "provider_status")
        )

    waited(polled_at_provider, first, "the batch polled at the provider")
    (local_id,) = cast(list[str], redis_client.zrange(index, 0, -1))
    record = redis_client.hgetall(f"{index}:{local_id}")
    assert record["state"] == "submitted" and record["kind"] == api and record["count"] == "10"
    assert record["provider_status"] == "in_progress"
    first.kill()
    (batch,) = batch_api_server.batches.values()
    polls_by_first = batch["polls"]
    second = lane_worker(fleet, settings, batch_api_server, "lane-2", api).wait_ready(redis_client)
    publish(redis_client, keys.stream, transactions("live", 2))
    live = wait_for_verdicts(redis_client, settings, 2, second)
    assert {v["txn_id"] for v in live} == {"live-0", "live-1"}  # real time, meanwhile
    waited(lambda: batch["polls"] > polls_by_first, second, "the batch polled by the taker")
    batch_api_server.polls_to_end = 0
    found = wait_for_verdicts(redis_client, settings, 12, second)
    once_each([v for v in found if v.get("lane") == "batch"], [f"past-{n}" for n in range(10)])
    assert batch_api_server.submissions() == 1
    wait_until(lambda: settled(redis_client, settings), timeout_s=10)
    assert len(verdicts(redis_client, settings)) == 12


def test_an_api_without_a_batch_lane_decides_the_lanes_messages_in_real_time(
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
    analyzer_server: AnalyzerServer,
) -> None:
    keys = transaction_keys(settings)
    env = child_env(settings.redis_url_value, settings.home_dir, analyzer_url=analyzer_server.url)
    env.update(FAST_TIMINGS)
    worker = fleet.worker("transactions", "lane-1", env).wait_ready(redis_client)
    publish(redis_client, batch_stream_key(keys), transactions("past", 4))
    found = wait_for_verdicts(redis_client, settings, 4, worker)
    once_each(found, [f"past-{n}" for n in range(4)])
    assert {v["driver_used"] for v in found} == {"analyzer"}
    assert all("lane" not in v for v in found)  # decided in real time
    (started,) = worker.events("batch_lane_started")
    assert started["mode"] == "realtime" and started["api"] == "sentinel"


@pytest.mark.parametrize(("api", "submissions"), [("openai", 1), ("anthropic", 2)])
def test_a_submission_whose_answer_never_came_is_found_again_before_it_is_sent_again(
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
    batch_api_server: BatchApiServer,
    api: str,
    submissions: int,
) -> None:
    """OpenAI keeps the ledger's label in the batch's metadata: the batch is found in its
    list and polled, never created twice. Anthropic keeps none: it is sent again, and
    each message is still decided once."""
    batch_api_server.unanswered_creates = 1
    keys = transaction_keys(settings)
    worker = lane_worker(
        fleet, settings, batch_api_server, "lane-1", api, analyzer_timeout_s=0.5
    ).wait_ready(redis_client)
    publish(redis_client, batch_stream_key(keys), transactions("past", 6))
    found = wait_for_verdicts(redis_client, settings, 6, worker)
    once_each(found, [f"past-{n}" for n in range(6)])
    assert {(v["driver_used"], v["lane"]) for v in found} == {("analyzer", "batch")}
    assert batch_api_server.submissions() == submissions
    wait_until(lambda: settled(redis_client, settings), timeout_s=10)
    assert worker.events("batch_submit_unanswered")


def test_a_batch_failed_for_the_enqueued_token_limit_sends_its_messages_again_later(
    fleet: Fleet, settings: Settings, redis_client: RedisClient, batch_api_server: BatchApiServer
) -> None:
    """The provider's queue was full: nothing was wrong with the messages, so none gets a
    rules verdict; they go back to the lane and are sent once the provider has room."""
    batch_api_server.fail_batch, batch_api_server.fail_with = True, "token_limit_exceeded"
    keys = transaction_keys(settings)
    lane = batch_stream_key(keys)
    worker = lane_worker(fleet, settings, batch_api_server, "lane-1", "openai").wait_ready(
        redis_client
    )
    publish(redis_client, lane, transactions("past", 5))
    waited(lambda: redis_client.xlen(lane) > 5, worker, "the messages back in the lane")
    assert verdicts(redis_client, settings) == []
    batch_api_server.fail_batch = False
    found = wait_for_verdicts(redis_client, settings, 5, worker)
    once_each(found, [f"past-{n}" for n in range(5)])
    assert {(v["driver_used"], v["lane"]) for v in found} == {("analyzer", "batch")}
    assert batch_api_server.submissions() >= 2
    wait_until(lambda: settled(redis_client, settings), timeout_s=10)


def test_an_unreadable_entry_of_the_lane_is_dead_lettered_and_never_sent(
    fleet: Fleet, settings: Settings, redis_client: RedisClient, batch_api_server: BatchApiServer
) -> None:
    keys = transaction_keys(settings)
    worker = lane_worker(fleet, settings, batch_api_server, "lane-1", "openai").wait_ready(
        redis_client
    )
    publish(redis_client, batch_stream_key(keys), [{"data": "{not json"}, *transactions("p", 3)])
    found = wait_for_verdicts(redis_client, settings, 3, worker)
    once_each(found, [f"p-{n}" for n in range(3)])
    waited(lambda: redis_client.xlen(keys.dlq) == 1, worker, "one dead letter")
    [(_, letter)] = cast(list[Any], redis_client.xrange(keys.dlq))
    assert letter["reason"] == "invalid_message" and "not json" in letter["payload"]
    (custom_ids,) = [b["custom_ids"] for b in batch_api_server.batches.values()]
    assert len(custom_ids) == 3
    wait_until(lambda: settled(redis_client, settings), timeout_s=10)


def test_entries_gathered_by_a_killed_worker_are_taken_over_and_sent_once(
    fleet: Fleet, settings: Settings, redis_client: RedisClient, batch_api_server: BatchApiServer
) -> None:
    keys = transaction_keys(settings)
    lane = batch_stream_key(keys)
    first = lane_worker(
        fleet, settings, batch_api_server, "lane-1", "openai", analyzer_batch_gather_s=60
    ).wait_ready(redis_client)
    publish(redis_client, lane, transactions("past", 5))
    waited(lambda: lane_pending(redis_client, settings) == 5, first, "5 gathered")
    first.kill()  # read, gathered, never recorded nor sent
    assert batch_api_server.submissions() == 0
    second = lane_worker(fleet, settings, batch_api_server, "lane-2", "openai").wait_ready(
        redis_client
    )
    found = wait_for_verdicts(redis_client, settings, 5, second)
    once_each(found, [f"past-{n}" for n in range(5)])
    assert batch_api_server.submissions() == 1
    wait_until(lambda: settled(redis_client, settings), timeout_s=10)


def test_an_openai_compatible_server_keeps_the_lane_real_time_unless_pinned(
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
    batch_api_server: BatchApiServer,
) -> None:
    """A local server speaking OpenAI's chat API (llama.cpp, vLLM) is not the provider's
    host: on ``auto`` the worker never sends it a batch, and decides the lane in real time."""
    keys = transaction_keys(settings)
    worker = lane_worker(
        fleet, settings, batch_api_server, "lane-1", "openai", analyzer_batch_lane="auto"
    ).wait_ready(redis_client)
    publish(redis_client, batch_stream_key(keys), transactions("past", 4))
    found = wait_for_verdicts(redis_client, settings, 4, worker)
    once_each(found, [f"past-{n}" for n in range(4)])
    assert all("lane" not in v for v in found), "decided in real time"
    assert batch_api_server.submissions() == 0
    started = worker.events("batch_lane_started")
    assert [line["mode"] for line in started] == ["realtime"], started
