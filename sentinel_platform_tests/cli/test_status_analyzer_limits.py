"""``sentinel status`` (the real command, a subprocess) names the analyzer when it is what
stops the verdicts or the drain: a spent daily budget is named as the budget, not "the
analyzer is failing", and under ``SENTINEL_ANALYZER_WHEN_DOWN=wait`` a stream that waits
for a down analyzer is advised about the analyzer, not about more workers."""

from __future__ import annotations

from collections.abc import Callable

from sentinel_platform.exit_codes import EXIT_BACKPRESSURE, EXIT_ELEVATED
from sentinel_platform.streams.backlog.drain import write_drain_rate
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import (
    CliResult,
    run_sentinel,
    status_of_stream,
    transaction_fields,
    transaction_result,
)

DAILY_REASON = (
    "daily_tokens: daily token budget spent (9000 of SENTINEL_ANALYZER_DAILY_TOKENS=9000)"
)


def test_a_spent_daily_budget_is_named_not_a_failing_analyzer(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    redis_client.set(
        holds.hold_key("gpt-eu"), holds.encode_hold("gpt-eu", "", "exhausted", DAILY_REASON, 3600)
    )
    redis_client.hset(holds.REGISTRY_KEY, "gpt-eu", "")
    for _ in range(8):
        fields = {
            **transaction_result("fallback"),
            "fallback_cause": "exhausted",
            "provisional": "true",
        }
        redis_client.xadd(tx_keys.results, fields)
    result = sentinel("status", "--json")
    assert result.code == EXIT_ELEVATED, result.err
    doc = result.json()
    assert status_of_stream(doc, tx_keys.stream)["verdicts"]["fallback_causes"] == {"exhausted": 8}
    fallbacks = next(w for w in doc["warnings"] if tx_keys.stream in w)
    assert "daily token budget of analyzer gpt-eu is spent" in fallbacks, fallbacks
    assert "the analyzer is failing" not in sentinel("status").out


def test_waiting_for_a_down_analyzer_is_advised_about_the_analyzer_not_workers(
    settings_env: dict[str, str],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    """The issue's case: ``wait`` mode, the model server down, the stream in
    backpressure at 0 rows/s. More workers cannot help: the advice names the analyzer."""
    for i in range(300):
        redis_client.xadd(tx_keys.stream, transaction_fields(f"tx-{i}"))
    write_drain_rate(redis_client, tx_keys, 0.0, 300)
    env = {
        **settings_env,
        "SENTINEL_ANALYZER_WHEN_DOWN": "wait",
        "SENTINEL_ANALYZER_URL": "http://127.0.0.1:9/assess",
    }
    result = run_sentinel(env, "status", "--json")
    assert result.code == EXIT_BACKPRESSURE, result.err
    tx = status_of_stream(result.json(), tx_keys.stream)  # type: ignore[arg-type]
    assert tx["zone"] == "backpressure"
    advice = tx["drain_advice"]
    assert advice and advice.startswith("the analyzer limits the drain"), advice
    assert "SENTINEL_ANALYZER_WHEN_DOWN=wait" in advice
    text = run_sentinel(env, "status").out
    assert "  advice: the analyzer limits the drain" in text, text
    # the same stream under the default (rules): the analyzer is not what stops it
    rules = run_sentinel({**env, "SENTINEL_ANALYZER_WHEN_DOWN": "rules"}, "status", "--json")
    assert status_of_stream(rules.json(), tx_keys.stream)["drain_advice"] is None  # type: ignore[arg-type]
