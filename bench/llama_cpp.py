"""A real model: verdicts/s of a worker on defaults against llama.cpp's server, vs a direct client.

llama.cpp's Python server (``python -m llama_cpp.server``, the ``llm`` extra: ``make
test-llm`` installs it) serves SmolLM2-135M-Instruct, one request at a time. Arms:

* **direct**: the worker's own request bodies (:func:`worker_bodies`, one per transaction
  ``t0``.., built by the worker's code) posted straight to the server at C = 1, 2 and 4;
  the best is the baseline. Distinct bodies matter: the server keeps the last prompt's KV
  cache, so one body posted again and again skips the prompt evaluation the worker pays.
* **worker**: ``python -m workers.watch_transactions`` on defaults (the adaptive limit) plus
  docs/analyzer.md's llama.cpp recipe, the transactions released at once, timed to the
  last verdict.

Each arm counts its tokens (the server's ``usage``, the worker's from its verdicts) and the
CPU seconds per verdict of the worker and the server (``/proc``). ``--server stub`` runs the
same arms against the harness's pure queue (capacity 1, ``STUB_SERVICE_S`` a call, no
model): there the ratio measures the worker alone. Goal: worker verdicts/s >= 0.8x the
direct client's best, every verdict the model's. Without the extra the llama scenario
prints SKIP and exits 0.
"""

from __future__ import annotations

import json
import statistics
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import timing
from bench.fleet import started, transactions
from sentinel_platform.schemas import Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.shown import shown
from sentinel_platform_tests.harness.llama_server import MODEL_ALIAS, find_gguf, serving_llama
from sentinel_platform_tests.harness.proc_stats import child_pid, cpu_seconds, spent
from sentinel_platform_tests.harness.processes import child_env
from sentinel_platform_tests.harness.pure_queue_server import PureQueue, serving_pure_queue
from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer.configured import model_api_from_settings
from workers.analyzer.prompts import load_prompt
from workers.processors import transactions as transactions_processor

NAME = "llama_cpp"
GOAL = 0.8
CONCURRENCIES = (1, 2, 4)
#: docs/analyzer.md's llama.cpp recipe (field names).
RECIPE = {"analyzer_api": "openai", "analyzer_response_format": "json_object"}
#: A call is seconds on two loaded cores: the whole run is bounded by this.
RUN_TIMEOUT_S = 900.0
#: The pure-queue stub's service time: llama.cpp's queue, ten times faster.
STUB_SERVICE_S = 0.3
Entries = list[tuple[str, dict[str, str]]]


@dataclass
class Arm:
    """One arm's figures: verdicts/s, tokens per call, CPU seconds per verdict."""

    label: str
    calls: int
    rate: float = 0.0
    model_verdicts: int = 0
    usage: list[tuple[int, int]] = field(default_factory=list)  # (prompt, completion)
    worker_cpu_s: float | None = None
    server_cpu_s: float | None = None

    def row(self) -> dict[str, Any]:
        prompt, completion = zip(*self.usage, strict=True) if self.usage else ((0,), (0,))
        return {
            "label": self.label,
            "per_s": round(self.rate, 3),
            "model_verdicts": self.model_verdicts,
            "prompt_tokens_mean": round(statistics.mean(prompt), 1),
            "completion_tokens_mean": round(statistics.mean(completion), 1),
            "worker_cpu_s_per_verdict": _per(self.worker_cpu_s, self.model_verdicts),
            "server_cpu_s_per_verdict": _per(self.server_cpu_s, self.calls),
        }


def _per(seconds: float | None, count: int) -> float | None:
    return round(seconds / count, 3) if seconds is not None and count else None


def worker_settings(url: str, home: Path, analyzer_url: str, model: str) -> Settings:
    """The worker's settings: defaults plus the recipe, against ``analyzer_url``."""
    return timing.bench_settings(
        url,
        home,
        analyzer_url=analyzer_url,
        analyzer_model=model,
        **RECIPE,
    )


def worker_bodies(settings: Settings, calls: int) -> list[bytes]:
    """The worker's own request for each of the ``calls`` transactions it gets, built by
    the worker's code (its API from the settings, the stream's prompt, the payload as the
    analyzer client shows of a parsed :class:`Transaction`)."""
    api = model_api_from_settings(settings)
    prompt = load_prompt(transactions_processor.PROMPT, settings)
    return [
        api.request(
            "transaction",
            shown(Transaction.from_fields(fields)).payload(),
            prompt,
        )
        for fields in transactions(calls)
    ]


