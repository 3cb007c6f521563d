"""``sentinel verdict ID`` (the real command, a subprocess): one message's input, decision,
who made it, narrative, tokens and cost, and whether it is provisional, superseded or a
re-screen.

The model's verdict comes from a real worker process calling a real HTTP server that
answers as Chat Completions does. The provisional verdicts and their re-screens are
written as the contract of issue 52 shapes them (``sentinel_platform.streams.backlog.
provisional``): the result fields, the re-screen queue entry, the idempotency marker
holding the source message id, all in the same keys the workers commit to.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.provisional import (
    QUEUE_CAUSE,
    QUEUE_DAY,
    QUEUE_RESULT_ID,
    QUEUE_SOURCE_ID,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import (
    CliResult,
    axiom_fields,
    run_sentinel,
    transaction_fields,
)
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.processes import MODEL_NAMES, Fleet, model_api_worker
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE

PRICES = {
    "SENTINEL_ANALYZER_PRICE_INPUT_PER_MTOK": "0.15",
    "SENTINEL_ANALYZER_PRICE_OUTPUT_PER_MTOK": "0.60",
    "SENTINEL_ANALYZER_PRICE_CACHED_INPUT_PER_MTOK": "0.075",
}


def _result(txn_id: str, source_id: str, driver: str, **extra: str) -> dict[str, str]:
    """A transactions result entry as the workers commit it (``TransactionProcessor``,
    the consumer loop's ``source_message_id``, the contract's ``day``)."""
    return {
        "txn_id": txn_id,
        "merchant": "ACME",
        "amount": "12.50",
        "currency": "EUR",
        "is_threat": "false",
        "risk_level": "low",
        "driver_used": driver,
        "processed_at": "2026-11-29T03:10:00.000Z",
        "source_message_id": source_id,
        "day": "2024-05-01",
        **extra,
    }


def _provisional(
    client: RedisClient, keys: StreamKeys, txn_id: str, cause: str = "down"
) -> tuple[str, str, str]:
    """A published transaction decided by the rules as a provisional fallback, with its
    marker and its re-screen queue entry: (source id, result id, queue id)."""
    fields = transaction_fields(txn_id)
    source = client.xadd(keys.stream, fields)
    client.set(keys.marker(txn_id), source, ex=3600)
    extra = {"fallback_cause": cause, "provisional": "true"}
    result = client.xadd(keys.results, _result(txn_id, source, "fallback", **extra))
    queued = {
        **fields,
        QUEUE_RESULT_ID: result,
        QUEUE_SOURCE_ID: source,
        QUEUE_CAUSE: cause,
        QUEUE_DAY: "2024-05-01",
    }
    queue_id = client.xadd(keys.rescreen, queued)
    return source, result, queue_id


def _rescreen(client: RedisClient, keys: StreamKeys, txn_id: str, source: str, of: str) -> str:
    said = {
        "narrative": "a round amount to a new merchant, just under the threshold",
        "model": "gpt-4o-mini",
        "prompt_version": "3f2a9c1e",
        "input_tokens": "300",
        "output_tokens": "60",
        "cached_input_tokens": "200",
        "rescreen_of": of,
        "is_threat": "true",
        "risk_level": "high",
    }
    return client.xadd(keys.results, {**_result(txn_id, source, "analyzer"), **said})


def _cost(input_tokens: int, output_tokens: int, cached: int) -> float:
    """OpenAI's billing at :data:`PRICES`: cached prompt tokens at the cached price."""
    paid = (input_tokens - cached) * 0.15 + cached * 0.075 + output_tokens * 0.60
    return paid / 1_000_000


