"""A key rotation without an outage: real worker processes (``python -m
sentinel_platform.workers transactions`` with ``SENTINEL_ANALYZER_API=openai`` and a key
file), a real Redis, and a real HTTP server speaking Chat Completions that serves only the
valid key and answers any other with the API's documented 401 (OpenAI's
``invalid_api_key``, Anthropic's ``authentication_error``).

What is promised: a worker still on the revoked key is held (one refused call, then its
messages follow ``SENTINEL_ANALYZER_WHEN_DOWN``) while a worker on the valid key keeps
getting the model's verdicts; ``sentinel status`` (the real command) names the refused
key by its fingerprint and never shows a key; rewriting the held worker's key file with
the valid key makes it call again, with no release; no key reaches a worker's output.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.provisional import RESCREEN_OF
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.cli import run_sentinel
from sentinel_platform_tests.harness.model_api_bodies import request_key
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.model_lanes import api_settings
from sentinel_platform_tests.harness.processes import Fleet, WorkerProcess, child_env, wait_leases
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from workers.analyzer.keys.key_fingerprint import key_digest

REVOKED = "sk-proj-Rev0kedRotation0123456789abcdOLD1"
VALID = "sk-proj-Val1dRotation0123456789abcdefNEW2"
REVOKED_SHOWN = "sk-proj-...OLD1"


def write_key(path: Path, key: str) -> None:
    """As a secret mount is updated: a new file renamed over the old one."""
    fresh = path.with_suffix(".new")
    fresh.write_text(key + "\n", encoding="utf-8")
    os.replace(fresh, path)


def start(
    fleet: Fleet, settings: Settings, server: ModelApiServer, api: str, name: str, key_file: Path
) -> WorkerProcess:
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        **api_settings(api, server),
        analyzer_api_key_file=key_file,
        analyzer_when_down="rules",
        worker_concurrency=1,
    )
    return fleet.worker("transactions", name, env)


def add(redis_client: RedisClient, settings: Settings, batch: str, n: int) -> None:
    stream = transaction_keys(settings).stream
    for i in range(n):
        redis_client.xadd(stream, {"data": json.dumps({**BASE, "id": f"txn-{batch}-{i}"})})


def one_at_a_time(
    redis_client: RedisClient, settings: Settings, batch: str, model_verdicts: int
) -> bool:
    """Whether ``batch`` has that many model verdicts; else one more message once every
    one added is decided, so each idle worker in turn gets one (at most 40)."""
    decided = verdicts(redis_client, settings, batch)
    if decided.count("analyzer") >= model_verdicts:
        return True
    stream = transaction_keys(settings).stream
    added = sum(1 for _, f in redis_client.xrange(stream) if f"txn-{batch}-" in f["data"])
    if len(decided) == added:
        assert added < 40, f"{added} messages, {decided.count('analyzer')} model verdicts"
        txn = {**BASE, "id": f"txn-{batch}-{added}"}
        redis_client.xadd(stream, {"data": json.dumps(txn)})
    return False


def verdicts(redis_client: RedisClient, settings: Settings, batch: str) -> list[str]:
    """Who decided each message of ``batch`` when it came (``analyzer`` or ``fallback``):
    a re-screen of a held worker's provisional fallback (``rescreen_of``), which the
    worker on the valid key makes meanwhile, is a second verdict of the same message."""
    results = redis_client.xrange(transaction_keys(settings).results)
    return [
        f["driver_used"]
        for _, f in results
        if f["txn_id"].startswith(f"txn-{batch}-") and RESCREEN_OF not in f
    ]


def sent_with(server: ModelApiServer, key: str) -> list[dict[str, Any]]:
    return [r for r in server.seen() if request_key(r["headers"]) == key]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_revoked_key_holds_only_its_worker_until_its_key_file_holds_the_new_key(
    api: str,
    model_api_server: ModelApiServer,
    fleet: Fleet,
    settings: Settings,
    settings_env: dict[str, str],
    redis_client: RedisClient,
    tmp_path: Path,
) -> None:
    model_api_server.accepted_keys = frozenset({VALID})
    keys = transaction_keys(settings)
    revoked_file, valid_file = tmp_path / "revoked.key", tmp_path / "valid.key"
    write_key(revoked_file, REVOKED)
    write_key(valid_file, VALID)

    # The worker left on the revoked key: one refused call, then held.
    late = start(fleet, settings, model_api_server, api, "rotation-late", revoked_file)
    wait_leases(redis_client, keys, [late], timeout_s=60)
    add(redis_client, settings, "before", 3)
    wait_until(lambda: len(verdicts(redis_client, settings, "before")) == 3, timeout_s=60)
    assert verdicts(redis_client, settings, "before") == ["fallback"] * 3
    assert [r["status"] for r in sent_with(model_api_server, REVOKED)] == [401]

    # A worker on the valid key keeps getting the model's verdicts meanwhile.
    rolled = start(fleet, settings, model_api_server, api, "rotation-rolled", valid_file)
    wait_leases(redis_client, keys, [rolled], timeout_s=60)
    wait_until(
        lambda: one_at_a_time(redis_client, settings, "during", model_verdicts=3),
        timeout_s=30,
        what="three model verdicts while a worker is held on the revoked key",
    )
    during = verdicts(redis_client, settings, "during")
    assert "fallback" in during, "the worker on the revoked key took messages meanwhile"
    assert {r["status"] for r in sent_with(model_api_server, VALID)} == {200}
    assert len(sent_with(model_api_server, REVOKED)) == 1, "the revoked key is not tried again"

    # Status names the refused key by its fingerprint, never a key.
    shown = run_sentinel(settings_env, "status")  # its exit code: the axioms have no worker
    assert f"key {REVOKED_SHOWN}: exhausted, until released: rejected_key" in shown.out
    as_json = run_sentinel(settings_env, "status", "--json")
    (held,) = as_json.json()["analyzer_holds"]
    assert (held["key"], held["key_digest"]) == (REVOKED_SHOWN, key_digest(REVOKED))
    for text in (shown.out, shown.err, as_json.out, as_json.err):
        assert REVOKED not in text and VALID not in text

    # Only the held worker is left: its key file rewritten, it calls again, unreleased.
    assert rolled.stop() == 0, rolled.tail()
    write_key(revoked_file, VALID)
    add(redis_client, settings, "after", 3)
    wait_until(lambda: len(verdicts(redis_client, settings, "after")) == 3, timeout_s=60)
    assert verdicts(redis_client, settings, "after") == ["analyzer"] * 3
    digest = key_digest(REVOKED)
    assert redis_client.exists(holds.key_hold_key(holds_id(redis_client), digest)) == 1
    assert late.stop() == 0, late.tail()
    (changed,) = late.events("analyzer_key_changed")
    assert (changed["key"], changed["previous"]) == ("sk-proj-...NEW2", REVOKED_SHOWN)
    for worker in (late, rolled):
        assert REVOKED not in worker.text() and VALID not in worker.text()


def holds_id(redis_client: RedisClient) -> str:
    """The one analyzer the workers registered."""
    (analyzer_id,) = holds.registered(redis_client)
    return analyzer_id
