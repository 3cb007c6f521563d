"""The re-screen queue's backlog, read from a real Redis: every entry before a group
exists, the group's lag plus its pending entries after, the oldest of those by id."""

from __future__ import annotations

from typing import get_args

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.provisional import (
    BATCH_CAUSE_TEXT,
    BATCH_CAUSES,
    QUEUE_CAUSE,
    QUEUE_FIELDS,
    FallbackCause,
    batch_cause,
    is_provisional_cause,
    payload_of,
    read_provisional,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys


def test_no_queue_means_nothing_waits(redis_client: RedisClient, settings: Settings) -> None:
    backlog = read_provisional(redis_client, transaction_keys(settings))
    assert (backlog.waiting, backlog.oldest_age_s) == (0, None)


def test_every_entry_waits_until_a_group_reads_them(
    redis_client: RedisClient, settings: Settings
) -> None:
    keys = transaction_keys(settings)
    first = redis_client.xadd(keys.rescreen, {"data": "{}", QUEUE_CAUSE: "down"}, id="1000-0")
    redis_client.xadd(keys.rescreen, {"data": "{}", QUEUE_CAUSE: "down"})
    backlog = read_provisional(redis_client, keys)
    assert backlog.waiting == 2
    assert first == "1000-0" and backlog.oldest_age_s is not None and backlog.oldest_age_s > 1e9


def test_acknowledged_entries_no_longer_wait(redis_client: RedisClient, settings: Settings) -> None:
    keys = transaction_keys(settings)
    ids = [redis_client.xadd(keys.rescreen, {"data": str(n)}) for n in range(4)]
    redis_client.xgroup_create(keys.rescreen, keys.group, id="0")
    read = redis_client.xreadgroup(keys.group, "w1", {keys.rescreen: ">"}, count=2)
    assert [entry_id for entry_id, _ in read[0][1]] == ids[:2]
    redis_client.xack(keys.rescreen, keys.group, ids[0])
    assert read_provisional(redis_client, keys).waiting == 3  # one pending, two not read
    redis_client.xack(keys.rescreen, keys.group, ids[1])
    redis_client.xtrim(keys.rescreen, minid=ids[2])
    backlog = read_provisional(redis_client, keys)
    assert backlog.waiting == 2 and backlog.oldest_age_s is not None


def test_the_queue_fields_are_kept_apart_from_the_payload() -> None:
    fields = {"data": "{}", **{name: "x" for name in QUEUE_FIELDS}}
    assert payload_of(fields) == {"data": "{}"}
    assert [is_provisional_cause(c) for c in ("down", "held", "refused", "unusable")] == [
        True,
        True,
        False,
        False,
    ]


@pytest.mark.parametrize(
    "why", ["errored", "expired", "canceled", "unanswered", "failed", "refused"]
)
def test_each_batch_fallback_is_a_final_cause_of_the_contract(why: str) -> None:
    cause = batch_cause(why)
    assert cause == f"batch_{why}"
    assert cause in get_args(FallbackCause) and cause in BATCH_CAUSES
    assert not is_provisional_cause(cause), "past data is never re-screened in real time"
    assert BATCH_CAUSE_TEXT[cause].strip()


def test_a_batch_held_at_the_provider_is_no_fallback() -> None:
    with pytest.raises(ValueError, match="held"):
        batch_cause("held")
