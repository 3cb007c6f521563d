"""Is the model right, as the real worker records it: ``sentinel_platform.workers
transactions`` deciding generated transactions with an OpenAI Chat Completions server
(a real HTTP server answering in the documented shape, always "threat") and a real Redis.

What is promised: every result entry keeps the rules' verdict on the same message beside
the model's (``rules_is_threat``, ``rules_risk_level``) and a model verdict the call's
``latency_ms``; the worker's ``sentinel_worker_verdict_outcomes_total`` counts each
labelled model verdict in its cell of the confusion matrix, per model and prompt version,
and leaves an unlabelled one out.
"""

from __future__ import annotations

import json

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.processes import FAST_TIMINGS, Fleet, child_env
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.test_analyzer_exhausted_in_worker import events
from sentinel_platform_tests.workers.test_analyzer_in_worker import scrape_samples
from sentinel_platform_tests.workers.test_daily_budget_in_worker import entries
from sentinel_platform_tests.workers.test_label_unseen_in_worker import GENERATED
from sentinel_platform_tests.workers.test_model_apis_in_worker import api_settings

OUTCOMES = "sentinel_worker_verdict_outcomes_total{"


def test_results_carry_the_rules_verdict_and_the_worker_counts_the_confusion_matrix(
    model_api_server: ModelApiServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    env = child_env(
        settings.redis_url_value, settings.home_dir, **api_settings("openai", model_api_server)
    )
    env.update(FAST_TIMINGS)
    worker = fleet.worker("transactions", "quality", env, extra=["--metrics-port", "0"])
    worker.wait_ready(redis_client, timeout_s=60)
    keys = transaction_keys(settings)
    for row in GENERATED:  # a labelled threat, a labelled harmless payment, one unlabelled
        redis_client.xadd(keys.stream, {"data": json.dumps(row)})
    wait_until(lambda: redis_client.xlen(keys.results) == len(GENERATED), timeout_s=60)
    results = {r["txn_id"]: r for r in entries(redis_client, keys.results)}
    rules = {
        txn: (r.get("rules_is_threat"), r.get("rules_risk_level")) for txn, r in results.items()
    }
    assert rules == {
        "txn-20261121-2a-00000001": ("true", "high"),  # the rules catch it too
        "txn-20261121-2a-00000002": ("false", "low"),
        "txn-20261121-2a-00000003": ("false", "low"),
    }
    assert all(r["driver_used"] == "analyzer" for r in results.values()), results
    assert all(int(r["latency_ms"]) >= 0 for r in results.values()), results
    prompt = results["txn-20261121-2a-00000001"]["prompt_version"]

    (serving,) = events(worker, "metrics_serving")

    def counted() -> dict[str, float]:
        samples = scrape_samples(serving["url"]).items()
        return {k: v for k, v in samples if k.startswith(OUTCOMES) and v}

    wait_until(lambda: sum(counted().values()) == 2, timeout_s=30)
    cells = {k.split('outcome="')[1].split('"')[0]: v for k, v in counted().items()}
    assert cells == {"tp": 1.0, "fp": 1.0}, (
        "the model says threat to both; the unlabelled one is not counted"
    )
    assert all(f'prompt_version="{prompt}"' in k for k in counted()), counted()
    assert all('model="gpt-4o-mini' in k for k in counted()), counted()
    assert all('role="primary"' in k for k in counted()), counted()
    assert worker.stop() == 0, worker.tail()