def test_a_models_verdict_shows_its_input_narrative_model_tokens_and_cost(
    model_api_server: ModelApiServer,
    fleet: Fleet,
    settings: Settings,
    settings_env: dict[str, str],
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    worker = model_api_worker(fleet, settings, "verdict-a", analyzer_url=model_api_server.url)
    worker.wait_ready(redis_client, timeout_s=60)
    source = redis_client.xadd(tx_keys.stream, {"data": json.dumps({**BASE, "id": "t-7"})})
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 1, timeout_s=60, what="a verdict")
    assert worker.stop() == 0, worker.tail()
    result = run_sentinel({**settings_env, **PRICES}, "verdict", "t-7", "--json")
    assert result.code == EXIT_OK, result.err
    doc: Any = result.json()
    assert doc["key"] == "t-7" and doc["search"]["found_by"] == "marker"
    assert doc["input"]["source_message_id"] == source
    assert json.loads(doc["input"]["fields"]["data"])["merchant"] == BASE["merchant"]
    [verdict] = doc["verdicts"]
    assert verdict["driver_used"] == "analyzer"
    assert verdict["model"].startswith(MODEL_NAMES["openai"])  # the answer's dated name
    assert verdict["prompt_version"] and verdict["narrative"]
    tokens = [verdict[n] for n in ("input_tokens", "output_tokens", "cached_input_tokens")]
    assert tokens[0] > 0 and tokens[1] > 0, tokens
    assert abs(verdict["cost"] - _cost(*tokens)) < 1e-6, (verdict["cost"], tokens)
    assert doc["in_force"] == verdict["entry_id"] and not doc["rescreened"]
    # the same verdict by its results entry id, in words
    text = run_sentinel(settings_env, "verdict", verdict["entry_id"])
    assert text.code == EXIT_OK, text.err
    assert f"by the model {verdict['model']} (prompt_version" in text.out
    assert f"narrative: {verdict['narrative']}" in text.out
    assert "cost - (no SENTINEL_ANALYZER_PRICE_*)" in text.out  # no prices in this env


