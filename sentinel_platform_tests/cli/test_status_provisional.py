"""``sentinel status`` (the real command, a subprocess) shows per stream how many verdicts
are provisional and how old the oldest is, read from the stream's re-screen queue as the
contract shapes it, and warns while the oldest is older than its bound."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sentinel_platform.cli.status_provisional import WARN_AFTER_S, age_text, line
from sentinel_platform.exit_codes import EXIT_ELEVATED, EXIT_OK
from sentinel_platform.streams.backlog.provisional import (
    QUEUE_CAUSE,
    QUEUE_DAY,
    QUEUE_RESULT_ID,
    QUEUE_SOURCE_ID,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import CliResult, status_of_stream, transaction_fields


def _queue(client: RedisClient, keys: StreamKeys, n: int, age_s: float = 0.0) -> None:
    """``n`` provisional verdicts' queue entries (``WireModel.to_fields`` plus the
    contract's ``sentinel_`` fields), the first ``age_s`` seconds old."""
    now_ms = int(client.time()[0]) * 1000
    for i in range(n):
        fields: dict[Any, Any] = {
            **transaction_fields(f"tx-{i}"),
            QUEUE_RESULT_ID: f"{now_ms}-{i}",
            QUEUE_SOURCE_ID: f"{now_ms - 1000}-{i}",
            QUEUE_CAUSE: "down",
            QUEUE_DAY: "2024-05-01",
        }
        entry_id = f"{now_ms - int(age_s * 1000)}-{i}" if i == 0 else "*"
        client.xadd(keys.rescreen, fields, id=entry_id)


def test_the_provisional_verdicts_are_counted_with_the_oldest_age(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    _queue(redis_client, tx_keys, 3, age_s=250)
    result = sentinel("status", "--json")
    assert result.code == EXIT_OK, result.err  # under the bound: no warning
    doc: dict = result.json()  # type: ignore[assignment]
    backlog = status_of_stream(doc, tx_keys.stream)["provisional"]
    assert backlog["waiting"] == 3
    assert 250 <= backlog["oldest_age_s"] < 250 + 60, backlog
    assert doc["warnings"] == []
    text = sentinel("status").out
    assert "  provisional: 3 verdicts wait for the model, oldest 4m 1" in text, text
    assert "  provisional: none" in text  # the axioms' queue is empty


def test_an_old_provisional_verdict_is_a_warning(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    _queue(redis_client, tx_keys, 2, age_s=WARN_AFTER_S + 120)
    result = sentinel("status", "--json")
    assert result.code == EXIT_ELEVATED, result.err
    [warning] = result.json()["warnings"]  # type: ignore[index]
    assert warning.startswith(f"{tx_keys.stream}: 2 provisional verdicts wait for the model")
    assert "(over 10m 00s)" in warning


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (59.9, "59s"), (250, "4m 10s"), (7500, "2h 05m")]
)
def test_age_text(seconds: float, text: str) -> None:
    assert age_text(seconds) == text


def test_one_verdict_is_singular_and_an_unread_backlog_says_nothing() -> None:
    assert line({"waiting": 1, "oldest_age_s": 5}) == (
        "  provisional: 1 verdict waits for the model, oldest 5s"
    )
    assert line(None) is None
