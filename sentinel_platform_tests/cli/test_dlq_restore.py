"""A restored DLQ tells the truth: ``dlq list`` shows when an imported entry was
dead-lettered (not when it was imported), and replaying an id a second time reports it as
already replayed (exit 0) instead of "no dead letter with id"."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK
from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators.dlq_admin import replayed_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import CliResult, transaction_fields

Sentinel = Callable[..., CliResult]


def _old_letter(add_dead_letter: Callable[..., str], keys: StreamKeys, hours: int) -> str:
    """A dead letter the worker wrote ``hours`` ago (its DLQ id carries the time)."""
    then = datetime.now(timezone.utc) - timedelta(hours=hours)
    return add_dead_letter(
        keys, transaction_fields("t-old"), "10-0", entry_id=f"{int(then.timestamp() * 1000)}-0"
    )


def _id_time(entry_id: str) -> datetime:
    return datetime.fromtimestamp(int(entry_id.split("-")[0]) / 1000, tz=timezone.utc)


def test_an_imported_entry_is_listed_with_its_dead_letter_time_not_the_import_time(
    sentinel: Sentinel,
    add_dead_letter: Callable[..., str],
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    tmp_path: Path,
) -> None:
    original = _old_letter(add_dead_letter, tx_keys, hours=3)
    saved = tmp_path / "dlq.jsonl"
    assert sentinel("dlq", "export", "-o", str(saved), "--delete-exported").code == EXIT_OK
    imported = sentinel("dlq", "import", str(saved), "--json")
    assert imported.code == EXIT_OK, imported.err
    assert imported.json() == {"imported": 1, "skipped": 0}

    (entry,) = sentinel("dlq", "list", "--json").json()  # type: ignore[misc]
    assert entry["id"] != original  # a new entry of the DLQ...
    # ...dead-lettered three hours ago, which the list says (in ISO-8601, UTC).
    shown = datetime.fromisoformat(entry["dead_lettered_at"].replace("Z", "+00:00"))
    assert shown == _id_time(original)
    assert _id_time(entry["id"]) - shown > timedelta(hours=2)
    assert entry["imported_from"] == original

    text = sentinel("dlq", "list")
    assert _id_time(original).strftime("%Y-%m-%d %H:%M:%S") in text.out
    assert "(imported)" in text.out
    # --since means "dead-lettered since": the restored entry is not a recent one.
    assert sentinel("dlq", "list", "--json", "--since", "1h").json() == []
    assert len(sentinel("dlq", "list", "--json", "--since", "4h").json()) == 1  # type: ignore[arg-type]


def test_replaying_an_id_again_reports_it_already_replayed_and_publishes_once(
    sentinel: Sentinel,
    settings: Settings,
    add_dead_letter: Callable[..., str],
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    letter = add_dead_letter(tx_keys, transaction_fields("t-1"), "10-0")
    first = sentinel("dlq", "replay", letter, "--json")
    assert first.code == EXIT_OK, first.err
    assert first.json()[0]["status"] == "replayed"  # type: ignore[index]

    again = sentinel("dlq", "replay", letter)
    assert again.code == EXIT_OK, again.err
    assert f"{letter}  already replayed" in again.out
    assert "1 already replayed" in again.out
    assert "no dead letter" not in again.err
    as_json = sentinel("dlq", "replay", letter, "--json")
    (outcome,) = as_json.json()  # type: ignore[misc]
    assert (as_json.code, outcome["status"]) == (EXIT_OK, "already_replayed")
    assert outcome["replayed_at"].endswith("Z")
    assert redis_client.xlen(tx_keys.stream) == 1  # published once, whatever the retries

    # Remembered next to the DLQ (its hash slot), for the idempotency markers' TTL.
    ttl = redis_client.ttl(replayed_key(tx_keys.dlq))
    assert settings.idempotency_ttl_s - 60 < ttl <= settings.idempotency_ttl_s


def test_an_id_never_in_the_dlq_is_still_an_error(
    sentinel: Sentinel, add_dead_letter: Callable[..., str], tx_keys: StreamKeys
) -> None:
    add_dead_letter(tx_keys, transaction_fields("t-1"), "10-0")
    result = sentinel("dlq", "replay", "99-0")
    assert result.code == EXIT_ERROR
    assert "no dead letter with id 99-0" in result.err
