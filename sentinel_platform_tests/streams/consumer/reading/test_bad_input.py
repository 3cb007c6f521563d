"""Hostile input, property-based: both workers survive it and dead-letter it, with a reason.

Two levels. In process, every hostile entry either parses (and then processes into an
effect) or is rejected with :class:`SchemaError` naming a field: no other exception ever
escapes ``parse``, because anything else would be retried as a processing failure instead
of being dead-lettered at once. Through a real worker process, batches of hostile
entries interleaved with good ones end exactly where they should: each rejected entry
once in the DLQ with reason ``invalid_message``, the error and its full original payload;
each good entry once in the result stream; the worker still running, its PEL empty.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from sentinel_platform.schemas import ERROR_MAX_CHARS, SchemaError, describe_error
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, axiom_keys, transaction_keys
from sentinel_platform_tests.harness import strategies
from sentinel_platform_tests.harness.processes import Child, Fleet, wait_leases
from sentinel_platform_tests.harness.waits import wait_until
from workers.processors import AxiomProcessor, TransactionProcessor


@dataclass(frozen=True)
class Kind:
    processor: Callable[[Settings], Any]
    hostile: Callable[[], st.SearchStrategy[dict[str, str]]]
    keys: Callable[[Settings], StreamKeys]
    good: Callable[[str], dict[str, str]]


KINDS = {
    "transactions": Kind(
        TransactionProcessor,
        strategies.hostile_transactions,
        transaction_keys,
        lambda key: {"data": json.dumps(strategies.valid_transaction(key))},
    ),
    "axioms": Kind(AxiomProcessor, strategies.hostile_axioms, axiom_keys, strategies.valid_axiom),
}


def outcome_expected(processor: Any, fields: Mapping[str, str]) -> str | None:
    """The natural key if the entry is valid, None if it must be dead-lettered."""
    try:
        return processor.natural_key(processor.parse(fields))
    except SchemaError:
        return None


@pytest.mark.parametrize("kind", sorted(KINDS))
@hypothesis_settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_parse_rejects_hostile_input_only_with_a_schema_error(kind: str, data: Any) -> None:
    processor = KINDS[kind].processor(load_settings())
    fields = data.draw(KINDS[kind].hostile())
    try:
        message = processor.parse(fields)
    except SchemaError as exc:
        assert exc.field, "the error must name the offending field"
        assert 0 < len(describe_error(exc)) <= ERROR_MAX_CHARS
        return
    key = processor.natural_key(message)
    effect = processor.process(message)
    assert key and effect.natural_key == key
    assert all(isinstance(v, str) for v in effect.result.values())


@dataclass
class StreamTail:
    """Reads a stream incrementally (entries can be 100 kB; rereading all would crawl)."""

    client: RedisClient
    stream: str
    last: str = "0-0"
    entries: list[dict[str, str]] = field(default_factory=list)

    def poll(self) -> list[dict[str, str]]:
        new = self.client.xrange(self.stream, min=f"({self.last}", max="+")
        if new:
            self.last = new[-1][0]
            self.entries.extend(fields for _, fields in new)
        return self.entries


@dataclass
class Published:
    message_id: str
    fields: dict[str, str]
    natural_key: str | None  # None: must be dead-lettered


def _start_worker(
    fleet: Fleet, kind: str, env: dict[str, str], client: RedisClient, keys: StreamKeys
) -> Child:
    worker = fleet.worker(kind, f"drill-{kind}", env)
    wait_leases(client, keys, [worker], timeout_s=30)
    return worker


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_worker_dead_letters_hostile_entries_and_processes_good_ones_between_them(
    kind: str,
    fleet: Fleet,
    drill_env: dict[str, str],
    redis_client: RedisClient,
    settings: Settings,
) -> None:
    spec = KINDS[kind]
    keys = spec.keys(settings)
    processor = spec.processor(settings)
    worker = _start_worker(fleet, kind, drill_env, redis_client, keys)
    dlq = StreamTail(redis_client, keys.dlq)
    results = StreamTail(redis_client, keys.results)
    seen_keys: set[str] = set()
    serial = itertools.count()

    def publish(fields: dict[str, str]) -> Published | None:
        key = outcome_expected(processor, fields)
        if key is not None and key in seen_keys:
            return None  # a repeat of a valid key is (correctly) absorbed without effect
        if key is not None:
            seen_keys.add(key)
        return Published(redis_client.xadd(keys.stream, fields), fields, key)

    @hypothesis_settings(
        max_examples=4,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(batch=st.lists(spec.hostile(), min_size=3, max_size=8))
    def one_batch(batch: list[dict[str, str]]) -> None:
        sent: list[Published] = []
        for fields in batch:
            for entry in (fields, spec.good(f"good-{next(serial)}")):
                published = publish(entry)
                if published is not None:
                    sent.append(published)
        bad = {p.message_id: p for p in sent if p.natural_key is None}
        good = {p.message_id: p for p in sent if p.natural_key is not None}

        def settled() -> bool:
            lettered = {e["message_id"] for e in dlq.poll() if e["stream"] == keys.stream}
            done = {e.get("source_message_id") for e in results.poll()}
            return bad.keys() <= lettered and good.keys() <= done

        wait_until(settled, timeout_s=30)
        letters = [e for e in dlq.entries if e["message_id"] in bad]
        assert sorted(e["message_id"] for e in letters) == sorted(bad), "one letter each"
        for letter in letters:
            assert letter["reason"] == "invalid_message"
            assert letter["error"], "a dead letter must say why"
            assert json.loads(letter["payload"]) == bad[letter["message_id"]].fields
        effects = [e for e in results.entries if e.get("source_message_id") in good]
        assert sorted(e["source_message_id"] for e in effects) == sorted(good)
        assert worker.alive(), worker.log_tail()

    one_batch()
    wait_until(lambda: redis_client.xpending(keys.stream, keys.group)["pending"] == 0, 10)
    assert worker.alive(), worker.log_tail()
    assert worker.stop() == 0
