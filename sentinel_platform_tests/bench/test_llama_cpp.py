"""The llama_cpp bench compares like with like: its direct client sends exactly the request
bodies the worker sends.

A real ``python -m workers.watch_transactions`` on defaults plus the llama.cpp recipe and
the bench's direct client each run against the pure-queue stub (a real HTTP server, which
keeps every body it served) on the same transactions. Both sent the same multiset of
bodies, one distinct body per transaction: an earlier direct client posted one body again
and again, which llama.cpp's prompt cache answers without evaluating the prompt, while the
worker's bodies differ per transaction.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench.llama_cpp import run_arms, worker_settings
from sentinel_platform.redis_server import RedisServer
from sentinel_platform_tests.harness.llama_server import MODEL_ALIAS
from sentinel_platform_tests.harness.pure_queue_server import serving_pure_queue

CALLS = 4
SERVICE_S = 0.05


def test_the_direct_client_sends_the_workers_own_distinct_bodies(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    with serving_pure_queue(SERVICE_S) as stub:
        settings = worker_settings(redis_server.url, tmp_path, stub.url, MODEL_ALIAS)
        arms, same = run_arms(redis_server.url, settings, tmp_path, CALLS, stub)
        worker_bodies = Counter(stub.bodies)
    assert same is True
    assert len(worker_bodies) == CALLS  # one distinct body per transaction
    worker = arms[-1]
    assert worker.model_verdicts == CALLS
    assert all(arm.usage for arm in arms)  # tokens counted on both sides
