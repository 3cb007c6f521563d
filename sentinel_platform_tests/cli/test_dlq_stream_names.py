"""``--stream`` takes a stream's name or its Redis key, and refuses any other value: an
operator who writes ``axioms`` (as everywhere else) sees the axioms' dead letters, and a
typo exits 2 naming the declared streams instead of answering "no dead letters match"."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sentinel_platform.exit_codes import EXIT_OK, EXIT_USAGE
from sentinel_platform.registry import UnknownStreamError, resolve_stream
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import CliResult, axiom_fields, transaction_fields

Sentinel = Callable[..., CliResult]


@pytest.fixture
def letters(add_dead_letter: Callable[..., str], tx_keys: StreamKeys, ax_keys: StreamKeys) -> dict:
    return {
        "transactions": add_dead_letter(tx_keys, transaction_fields("t-1"), "10-0"),
        "axioms": add_dead_letter(ax_keys, axiom_fields("sensor-1"), "11-0"),
    }


def _ids(result: CliResult) -> list[str]:
    assert result.code == EXIT_OK, result.err
    return [entry["id"] for entry in result.json()]  # type: ignore[attr-defined]


def test_axioms_key_differs_from_its_name_in_the_default_settings(ax_keys: StreamKeys) -> None:
    """The case that hid the bug: the name alone must work though the key is another."""
    assert ax_keys.stream != "axioms"


@pytest.mark.parametrize("spelling", ["name", "key"])
def test_dlq_list_takes_the_stream_name_or_its_redis_key(
    sentinel: Sentinel, letters: dict, ax_keys: StreamKeys, tx_keys: StreamKeys, spelling: str
) -> None:
    axioms = "axioms" if spelling == "name" else ax_keys.stream
    transactions = "transactions" if spelling == "name" else tx_keys.stream
    assert _ids(sentinel("dlq", "list", "--json", "--stream", axioms)) == [letters["axioms"]]
    assert _ids(sentinel("dlq", "list", "--json", "--stream", transactions)) == [
        letters["transactions"]
    ]
    text = sentinel("dlq", "list", "--stream", axioms)
    assert text.code == EXIT_OK and letters["axioms"] in text.out
    assert "no dead letters match" not in text.out


@pytest.mark.parametrize(
    "argv",
    [
        ["dlq", "list", "--stream", "orders"],
        ["dlq", "list", "--json", "--stream", "orders"],
        ["dlq", "replay", "--all", "--stream", "orders", "--dry-run"],
        ["dlq", "replay", "--all", "--stream", "orders"],
        ["dlq", "purge", "--stream", "orders", "--yes"],
    ],
    ids=["list", "list-json", "replay-dry-run", "replay", "purge"],
)
def test_an_unknown_stream_exits_2_naming_the_declared_streams_and_touches_nothing(
    sentinel: Sentinel,
    letters: dict,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    ax_keys: StreamKeys,
    argv: list[str],
) -> None:
    result = sentinel(*argv)
    assert result.code == EXIT_USAGE, (result.out, result.err)
    assert "orders" in result.err
    for declared in ("transactions", "axioms", ax_keys.stream):
        assert declared in result.err
    assert result.out == ""
    assert redis_client.xlen(tx_keys.dlq) == 2  # nothing replayed, nothing purged
    assert not redis_client.exists(tx_keys.stream, ax_keys.stream)


def test_replay_and_purge_by_stream_name_act_on_that_stream_only(
    sentinel: Sentinel,
    letters: dict,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    ax_keys: StreamKeys,
) -> None:
    replayed = sentinel("dlq", "replay", "--all", "--stream", "axioms")
    assert replayed.code == EXIT_OK, replayed.err
    assert "1 replayed" in replayed.out
    assert redis_client.xlen(ax_keys.stream) == 1
    assert not redis_client.exists(tx_keys.stream)

    purged = sentinel("dlq", "purge", "--stream", "transactions", "--yes", "--json")
    assert purged.code == EXIT_OK, purged.err
    assert purged.json() == {"purged": 1}
    assert redis_client.xlen(tx_keys.dlq) == 0


def test_one_resolver_names_every_stream_by_name_or_key(settings: Settings) -> None:
    axioms = resolve_stream("axioms", settings)
    assert resolve_stream(axioms.stream_key(settings), settings) == axioms
    assert resolve_stream("transactions", settings).name == "transactions"
    with pytest.raises(UnknownStreamError, match="declared streams: transactions"):
        resolve_stream("orders", settings)
