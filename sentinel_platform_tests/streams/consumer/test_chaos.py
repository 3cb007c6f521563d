"""Chaos: three workers SIGKILLed and restarted at random while 20,000 messages flow."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker, WorkerProcess
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until

TOTAL = 20_000
POISON = 6
INVALID = 6
PUBLISH_SECONDS = 10.0
CHAOS_SECONDS = 12.0


def _messages(rng: random.Random) -> tuple[list[dict[str, str]], set[int], set[int]]:
    positions = rng.sample(range(TOTAL), POISON + INVALID)
    poison, invalid = set(positions[:POISON]), set(positions[POISON:])
    messages = []
    for n in range(TOTAL):
        if n in poison:
            messages.append({"key": f"k{n}", "poison": "1"})
        elif n in invalid:
            messages.append({"nokey": f"k{n}"})
        else:
            messages.append({"key": f"k{n}"})
    return messages, poison, invalid


def _publish_gradually(client: RedisClient, keys: StreamKeys, messages: list, ids: list) -> None:
    chunk = 200
    pause = PUBLISH_SECONDS / (len(messages) / chunk)
    for start in range(0, len(messages), chunk):
        ids.extend(publish(client, keys, messages[start : start + chunk]))
        time.sleep(pause)


@pytest.mark.slow
def test_random_kills_lose_nothing_and_duplicate_nothing(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    rng = random.Random(20261121)
    messages, poison, invalid = _messages(rng)
    workers: list[WorkerProcess] = [start_worker().wait_ready(redis_client) for _ in range(3)]
    ids: list[str] = []
    publisher = threading.Thread(
        target=_publish_gradually, args=(redis_client, tx_keys, messages, ids)
    )
    publisher.start()

    kills = 0
    chaos_until = time.monotonic() + CHAOS_SECONDS
    while time.monotonic() < chaos_until:
        time.sleep(rng.uniform(0.3, 1.2))
        index = rng.randrange(len(workers))
        victim = workers[index]
        victim.kill()
        kills += 1
        # Half restart under the same name (own leftovers), half as a new consumer.
        same_name = rng.random() < 0.5
        workers[index] = start_worker(consumer=victim.consumer if same_name else None)
    publisher.join()

    valid = TOTAL - POISON - INVALID

    def settled() -> bool:
        return (
            redis_client.xlen(tx_keys.results) >= valid
            and redis_client.xlen(tx_keys.dlq) >= POISON + INVALID
            and redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0
        )

    wait_until(settled, 40, interval_s=0.2)
    time.sleep(0.5)  # anything late (a duplicate) would show up now

    effects = Counter(f["key"] for _id, f in redis_client.xrange(tx_keys.results))
    expected = {f"k{n}" for n in range(TOTAL) if n not in poison and n not in invalid}
    assert set(effects) == expected
    assert [key for key, count in effects.items() if count != 1] == []

    letters = [DeadLetter.from_fields(f) for _id, f in redis_client.xrange(tx_keys.dlq)]
    by_id = Counter(letter.message_id for letter in letters)
    assert all(count == 1 for count in by_id.values())
    assert set(by_id) == {ids[n] for n in poison | invalid}
    reasons = {letter.message_id: letter.reason for letter in letters}
    assert {reasons[ids[n]] for n in poison} == {"max_deliveries_exceeded"}
    assert {reasons[ids[n]] for n in invalid} == {"invalid_message"}
    assert redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0
    assert kills >= 8