def usage(base_url: str, body: bytes, timeout_s: float = RUN_TIMEOUT_S) -> dict[str, Any]:
    """One Chat Completions call; its answer's ``usage`` (raises on an error object)."""
    request = urllib.request.Request(
        f"{base_url}/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        reply = json.load(response)
    reply["choices"][0]["message"]["content"]  # an answer, not an error object
    return dict(reply["usage"])


def post(base_url: str, body: bytes) -> tuple[int, int]:
    """One call; the server's ``usage`` (prompt, completion tokens)."""
    used = usage(base_url, body)
    return int(used["prompt_tokens"]), int(used["completion_tokens"])


def direct_arm(label: str, base_url: str, bodies: list[bytes], concurrency: int) -> Arm:
    """Each of ``bodies`` posted once, ``concurrency`` at a time."""
    server = child_pid("llama_cpp.server")
    before = cpu_seconds(server)
    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        usage = list(pool.map(lambda body: post(base_url, body), bodies))
    arm = Arm(label, len(bodies), len(bodies) / (time.monotonic() - started), len(bodies), usage)
    arm.server_cpu_s = spent(server, before)
    return arm


def worker_arm(url: str, home: Path, settings: Settings, calls: int) -> Arm:
    """One worker on defaults plus the recipe, timed from the release to the last verdict."""
    messages = list(transactions(calls))
    assert settings.analyzer_url is not None
    env = child_env(
        url,
        home,
        analyzer_url=settings.analyzer_url.get_secret_value(),
        analyzer_model=settings.analyzer_model,
        **RECIPE,
    )
    server = child_pid("llama_cpp.server")
    with started(url, home, "llama-worker", [env], messages, parked=True, ready_s=120) as workers:
        client, keys, (worker,) = workers.client, workers.keys, workers.procs
        cpu_before, server_before = cpu_seconds(worker.pid), cpu_seconds(server)
        workers.release(messages)
        start = time.monotonic()
        wait_until(
            lambda: client.xlen(keys.results) >= calls,
            timeout_s=RUN_TIMEOUT_S,
            interval_s=0.1,
            what="every verdict",
        )
        arm = Arm("worker on defaults", calls, calls / (time.monotonic() - start))
        arm.worker_cpu_s = spent(worker.pid, cpu_before)
        arm.server_cpu_s = spent(server, server_before)
        workers.stop()
        model = [r for r in workers.results() if r.get("driver_used") == "analyzer"]
    arm.model_verdicts = len(model)
    arm.usage = [(int(r["input_tokens"]), int(r["output_tokens"])) for r in model]
    return arm


def run_arms(
    url: str,
    settings: Settings,
    home: Path,
    calls: int,
    stub: PureQueue | None,
) -> tuple[list[Arm], bool | None]:
    """Every arm against the server ``settings`` name; and, with a stub, whether the
    direct client at C=1 sent exactly the bodies the worker sent (as multisets)."""
    assert settings.analyzer_url is not None
    base_url = settings.analyzer_url.get_secret_value()
    bodies = worker_bodies(settings, calls)
    direct_arm("warm-up", base_url, bodies[:1], 1)  # the grammar built once, untimed
    arms = []
    sent: dict[str, Counter[bytes]] = {}
    for concurrency in CONCURRENCIES:
        if stub is not None:
            stub.reset()
        arms.append(direct_arm(f"direct C={concurrency}", base_url, bodies, concurrency))
        if stub is not None and concurrency == 1:
            sent["direct"] = Counter(stub.bodies)
    if stub is not None:
        stub.reset()
    arms.append(worker_arm(url, home, settings, calls))
    if stub is None:
        return arms, None
    sent["worker"] = Counter(stub.bodies)
    return arms, sent["direct"] == sent["worker"]


def main(argv: list[str] | None = None) -> int:
    parser = timing.base_parser(NAME, __doc__)
    parser.add_argument("--server", choices=("llama", "stub"), default="llama")
    args = parser.parse_args(argv)
    calls = (40 if args.quick else 100) if args.server == "stub" else (8 if args.quick else 24)
    gguf, reason = find_gguf() if args.server == "llama" else (None, "")
    if args.server == "llama" and gguf is None:
        print(f"SKIP {NAME}: {reason} (make test-llm installs the llm extra)")
        return 0
    with timing.redis_server() as redis_srv, timing.scratch_dir("bench-llama-") as tmp:
        url, info = redis_srv.url, timing.machine_info(timing.raw_client(redis_srv.url))
        if gguf is None:
            with serving_pure_queue(STUB_SERVICE_S) as stub:
                settings = worker_settings(url, tmp, stub.url, MODEL_ALIAS)
                arms, same = run_arms(url, settings, tmp, calls, stub)
        else:
            with serving_llama(tmp, gguf=gguf) as server:
                settings = worker_settings(url, tmp, server.url, server.model)
                arms, same = run_arms(url, settings, tmp, calls, None)
    return report(args.server, calls, arms, same, info)


def report(server: str, calls: int, arms: list[Arm], same: bool | None, info: Any) -> int:
    """The arms' table, the goals and the JSON line."""
    rows = [arm.row() for arm in arms]
    for row in rows:
        print("  " + ", ".join(f"{k}={v}" for k, v in row.items()))
    worker = arms[-1]
    best = max(arm.rate for arm in arms[:-1])
    ratio = round(worker.rate / best, 3) if best else None
    model_share = worker.model_verdicts / calls
    goals = [
        timing.Goal("worker verdicts/s vs the direct client's best", ratio, GOAL),
        timing.Goal("verdicts the model's (driver_used=analyzer)", model_share, 1.0),
    ]
    if same is not None:
        print(f"  direct C=1 sent the worker's bodies exactly: {same}")
    verdicts = timing.print_goals(goals)
    timing.emit_json(
        NAME,
        {
            "server": server,
            "calls": calls,
            "arms": rows,
            "ratio": ratio,
            "same_bodies": same,
            "goals": verdicts,
            "machine": info,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
