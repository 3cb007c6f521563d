"""The batch ledger on a real server: recorded before submission, resumed rather than
submitted again, an unanswered submission findable, every change a compare-and-set."""

from __future__ import annotations

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, batches_key, transaction_keys
from workers.analyzer.batch.ledger import BatchLedger, BatchMissing, new_local_id
from workers.analyzer.batch.ledger_state import IllegalTransition
from workers.analyzer.batch.protocol import BatchRef

MESSAGES = {f"c-{n}": f"1732280000000-{n}" for n in range(3)}


@pytest.fixture
def ledger(redis_client: RedisClient, settings: Settings) -> BatchLedger:
    return BatchLedger(redis_client, transaction_keys(settings))


def test_a_recorded_batch_holds_its_messages_before_any_provider_id(ledger: BatchLedger) -> None:
    ledger.record("b1", "openai", MESSAGES, at_ms=1_000)
    found = ledger.get("b1")
    assert found is not None
    assert (found.state, found.kind, found.count, found.batch_id) == ("recorded", "openai", 3, "")
    assert found.ref is None
    assert ledger.messages("b1") == MESSAGES


def test_a_batch_is_recorded_once(ledger: BatchLedger) -> None:
    ledger.record("b1", "openai", MESSAGES)
    with pytest.raises(ValueError, match="already recorded"):
        ledger.record("b1", "openai", {"other": "1-1"})
    assert ledger.messages("b1") == MESSAGES  # the first record untouched


def test_a_large_batch_is_recorded_whole(ledger: BatchLedger) -> None:
    messages = {f"c-{n}": f"1732280000000-{n}" for n in range(12_345)}
    ledger.record("big", "anthropic", messages)
    assert ledger.messages("big") == messages


def test_a_taker_resumes_submitted_batches_and_finds_unanswered_ones(
    ledger: BatchLedger, redis_client: RedisClient, settings: Settings
) -> None:
    ledger.record("old-unknown", "openai", MESSAGES, at_ms=1_000)
    ledger.record("at-provider", "openai", MESSAGES, at_ms=2_000)
    ledger.submitted("at-provider", "batch_abc")
    ledger.record("committing", "anthropic", MESSAGES, at_ms=3_000)
    ledger.submitted("committing", "msgbatch_x")
    ledger.ended("committing")
    ledger.record("being-submitted", "openai", MESSAGES, at_ms=100_000)
    # another process, another client: all it has is the server
    taker = BatchLedger(redis_client, transaction_keys(settings))
    outstanding = taker.outstanding()
    assert [(b.local_id, b.state) for b in outstanding] == [
        ("at-provider", "submitted"),
        ("committing", "ended"),
    ]
    assert [b.ref for b in outstanding] == [
        BatchRef("openai", "batch_abc"),
        BatchRef("anthropic", "msgbatch_x"),
    ]
    unknown = taker.unknown(submit_deadline_s=60, at_ms=101_000)
    assert [b.local_id for b in unknown] == ["old-unknown"]


def test_the_same_provider_id_again_changes_nothing_another_is_a_double_submission(
    ledger: BatchLedger,
) -> None:
    ledger.record("b1", "openai", MESSAGES)
    first = ledger.submitted("b1", "batch_abc")
    assert ledger.submitted("b1", "batch_abc") == first
    with pytest.raises(IllegalTransition, match="a submitted batch cannot be submitted"):
        ledger.submitted("b1", "batch_other")
    found = ledger.get("b1")
    assert found is not None and found.batch_id == "batch_abc"


def test_a_settled_batch_leaves_the_ledger_whole(
    ledger: BatchLedger, redis_client: RedisClient, settings: Settings
) -> None:
    ledger.record("b1", "openai", MESSAGES)
    ledger.submitted("b1", "batch_abc")
    ledger.ended("b1")
    ledger.settled("b1")
    assert ledger.batches() == []
    prefix = batches_key(transaction_keys(settings))
    assert list(redis_client.scan_iter(match=f"{prefix}*")) == []
    with pytest.raises(BatchMissing):
        ledger.settled("b1")


def test_a_refused_submission_is_recorded_with_its_reason(ledger: BatchLedger) -> None:
    ledger.record("b1", "anthropic", MESSAGES)
    ledger.refused("b1", "invalid_request_error: requests.0.params.max_tokens: Field required")
    found = ledger.get("b1")
    assert found is not None and found.state == "refused"
    assert found.reason.startswith("invalid_request_error")
    assert ledger.outstanding() == []  # nothing to poll: no batch exists there


def test_a_batch_cannot_be_settled_before_it_ended(ledger: BatchLedger) -> None:
    ledger.record("b1", "openai", MESSAGES)
    with pytest.raises(IllegalTransition):
        ledger.settled("b1")
    assert ledger.messages("b1") == MESSAGES


def test_keys_of_two_streams_are_apart(redis_client: RedisClient, settings: Settings) -> None:
    one = BatchLedger(redis_client, transaction_keys(settings))
    other = BatchLedger(redis_client, axiom_keys(settings))
    one.record(new_local_id(), "openai", MESSAGES)
    assert other.batches() == [] and len(one.batches()) == 1


@pytest.mark.cluster
def test_the_ledger_works_on_a_cluster_in_the_streams_slot(
    cluster_client: RedisClient, cluster_settings: Settings
) -> None:
    """Its scripts touch the index, the record and the messages together: refused by a
    cluster unless all three share the stream's slot."""
    keys = transaction_keys(cluster_settings)
    ledger = BatchLedger(cluster_client, keys)
    ledger.record("b1", "openai", MESSAGES)
    ledger.submitted("b1", "batch_abc")
    assert ledger.keys_of("b1")[0] == "{transactions}:batches"
    assert [b.ref for b in ledger.outstanding()] == [BatchRef("openai", "batch_abc")]
    ledger.ended("b1")
    ledger.settled("b1")
    assert ledger.batches() == []


def test_each_poll_keeps_the_providers_status_in_the_record_as_the_readers_read_it(
    ledger: BatchLedger, redis_client: RedisClient, settings: Settings
) -> None:
    local_id = new_local_id()
    ledger.record(local_id, "openai", {"c-1": "1-0"})
    ledger.submitted(local_id, "batch_1")
    assert ledger.polled(local_id, "finalizing")
    record = redis_client.hgetall(f"{batches_key(transaction_keys(settings))}:{local_id}")
    assert record["provider_status"] == "finalizing"
    assert record["state"] == "submitted"  # a poll changes no state
    assert ledger.get(local_id).provider_status == "finalizing"  # type: ignore[union-attr]
    ledger.ended(local_id)
    ledger.settled(local_id)
    assert not ledger.polled(local_id, "completed")  # a settled batch is not brought back
    assert ledger.get(local_id) is None
