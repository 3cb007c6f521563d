"""``sentinel status`` (the real command, a subprocess) reads who decided the recent
verdicts and their tokens from the results stream, and is a warning (exit 3), never
``nominal``, while most verdicts are rules fallbacks or the analyzer is exhausted."""

from __future__ import annotations

from collections.abc import Callable

from sentinel_platform.exit_codes import EXIT_ELEVATED, EXIT_OK
from sentinel_platform.schemas import DEMO_FIELD, DEMO_VALUE
from sentinel_platform.streams.backlog.verdict_mix import MAX_ENTRIES
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import CliResult, status_of_stream, transaction_result


def _write(client: RedisClient, keys: StreamKeys, drivers: dict[str, int]) -> None:
    for driver, n in drivers.items():
        for _ in range(n):
            tokens = (300, 60, 200) if driver == "analyzer" else None
            client.xadd(keys.results, transaction_result(driver, tokens))


def test_mostly_fallbacks_make_the_status_a_warning_naming_the_stream(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    _write(redis_client, tx_keys, {"analyzer": 2, "fallback": 6})
    result = sentinel("status", "--json")
    doc = result.json()
    assert result.code == EXIT_ELEVATED, result.err
    assert doc["zone"] == "elevated"
    assert (
        status_of_stream(doc, tx_keys.stream)["zone"] == "nominal"
    )  # the lag zone producers act on stays
    mix = status_of_stream(doc, tx_keys.stream)["verdicts"]
    assert mix["by_driver"] == {"analyzer": 2, "fallback": 6, "rules": 0}
    assert (mix["ai_share"], mix["fallback_share"], mix["mostly_fallback"]) == (0.25, 0.75, True)
    assert [w for w in doc["warnings"] if tx_keys.stream in w and "75%" in w]
    text = sentinel("status")
    assert text.code == EXIT_ELEVATED
    assert "verdicts (last 5 min) 8: AI 25%, fallback 75%, rules 0%" in text.out
    assert f"warning: {tx_keys.stream}: 75% of the last 8 verdicts" in text.out
    assert "overall: elevated (exit 3)" in text.out


def test_ai_verdicts_show_their_share_and_tokens_per_minute_and_stay_nominal(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    _write(redis_client, tx_keys, {"analyzer": 10, "fallback": 2})
    result = sentinel("status", "--json")
    doc = result.json()
    assert result.code == EXIT_OK, result.err
    assert doc["warnings"] == []
    mix = status_of_stream(doc, tx_keys.stream)["verdicts"]
    # 10 verdicts of 300 in / 60 out / 200 cached over the 5-minute window
    assert (mix["input_tokens_per_min"], mix["output_tokens_per_min"]) == (600.0, 120.0)
    assert mix["cached_input_tokens_per_min"] == 400.0
    assert mix["models"] == ["gpt-4o-mini"]
    text = sentinel("status").out
    assert "tokens/min in 600 (cached 400) out 120; model gpt-4o-mini" in text


def test_a_busy_streams_verdicts_say_they_are_the_newest_not_the_windows_count(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    """More verdicts in the window than one read takes: the line names the span those
    cover, never the read's size as the window's count (20,000 processed read "2000")."""
    pipe = redis_client.pipeline(transaction=False)
    for _ in range(MAX_ENTRIES + 500):
        pipe.xadd(tx_keys.results, transaction_result("rules"))
    pipe.execute()
    text = sentinel("status").out
    assert f"verdicts (last 5 min) {MAX_ENTRIES}" not in text, text
    line = next(line for line in text.splitlines() if "verdicts (" in line and "rules" in line)
    assert line.startswith("  verdicts (the newest, over the last "), line
    assert f"s of 5 min) {MAX_ENTRIES}: AI 0%, fallback 0%, rules 100%" in line, line


def test_an_exhausted_analyzer_makes_the_status_a_warning_with_its_cause(
    sentinel: Callable[..., CliResult], streams_alive: None, redis_client: RedisClient
) -> None:
    reason = "insufficient_quota: You exceeded your current quota"
    record = holds.encode_hold("gpt-eu", "", "exhausted", reason, None)
    redis_client.set(holds.hold_key("gpt-eu"), record)
    redis_client.hset(holds.REGISTRY_KEY, "gpt-eu", "")
    result = sentinel("status", "--json")
    assert result.code == EXIT_ELEVATED, result.err
    assert result.json()["warnings"] == [f"analyzer gpt-eu exhausted: {reason}"]


def test_an_old_fallback_outside_the_window_does_not_count(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    old_ms = int(redis_client.time()[0]) * 1000 - 600_000
    for i in range(6):
        redis_client.xadd(tx_keys.results, transaction_result("fallback"), id=f"{old_ms}-{i}")
    result = sentinel("status", "--json")
    assert result.code == EXIT_OK, result.err
    assert status_of_stream(result.json(), tx_keys.stream)["verdicts"]["verdicts"] == 0
    assert redis_client.xlen(tx_keys.results) == 6


def test_the_demos_verdicts_are_left_out_of_the_status(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    """README: the reports and ``sentinel status`` leave the demo's traffic out. Its
    results carry the demo's mark (``DEMO_FIELD``), and they are rules verdicts: counted,
    a fresh install said "200: rules 100%" before any user data."""
    for _ in range(8):
        redis_client.xadd(
            tx_keys.results, {**transaction_result("fallback"), DEMO_FIELD: DEMO_VALUE}
        )
    _write(redis_client, tx_keys, {"analyzer": 3})
    result = sentinel("status", "--json")
    assert result.code == EXIT_OK, result.err
    mix = status_of_stream(result.json(), tx_keys.stream)["verdicts"]
    assert mix["by_driver"] == {"analyzer": 3, "fallback": 0, "rules": 0}
    assert (mix["verdicts"], mix["mostly_fallback"]) == (3, False)
    assert "verdicts (last 5 min) 3: AI 100%" in sentinel("status").out