def test_a_rescreened_transaction_shows_both_verdicts_and_the_models_in_force(
    sentinel: Callable[..., CliResult], redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    source, first, _ = _provisional(redis_client, tx_keys, "tx-9")
    for i in range(30):  # other messages' verdicts in between
        redis_client.xadd(tx_keys.results, _result(f"other-{i}", f"9-{i}", "rules"))
    second = _rescreen(redis_client, tx_keys, "tx-9", source, first)
    for query in ("tx-9", first, second):
        result = sentinel("verdict", query, "--json")
        assert result.code == EXIT_OK, result.err
        doc: Any = result.json()
        assert [v["entry_id"] for v in doc["verdicts"]] == [first, second], query
        old, new = doc["verdicts"]
        assert (old["provisional"], old["fallback_cause"], old["superseded_by"]) == (
            True,
            "down",
            second,
        )
        assert (new["rescreen_of"], new["is_threat"], new["risk_level"]) == (first, True, "high")
        assert (doc["in_force"], doc["rescreened"]) == (second, True)
    text = sentinel("verdict", "tx-9").out
    fallback = "by the rules, as a fallback (fallback_cause down)"
    assert f"{fallback}: provisional, superseded by {second}" in text, text
    assert f"by the model gpt-4o-mini (prompt_version 3f2a9c1e): a re-screen of {first}" in text
    assert f"in force: {second}" in text


def test_a_provisional_verdict_waiting_shows_its_queue_entry_and_its_input_once_trimmed(
    sentinel: Callable[..., CliResult], redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    source, first, queue_id = _provisional(redis_client, tx_keys, "tx-3", cause="exhausted")
    redis_client.xdel(tx_keys.stream, source)  # the stream's retention trimmed it
    doc: Any = sentinel("verdict", "tx-3", "--json").json()
    assert doc["input"]["kept_in"] == "rescreen_queue"
    assert json.loads(doc["input"]["fields"]["data"])["id"] == "tx-3"
    [verdict] = doc["verdicts"]
    assert (verdict["queued_for_rescreen"], verdict["superseded_by"]) == (queue_id, None)
    assert doc["in_force"] == first
    text = sentinel("verdict", "tx-3").out
    assert f"waits for the model in the re-screen queue ({queue_id})" in text, text
    redis_client.xdel(tx_keys.rescreen, queue_id)  # re-screened and trimmed, no verdict kept
    gone: Any = sentinel("verdict", "tx-3", "--json").json()
    assert gone["input"]["kept_in"] is None and "no longer kept" in gone["input"]["note"]


def test_an_expired_marker_is_said_and_the_newest_results_are_searched(
    sentinel: Callable[..., CliResult], redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    _, first, _ = _provisional(redis_client, tx_keys, "tx-5")
    redis_client.delete(tx_keys.marker("tx-5"))
    doc: Any = sentinel("verdict", "tx-5", "--json").json()
    assert doc["search"]["found_by"] == "scan"
    assert "idempotency marker has expired" in doc["search"]["note"]
    assert [v["entry_id"] for v in doc["verdicts"]] == [first]


def test_the_search_is_bounded_and_says_where_it_stopped(
    sentinel: Callable[..., CliResult], redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    source, first, _ = _provisional(redis_client, tx_keys, "tx-6")
    for i in range(50):
        redis_client.xadd(tx_keys.results, _result(f"other-{i}", f"9-{i}", "rules"))
    _rescreen(redis_client, tx_keys, "tx-6", source, first)
    doc: Any = sentinel("verdict", "tx-6", "--scan", "20", "--json").json()
    assert [v["entry_id"] for v in doc["verdicts"]] == [first]  # the re-screen lies beyond
    assert doc["search"]["complete"] is False
    assert "stopped at the bound (--scan 20)" in doc["search"]["note"]


def test_an_unknown_id_is_a_clear_error(
    sentinel: Callable[..., CliResult], redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    redis_client.xadd(tx_keys.results, _result("tx-1", "1-0", "rules"))
    for query in ("tx-404", "1-1"):
        result = sentinel("verdict", query)
        assert result.code == EXIT_ERROR
        assert f"no verdict of {query!r} on transactions" in result.err, result.err
        assert "Traceback" not in result.err
    unknown = sentinel("verdict", "tx-1", "--stream", "nope")
    assert unknown.code == 2 and "--stream" in unknown.err


def test_an_axiom_is_found_by_its_natural_key_with_its_audit_narrative(
    sentinel: Callable[..., CliResult], redis_client: RedisClient, ax_keys: StreamKeys
) -> None:
    fields = axiom_fields("sensor-4")
    source = redis_client.xadd(ax_keys.stream, fields)
    key = f"sensor-4|{fields['emitted_at']}"
    redis_client.set(ax_keys.marker(key), source, ex=3600)
    result = {
        "source_id": "sensor-4",
        "emitted_at": fields["emitted_at"],
        "status": "nominal",
        "risk_level": "medium",
        "audit_narrative": "the anomaly score is low for a nominal reading",
        "driver_used": "analyzer",
        "source_message_id": source,
    }
    entry = redis_client.xadd(ax_keys.results, result)
    found = sentinel("verdict", key, "--stream", "axioms", "--json")
    assert found.code == EXIT_OK, found.err
    doc: Any = found.json()
    assert (doc["stream"], doc["key"], doc["in_force"]) == ("axioms", key, entry)
    [verdict] = doc["verdicts"]
    assert (verdict["is_threat"], verdict["risk_level"]) == (None, "medium")
    assert verdict["narrative"] == result["audit_narrative"]
    assert doc["input"]["fields"]["source_id"] == "sensor-4"


def test_a_batch_lane_verdict_is_priced_at_the_batch_share_and_its_fallback_named(
    settings_env: dict[str, str], redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    """Result entries as the batch lane commits them (``lane=batch``): the model's verdict
    costs the batch share of the real-time prices, an expired request's fallback is named
    for what the provider did."""
    batch = {**PRICES, "SENTINEL_ANALYZER_BATCH_PRICE_SHARE": "0.5"}
    source = redis_client.xadd(tx_keys.stream, transaction_fields("t-b"))
    redis_client.set(tx_keys.marker("t-b"), source, ex=3600)
    said = {
        "model": "gpt-4o-mini-2024-07-18",
        "prompt_version": "3f2a9c1e",
        "narrative": "nothing unusual",
        "input_tokens": "1000",
        "output_tokens": "100",
        "cached_input_tokens": "400",
        "lane": "batch",
    }
    redis_client.xadd(tx_keys.results, {**_result("t-b", source, "analyzer"), **said})
    result = run_sentinel({**settings_env, **batch}, "verdict", "t-b", "--json")
    assert result.code == EXIT_OK, result.err
    doc: Any = result.json()
    [verdict] = doc["verdicts"]
    assert verdict["lane"] == "batch"
    assert abs(verdict["cost"] - _cost(1000, 100, 400) * 0.5) < 1e-9, verdict["cost"]

    late = redis_client.xadd(tx_keys.stream, transaction_fields("t-x"))
    redis_client.set(tx_keys.marker("t-x"), late, ex=3600)
    expired = {"fallback_cause": "batch_expired", "lane": "batch"}
    redis_client.xadd(tx_keys.results, _result("t-x", late, "fallback", **expired))
    text = run_sentinel({**settings_env, **batch}, "verdict", "t-x")
    assert text.code == EXIT_OK, text.err
    assert "expired at the provider" in text.out and "batch lane" in text.out, text.out
