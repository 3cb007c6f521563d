"""One long message stops nobody but itself: real worker processes
(``python -m sentinel_platform.workers transactions``), a real Redis, and a real HTTP server
speaking the model API whose model has a small context, refusing a longer request with the
documented body (vLLM's ``'max_tokens' ... is too large``, OpenAI's
``context_length_exceeded``, Anthropic's "prompt is too long").

What is promised: a transaction whose Cyrillic memo does not fit gets the rules' verdict
(``driver_used=fallback``, the reason logged) under ``SENTINEL_ANALYZER_WHEN_DOWN=rules``
and is dead-lettered with the reason and its whole payload under ``wait``; every other
transaction gets the model's verdict; no fleet hold is set; and once a worker has been
told the context (or ``SENTINEL_ANALYZER_CONTEXT_TOKENS`` gives it), a later long memo is
refused before it is sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.model_lanes import api_settings
from sentinel_platform_tests.harness.processes import Child, Fleet, child_env, wait_leases
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from sentinel_platform_tests.workers.test_analyzer_exhausted_in_worker import events

WORKERS = 2
#: The model's context in the server's tokens: a usual transaction's request is about
#: 650 with its 400 for the verdict, one with the long memo about 1,250.
CONTEXT_TOKENS = 1000
#: The memo of the issue: 2,400 characters of Cyrillic.
LONG_MEMO = ("Перевод средств по договору займа, остаток по счёту " * 60)[:2400]
LONG = ("txn-long-3", "txn-long-7", "txn-long-11")
NORMAL = tuple(f"txn-short-{i}" for i in range(12) if f"txn-long-{i}" not in LONG)


def start_fleet(
    fleet: Fleet, settings: Settings, redis_client: RedisClient, values: dict[str, Any]
) -> list[Child]:
    env = child_env(settings.redis_url_value, settings.home_dir, worker_concurrency=1, **values)
    workers = [fleet.worker("transactions", f"context-{i}", env) for i in range(WORKERS)]
    wait_leases(redis_client, transaction_keys(settings), workers, timeout_s=60)
    return workers


def add_transactions(redis_client: RedisClient, settings: Settings) -> dict[str, dict[str, str]]:
    """The long-memo transactions among the others, in stream order; their fields by id."""
    keys = transaction_keys(settings)
    added: dict[str, dict[str, str]] = {}
    for i in range(12):
        txn_id = f"txn-long-{i}" if f"txn-long-{i}" in LONG else f"txn-short-{i}"
        memo = LONG_MEMO if txn_id in LONG else "weekly shop"
        added[txn_id] = {"data": json.dumps({**BASE, "id": txn_id, "message": memo})}
        redis_client.xadd(keys.stream, added[txn_id])
    return added


def long_memos_sent(server: ModelApiServer) -> int:
    return sum(LONG_MEMO in json.dumps(r["body"], ensure_ascii=False) for r in server.seen())


def assert_no_fleet_hold(redis_client: RedisClient) -> None:
    assert not list(redis_client.scan_iter("sentinel:analyzer:*:hold")), "no fleet hold"


@pytest.mark.parametrize(
    ("api", "dialect"),
    [
        ("openai", "vllm_max_tokens"),
        ("openai", "openai"),
        ("anthropic", "anthropic"),
        ("openai", "configured"),  # SENTINEL_ANALYZER_CONTEXT_TOKENS: none is sent
    ],
)
def test_under_rules_the_long_memo_gets_the_rules_and_every_other_the_models(
    api: str,
    dialect: str,
    model_api_server: ModelApiServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    model_api_server.context_tokens, model_api_server.context_dialect = CONTEXT_TOKENS, dialect
    values = api_settings(api, model_api_server, analyzer_when_down="rules")
    if dialect == "configured":
        values["analyzer_context_tokens"] = CONTEXT_TOKENS
    workers = start_fleet(fleet, settings, redis_client, values)
    add_transactions(redis_client, settings)
    keys = transaction_keys(settings)
    wait_until(lambda: redis_client.xlen(keys.results) == len(LONG) + len(NORMAL), timeout_s=60)
    drivers = {r["txn_id"]: r["driver_used"] for _, r in redis_client.xrange(keys.results)}
    assert drivers == {
        **{txn_id: "fallback" for txn_id in LONG},
        **{txn_id: "analyzer" for txn_id in NORMAL},
    }
    assert_no_fleet_hold(redis_client)
    reasons = [e["reason"] for w in workers for e in events(w, "analyzer_refused_message")]
    assert len(reasons) == len(LONG), "each refused message's reason is logged"
    assert all("context" in reason for reason in reasons), reasons
    sent = long_memos_sent(model_api_server)
    assert sent <= (0 if dialect == "configured" else WORKERS), "a known context: not sent"
    assert not [e for w in workers for e in events(w, "analyzer_exhausted")]


def test_under_wait_the_long_memo_is_dead_lettered_with_the_reason(
    model_api_server: ModelApiServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    model_api_server.context_tokens = CONTEXT_TOKENS  # vLLM's 'max_tokens' ... is too large
    values = api_settings("openai", model_api_server, analyzer_when_down="wait")
    start_fleet(fleet, settings, redis_client, values)
    added = add_transactions(redis_client, settings)
    keys = transaction_keys(settings)
    wait_until(lambda: redis_client.xlen(keys.dlq) == len(LONG), timeout_s=60)
    wait_until(lambda: redis_client.xlen(keys.results) == len(NORMAL), timeout_s=60)
    drivers = {r["txn_id"]: r["driver_used"] for _, r in redis_client.xrange(keys.results)}
    assert drivers == {txn_id: "analyzer" for txn_id in NORMAL}
    letters = [DeadLetter.from_fields(fields) for _, fields in redis_client.xrange(keys.dlq)]
    for letter in letters:
        assert letter.reason == "unprocessable"
        assert "context" in letter.error and "1000 tokens" in letter.error, letter.error
        txn_id = json.loads(letter.original_fields["data"])["id"]
        assert letter.original_fields == added[txn_id], "the whole payload is kept"
    assert sorted(json.loads(x.original_fields["data"])["id"] for x in letters) == sorted(LONG)
    assert_no_fleet_hold(redis_client)
    assert redis_client.xpending(keys.stream, keys.group)["pending"] == 0
