"""A real model: verdicts/s of a worker on defaults against llama.cpp's server, vs a direct client.

llama.cpp's Python server (``python -m llama_cpp.server``, the ``llm`` extra: ``make
test-llm`` installs it) serves SmolLM2-135M-Instruct, one request at a time. In the same run:

* **direct**: a client posting the worker's own request body (the transactions prompt,
  ``response_format`` ``json_object``, ``max_tokens`` = ``SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS``'s
  default) straight to the server at C = 1, 2 and 4 calls at once; the best is the baseline.
* **worker**: ``python -m workers.watch_transactions`` on defaults (the adaptive in-flight
  limit) plus docs/analyzer.md's llama.cpp recipe, the transactions released at once
  (:func:`bench.timing.release`), timed to the last verdict.

Goal: worker verdicts/s >= 0.8x the direct client's best, every verdict the model's. Without
the extra the scenario prints SKIP and exits 0 (so ``make bench`` passes on a machine
without it).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import redis

from bench.cells import TRANSACTION, transactions
from bench.timing import (
    Goal,
    base_parser,
    bench_settings,
    emit_json,
    machine_info,
    park,
    print_goals,
    raw_client,
    redis_server,
    release,
    scratch_dir,
)
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.llama_server import LlamaServer, find_gguf, serving_llama
from sentinel_platform_tests.harness.processes import Fleet, WorkerProcess, child_env
from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer.openai_api import OpenAiApi
from workers.analyzer.prompts import load_prompt
from workers.processors import transactions as transactions_processor

NAME = "llama_cpp"
GOAL = 0.8
CONCURRENCIES = (1, 2, 4)
#: docs/analyzer.md's llama.cpp recipe (field names).
RECIPE = {"analyzer_api": "openai", "analyzer_response_format": "json_object"}
RECIPE_TIMEOUT_S = 60
#: A call is seconds on two loaded cores: the whole run is bounded by this.
RUN_TIMEOUT_S = 900.0


def direct_rate(server: LlamaServer, body: bytes, calls: int, concurrency: int) -> float:
    """Verdicts/s of ``calls`` posts of ``body``, ``concurrency`` at a time."""

    def post(_: int) -> None:
        request = urllib.request.Request(
            f"{server.url}/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=RUN_TIMEOUT_S) as response:
            json.load(response)["choices"][0]["message"]["content"]

    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(post, range(calls)))
    return calls / (time.monotonic() - started)


def worker_rate(server: LlamaServer, url: str, home: Path, calls: int) -> tuple[float, int]:
    """Verdicts/s of one worker on defaults plus the recipe; and how many were the model's."""
    settings = bench_settings(url, home)
    keys = transaction_keys(settings)
    client = raw_client(url)
    messages = list(transactions(calls))
    park(client, keys, messages)
    env = child_env(
        url,
        home,
        analyzer_url=server.url,
        analyzer_model=server.model,
        analyzer_timeout_s=RECIPE_TIMEOUT_S,
        **RECIPE,
    )
    argv = [sys.executable, "-m", "workers.watch_transactions", "--consumer", "llama-worker"]
    with Fleet(home) as fleet:
        child = fleet.spawn("llama-worker", argv, env)
        worker = WorkerProcess(child.proc, child.name, None, child.log_path, env)
        worker.wait_ready(client, timeout_s=120)
        release(client, keys, messages[-1])
        started = time.monotonic()
        wait_until(
            lambda: client.xlen(keys.results) >= calls,
            timeout_s=RUN_TIMEOUT_S,
            interval_s=0.1,
            what="every verdict",
        )
        elapsed = time.monotonic() - started
        worker.stop()
    results = [fields for _, fields in client.xrange(keys.results)]
    return calls / elapsed, sum(1 for r in results if r.get("driver_used") == "analyzer")


def request_body(server: LlamaServer, home: Path, url: str) -> bytes:
    """The worker's own request for one transaction (same prompt, format, ``max_tokens``)."""
    prompt = load_prompt(transactions_processor.PROMPT, bench_settings(url, home))
    api = OpenAiApi(server.model, response_format="json_object")
    payload: dict[str, Any] = {**TRANSACTION, "id": "direct"}
    return api.request("transaction", payload, prompt)


def main(argv: list[str] | None = None) -> int:
    args = base_parser(NAME, __doc__).parse_args(argv)
    gguf, reason = find_gguf()
    if gguf is None:
        print(f"SKIP {NAME}: {reason} (make test-llm installs the llm extra)")
        return 0
    calls = 8 if args.quick else 24
    with redis_server() as redis_srv, scratch_dir("bench-llama-") as tmp:
        info = machine_info(raw_client(redis_srv.url))
        with serving_llama(tmp, gguf=gguf) as server:
            body = request_body(server, tmp, redis_srv.url)
            direct_rate(server, body, 1, 1)  # warm the model once, untimed
            direct = {c: direct_rate(server, body, calls, c) for c in CONCURRENCIES}
            try:
                rate, ai = worker_rate(server, redis_srv.url, tmp, calls)
            except (RuntimeError, OSError, redis.RedisError) as exc:
                print(f"  worker failed: {exc}")
                rate, ai = 0.0, 0
    best = max(direct.values())
    for concurrency, value in direct.items():
        print(f"  direct C={concurrency}: {value:.3f} verdicts/s")
    print(f"  worker on defaults: {rate:.3f} verdicts/s, {ai}/{calls} the model's")
    ratio = round(rate / best, 3) if best else None
    goals = [
        Goal("worker verdicts/s vs the direct client's best", ratio, GOAL),
        Goal("verdicts the model's (driver_used=analyzer)", round(ai / calls, 3), 1.0),
    ]
    verdicts = print_goals(goals)
    emit_json(
        NAME,
        {
            "calls": calls,
            "direct_per_s": {str(c): round(v, 3) for c, v in direct.items()},
            "worker_per_s": round(rate, 3),
            "ratio": ratio,
            "goals": verdicts,
            "machine": info,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
