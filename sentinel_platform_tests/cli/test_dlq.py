"""``sentinel dlq``: list with filters, show, replay (atomic and idempotent), purge with --yes."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from sentinel_platform.cli.progress import Progress
from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators import dlq_admin
from sentinel_platform.streams.operators.dlq_admin import REPLAYED_FROM_FIELD, DlqError, DlqFilter
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import CliResult, axiom_fields, transaction_fields
from sentinel_platform_tests.harness.waits import wait_until

Cli = Callable[..., CliResult]
AddLetter = Callable[..., str]


@pytest.fixture
def three_letters(
    add_dead_letter: AddLetter, tx_keys: StreamKeys, ax_keys: StreamKeys
) -> list[str]:
    """An old invalid transaction, a recent poison transaction and a recent bad axiom."""
    old_ms = int((datetime.now(timezone.utc) - timedelta(hours=3)).timestamp() * 1000)
    return [
        add_dead_letter(tx_keys, transaction_fields("t-old"), "10-0", entry_id=f"{old_ms}-0"),
        add_dead_letter(tx_keys, transaction_fields("t-new"), "11-0", "max_deliveries_exceeded"),
        add_dead_letter(ax_keys, axiom_fields("sensor-9"), "12-0"),
    ]


def _ids(result: CliResult) -> list[str]:
    return [entry["id"] for entry in result.json()]


def test_list_filters_by_stream_reason_since_and_limit(
    cli: Cli, three_letters: list[str], tx_keys: StreamKeys, ax_keys: StreamKeys
) -> None:
    old, new, axiom = three_letters
    assert _ids(cli("dlq", "list", "--json")) == [old, new, axiom]
    assert _ids(cli("dlq", "list", "--json", "--stream", tx_keys.stream)) == [old, new]
    assert _ids(cli("dlq", "list", "--json", "--stream", ax_keys.stream)) == [axiom]
    assert _ids(cli("dlq", "list", "--json", "--reason", "max_deliveries_exceeded")) == [new]
    assert _ids(cli("dlq", "list", "--json", "--since", "1h")) == [new, axiom]
    assert _ids(cli("dlq", "list", "--json", "--limit", "1")) == [old]
    text = cli("dlq", "list", "--stream", tx_keys.stream)
    assert text.code == EXIT_OK
    assert len(text.out.splitlines()) == 2
    assert "max_deliveries_exceeded" in text.out


def test_list_rejects_an_unreadable_since_with_a_usage_error(cli: Cli) -> None:
    result = cli("dlq", "list", "--since", "yesterday-ish")
    assert result.code == EXIT_USAGE
    assert "--since" in result.err


def test_since_accepts_iso_times_and_durations() -> None:
    now = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    assert dlq_admin.parse_since("90s", now) == now - timedelta(seconds=90)
    assert dlq_admin.parse_since("2h", now) == now - timedelta(hours=2)
    assert dlq_admin.parse_since("2024-05-01T10:00:00Z", now) == now - timedelta(hours=2)
    assert dlq_admin.parse_since("2024-05-01T10:00:00", now).tzinfo == timezone.utc
    with pytest.raises(DlqError):
        dlq_admin.parse_since("soon", now)


def test_show_prints_the_entry_with_its_original_payload(
    cli: Cli, three_letters: list[str], tx_keys: StreamKeys
) -> None:
    doc = cli("dlq", "show", three_letters[1], "--json").json()
    assert doc["stream"] == tx_keys.stream
    assert doc["message_id"] == "11-0"
    assert json.loads(doc["payload"]["data"])["id"] == "t-new"
    text = cli("dlq", "show", three_letters[1])
    assert "reason" in text.out and "payload:" in text.out and "t-new" in text.out


def test_show_of_an_unknown_id_exits_1_naming_it(cli: Cli, three_letters: list[str]) -> None:
    result = cli("dlq", "show", "99-0")
    assert result.code == EXIT_ERROR
    assert "99-0" in result.err


def test_replay_republishes_original_fields_as_a_new_message_and_removes_the_entry(
    cli: Cli,
    three_letters: list[str],
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    ax_keys: StreamKeys,
) -> None:
    old, _, axiom = three_letters
    result = cli("dlq", "replay", old, axiom, "--json")
    assert result.code == EXIT_OK, result.err
    outcomes = result.json()
    assert [o["status"] for o in outcomes] == ["replayed", "replayed"]

    [(tx_id, tx_fields)] = redis_client.xrange(tx_keys.stream)
    assert tx_id == outcomes[0]["new_id"]
    assert tx_fields[REPLAYED_FROM_FIELD] == "10-0"
    assert Transaction.from_fields(tx_fields).id == "t-old"  # still the workers' wire format
    [(_, ax_fields)] = redis_client.xrange(ax_keys.stream)
    assert ax_fields[REPLAYED_FROM_FIELD] == "12-0"
    assert Axiom.from_fields(ax_fields).source_id == "sensor-9"
    assert _ids(cli("dlq", "list", "--json")) == [three_letters[1]]


def test_replaying_the_same_entry_twice_publishes_it_once(
    cli: Cli, three_letters: list[str], redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    first = cli("dlq", "replay", three_letters[0], "--json").json()
    assert first[0]["status"] == "replayed"
    assert redis_client.xlen(tx_keys.stream) == 1
    # The operator retries: the id is no longer in the DLQ, nothing is published, and the
    # retry says so instead of failing.
    again = cli("dlq", "replay", three_letters[0])
    assert again.code == EXIT_OK, again.err
    assert "already replayed" in again.out
    assert redis_client.xlen(tx_keys.stream) == 1


def test_concurrent_replays_of_one_entry_publish_it_once(
    settings: Settings,
    redis_client: RedisClient,
    three_letters: list[str],
    tx_keys: StreamKeys,
) -> None:
    entry = dlq_admin.get_entry(redis_client, settings, three_letters[1])
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def replay() -> None:
        barrier.wait()
        outcomes.append(dlq_admin.replay_one(redis_client, settings, entry).status)

    threads = [threading.Thread(target=replay) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(outcomes) == ["already_replayed"] * 3 + ["replayed"]
    assert redis_client.xlen(tx_keys.stream) == 1


def test_replay_dry_run_changes_nothing(
    cli: Cli, three_letters: list[str], redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    result = cli("dlq", "replay", "--all", "--dry-run", "--json")
    assert [o["status"] for o in result.json()] == ["would_replay"] * 3
    assert redis_client.exists(tx_keys.stream) == 0
    assert len(_ids(cli("dlq", "list", "--json"))) == 3


def test_replay_all_with_a_filter_replays_only_matching_entries(
    cli: Cli, three_letters: list[str], redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    result = cli("dlq", "replay", "--all", "--stream", tx_keys.stream)
    assert result.code == EXIT_OK
    assert "2 replayed" in result.out
    assert redis_client.xlen(tx_keys.stream) == 2
    assert _ids(cli("dlq", "list", "--json")) == [three_letters[2]]


def test_replay_without_ids_or_all_is_a_usage_error(cli: Cli, three_letters: list[str]) -> None:
    result = cli("dlq", "replay")
    assert result.code == EXIT_USAGE
    assert "--all" in result.err


def test_replay_refuses_an_entry_whose_payload_is_not_an_object(
    cli: Cli, redis_client: RedisClient, settings: Settings, tx_keys: StreamKeys
) -> None:
    entry_id = redis_client.xadd(
        tx_keys.dlq,
        {
            "stream": tx_keys.stream,
            "group": tx_keys.group,
            "message_id": "5-0",
            "payload": "not json",
            "reason": "invalid_message",
            "error": "x",
            "deliveries": "1",
            "consumer": "c",
            "dead_lettered_at": "2024-05-01T00:00:00+00:00",
        },
    )
    result = cli("dlq", "replay", entry_id, "--json")
    assert result.code == EXIT_ERROR
    assert result.json()[0]["status"] == "refused"
    assert redis_client.exists(tx_keys.stream) == 0
    assert redis_client.xlen(tx_keys.dlq) == 1  # kept: nothing is lost


def test_purge_refuses_without_yes_and_deletes_nothing(cli: Cli, three_letters: list[str]) -> None:
    result = cli("dlq", "purge")
    assert result.code == EXIT_USAGE
    assert "--yes" in result.err
    assert len(_ids(cli("dlq", "list", "--json"))) == 3


def test_purge_with_yes_deletes_only_the_matching_entries(
    cli: Cli, three_letters: list[str]
) -> None:
    result = cli("dlq", "purge", "--reason", "invalid_message", "--yes", "--json")
    assert result.code == EXIT_OK
    assert result.json() == {"purged": 2}
    assert _ids(cli("dlq", "list", "--json")) == [three_letters[1]]


def test_list_pages_through_more_entries_than_one_read(
    redis_client: RedisClient, settings: Settings, tx_keys: StreamKeys, add_dead_letter: AddLetter
) -> None:
    total = dlq_admin.PAGE_SIZE + 7
    pipe = redis_client.pipeline(transaction=False)
    for i in range(total):
        pipe.xadd(tx_keys.dlq, {"stream": tx_keys.stream, "payload": "{}", "n": str(i)})
    pipe.execute()
    entries = dlq_admin.list_entries(redis_client, settings, DlqFilter())
    assert [int(e.fields["n"]) for e in entries] == list(range(total))
    assert all(e.letter is None and e.problem for e in entries)  # unreadable, still listed


def test_progress_draws_a_bar_on_a_terminal_and_plain_lines_otherwise() -> None:
    tty, plain = io.StringIO(), io.StringIO()
    with Progress(4, "replay", tty, tty=True) as bar:
        for done in range(1, 5):
            bar.update(done)
    with Progress(4, "replay", plain, tty=False) as bar:
        for done in range(1, 5):
            bar.update(done)
    assert tty.getvalue().count("\r") == 5 and "4/4 (100%)" in tty.getvalue()
    assert "\r" not in plain.getvalue()
    assert plain.getvalue().splitlines()[-1] == "replay: 4/4 done"


def test_replayed_dead_letters_are_processed_by_real_workers(
    cli: Cli,
    add_dead_letter: AddLetter,
    start_worker: Callable[..., Any],
    redis_client: RedisClient,
    settings: Settings,
    tx_keys: StreamKeys,
    ax_keys: StreamKeys,
) -> None:
    tx_letter = add_dead_letter(
        tx_keys, transaction_fields("t-replay"), "7-0", "max_deliveries_exceeded"
    )
    add_dead_letter(ax_keys, axiom_fields("sensor-replay"), "8-0", "max_deliveries_exceeded")
    for stream in ("transactions", "axioms"):
        start_worker(stream=stream, processor=None).wait_ready(redis_client)
    result = cli("dlq", "replay", "--all")
    assert result.code == EXIT_OK, result.err
    assert "2 replayed" in result.out

    def processed() -> bool:
        return bool(
            redis_client.xlen(settings.verdicts_stream)
            and redis_client.xlen(settings.compliance_stream)
        )

    wait_until(processed, timeout_s=30)
    [(_, verdict)] = redis_client.xrange(settings.verdicts_stream)
    [(_, event)] = redis_client.xrange(settings.compliance_stream)
    assert verdict["txn_id"] == "t-replay"
    assert event["source_id"] == "sensor-replay"
    assert sum(dlq_admin.depth(redis_client, settings).values()) == 0
    assert cli("dlq", "show", tx_letter).code == EXIT_ERROR  # gone from the DLQ
