"""One commit call settles every message of a batch exactly as message-by-message would.

The call checks which of its ids are pending with one ranged query when they lie close
together, per id otherwise, and acknowledges them with one XACK: both paths must give
each message its own status (applied, duplicate, stale) and leave nothing pending.
"""

from __future__ import annotations

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.calling.claims import claim_key
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.settling.idempotency import (
    COMMIT_EFFECTS,
    CommitItem,
    CommitLimits,
    commit_statuses,
    queue_commits,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.replies import entries
from sentinel_platform_tests.harness.streams import publish

BATCH = 6
#: Message index -> what happened to it before the commit call.
DUPLICATE, STALE = 1, 4


def _commit_batch(
    client: RedisClient, keys: StreamKeys, settings: Settings, ids: list[str]
) -> list[str]:
    limits = CommitLimits(settings.results_maxlen, 60, settings.recent_transactions_size)
    items = [CommitItem(i, f"key-{n}", {"n": str(n)}, f"recent-{n}") for n, i in enumerate(ids)]
    COMMIT_EFFECTS.load(client)
    pipe = client.pipeline(transaction=False)
    assert queue_commits(pipe, keys, items, limits) == 1
    return list(commit_statuses(pipe.execute()[0]))


@pytest.mark.parametrize(
    "others_between",
    [0, 3 * BATCH],
    ids=["ids-close-together", "other-consumers-entries-in-between"],
)
def test_a_batch_commit_gives_each_message_its_own_status(
    redis_client: RedisClient, tx_keys: StreamKeys, settings: Settings, others_between: int
) -> None:
    ensure_group(redis_client, tx_keys)
    first = publish(redis_client, tx_keys, [{"key": "a"}])
    redis_client.xreadgroup(tx_keys.group, "us", {tx_keys.stream: ">"}, count=1)
    # Another consumer's pending entries between our first id and the rest of our batch.
    publish(redis_client, tx_keys, [{"key": f"o{n}"} for n in range(others_between)])
    if others_between:
        redis_client.xreadgroup(tx_keys.group, "other", {tx_keys.stream: ">"})
    rest = publish(redis_client, tx_keys, [{"key": f"m{n}"} for n in range(BATCH - 1)])
    redis_client.xreadgroup(tx_keys.group, "us", {tx_keys.stream: ">"})
    ids = first + rest
    redis_client.set(tx_keys.marker(f"key-{DUPLICATE}"), "earlier")  # already had its effect
    redis_client.xack(tx_keys.stream, tx_keys.group, ids[STALE])  # settled elsewhere

    statuses = _commit_batch(redis_client, tx_keys, settings, ids)

    expected = ["applied"] * BATCH
    expected[DUPLICATE], expected[STALE] = "duplicate", "stale"
    assert statuses == expected
    results = redis_client.xrange(tx_keys.results)
    assert [fields["n"] for _id, fields in results] == [
        str(n) for n in range(BATCH) if expected[n] == "applied"
    ]
    ours = redis_client.xpending_range(tx_keys.stream, tx_keys.group, "-", "+", 100, "us")
    assert ours == []  # every message of the batch acknowledged, the stale one before
    others = redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"]
    assert others == others_between  # nobody else's entries touched
    assert redis_client.get(tx_keys.marker(f"key-{STALE}")) is None
    # The applied ones' recent entries, pushed once for the call: the newest first.
    assert redis_client.lrange(tx_keys.recent, 0, -1) == [
        f"recent-{n}" for n in reversed(range(BATCH)) if expected[n] == "applied"
    ]


def test_a_commit_releases_its_keys_claims_unless_the_message_was_settled_elsewhere(
    redis_client: RedisClient, tx_keys: StreamKeys, settings: Settings
) -> None:
    """Applied and duplicate: the marker answers for the key from now on, so its claim is
    deleted with the commit. Stale (settled elsewhere): the claim may be the worker's
    that took the message over, and stays."""
    ensure_group(redis_client, tx_keys)
    ids = publish(redis_client, tx_keys, [{"key": f"c{n}"} for n in range(3)])
    redis_client.xreadgroup(tx_keys.group, "us", {tx_keys.stream: ">"})
    redis_client.set(tx_keys.marker("key-1"), "earlier")
    redis_client.xack(tx_keys.stream, tx_keys.group, ids[2])
    claims = [claim_key(tx_keys, f"key-{n}") for n in range(3)]
    for claim in claims:
        redis_client.set(claim, "us", px=60_000)
    limits = CommitLimits(settings.results_maxlen, 60, settings.recent_transactions_size)
    items = [
        CommitItem(i, f"key-{n}", {"n": str(n)}, None, claim=claims[n]) for n, i in enumerate(ids)
    ]
    COMMIT_EFFECTS.load(redis_client)
    pipe = redis_client.pipeline(transaction=False)
    queue_commits(pipe, tx_keys, items, limits)

    assert commit_statuses(pipe.execute()[0]) == ["applied", "duplicate", "stale"]
    assert [redis_client.exists(claim) for claim in claims] == [0, 0, 1]


def test_an_applied_provisional_verdict_is_queued_with_its_result_in_the_same_call(
    redis_client: RedisClient, tx_keys: StreamKeys, settings: Settings
) -> None:
    """An item with a re-screen queue entry adds it to ``keys.rescreen`` with the id its
    result was written under and the message's id; a duplicate's and a stale one's
    queue nothing; the items around it (claims, attempts, none) commit as before."""
    ensure_group(redis_client, tx_keys)
    ids = publish(redis_client, tx_keys, [{"key": f"q{n}"} for n in range(5)])
    redis_client.xreadgroup(tx_keys.group, "us", {tx_keys.stream: ">"})
    redis_client.set(tx_keys.marker("key-2"), "earlier")  # a duplicate with an entry
    redis_client.xack(tx_keys.stream, tx_keys.group, ids[3])  # a stale one with an entry
    claim = claim_key(tx_keys, "key-4")
    redis_client.set(claim, "us", px=60_000)
    queued = {"data": "{}", "sentinel_cause": "down", "sentinel_day": "2026-11-21"}
    limits = CommitLimits(settings.results_maxlen, 60, settings.recent_transactions_size)
    items = [
        CommitItem(ids[0], "key-0", {"n": "0"}, None, queue=queued),
        CommitItem(ids[1], "key-1", {"n": "1"}, None, clear_attempts=True),
        CommitItem(ids[2], "key-2", {"n": "2"}, None, queue=queued),
        CommitItem(ids[3], "key-3", {"n": "3"}, None, queue=queued),
        CommitItem(ids[4], "key-4", {"n": "4"}, None, claim=claim, queue=queued),
    ]
    COMMIT_EFFECTS.load(redis_client)
    pipe = redis_client.pipeline(transaction=False)
    queue_commits(pipe, tx_keys, items, limits)

    statuses = commit_statuses(pipe.execute()[0])
    assert statuses == ["applied", "applied", "duplicate", "stale", "applied"]
    results = {fields["n"]: at for at, fields in entries(redis_client.xrange(tx_keys.results))}
    assert sorted(results) == ["0", "1", "4"]
    queued_entries = [fields for _at, fields in entries(redis_client.xrange(tx_keys.rescreen))]
    assert queued_entries == [
        {**queued, "sentinel_rescreen_of": results["0"], "sentinel_source_id": ids[0]},
        {**queued, "sentinel_rescreen_of": results["4"], "sentinel_source_id": ids[4]},
    ]
    assert not redis_client.exists(claim)
