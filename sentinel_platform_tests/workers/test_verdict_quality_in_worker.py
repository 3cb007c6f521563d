"""Is the model right, as the real worker records it: ``python -m workers.watch_transactions``
deciding generated transactions with an OpenAI Chat Completions server
(a real HTTP server answering in the documented shape, always "threat") and a real Redis.

What is promised: every result entry keeps the rules' verdict on the same message beside
the model's (``rules_is_threat``, ``rules_risk_level``) and a model verdict the call's
``latency_ms``; the worker's ``sentinel_worker_verdict_outcomes_total`` counts each
labelled model verdict in its cell of the confusion matrix, per model and prompt version,
and leaves an unlabelled one out.
"""

from __future__ import annotations

from collections.abc import Callable

from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.model_lanes import ModelWorker, api_settings
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.test_label_unseen_in_worker import GENERATED

OUTCOMES = "sentinel_worker_verdict_outcomes_total"


def test_results_carry_the_rules_verdict_and_the_worker_counts_the_confusion_matrix(
    model_api_server: ModelApiServer,
    model_worker: Callable[..., ModelWorker],
) -> None:
    worker = model_worker(**api_settings("openai", model_api_server))
    worker.publish(GENERATED)  # a labelled threat, a labelled harmless payment, one unlabelled
    results = {r["txn_id"]: r for r in worker.results(len(GENERATED))}
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

    def counted() -> dict[str, float]:
        return {k: v for k, v in worker.metrics(OUTCOMES).items() if v}

    wait_until(lambda: sum(counted().values()) == 2, timeout_s=30)
    cells = {k.split('outcome="')[1].split('"')[0]: v for k, v in counted().items()}
    assert cells == {"tp": 1.0, "fp": 1.0}, (
        "the model says threat to both; the unlabelled one is not counted"
    )
    assert all(f'prompt_version="{prompt}"' in k for k in counted()), counted()
    assert all('model="gpt-4o-mini' in k for k in counted()), counted()
    assert all('role="primary"' in k for k in counted()), counted()
    worker.stop()
