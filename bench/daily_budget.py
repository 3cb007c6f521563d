"""Daily budget: three real workers spend a daily token budget while a fifth of the answers are cut.

Three ``python -m workers.watch_transactions`` (``SENTINEL_ANALYZER_API=openai``,
``SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS`` = ``MAX_TOKENS``, ``--concurrency`` =
``CONCURRENCY``, ``SENTINEL_ANALYZER_DAILY_TOKENS`` = N, ``WHEN_DOWN`` rules) against the
harness's Chat Completions server, a redis-server of the bench's (or ``REDIS_URL``). Each
call takes ``LATENCY_S`` (a hosted model's order, so calls are in flight together); every
fifth answer is cut at ``max_tokens`` as OpenAI documents it (``finish_reason:
"length"``, ``usage`` billing the prompt and the whole ``max_tokens``, no verdict). The
stream holds twice the messages the budget pays for, so it runs out mid-run.

Goals (PASS/MISS): tokens billed by the stub (the sum of its answers' ``usage``) equal to
what the platform counted, in the daily counter, in ``analyzer_tokens_total`` (input plus
output, every worker) and in the result entries (verdicts and the cut answers'
fallbacks); the overshoot (billed - N) at most the tokens of the calls in flight when the
budget ran out (the calls the stub had received, and not answered, when it answered the
call that took its bills to N or past, or received within ``SETTLE_GAP_S`` after: the time
for that answer to reach its worker and be settled), 0 calls sent later; the fleet held
(cause ``daily_tokens``) as ``sentinel status`` reads it. ``--quick``: a smaller budget.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.fleet import drivers, series, started, transactions
from bench.timing import (
    Goal,
    base_parser,
    judged,
    machine_info,
    raw_client,
    redis_server,
    scratch_dir,
)
from sentinel_platform.streams.operators.analyzer_holds import read_holds
from sentinel_platform_tests.harness.model_api_server import ModelApiServer, serving_model_api
from sentinel_platform_tests.harness.processes import child_env
from workers.analyzer.limits.token_budget import budget_key

NAME = "daily_budget"
WORKERS, CONCURRENCY, MAX_TOKENS, CUT_EVERY = 3, 4, 400, 5
LATENCY_S = 0.3
#: A call received this soon after the answer that spent the budget was reserved before
#: that answer was settled: it was in flight when the budget ran out.
SETTLE_GAP_S = 0.05
ANALYZER_ID = "bench-daily"
SIZES = {"quick": 60_000, "full": 300_000}


def scraped_tokens(port: int) -> int:
    """A worker's ``analyzer_tokens_total``, input plus output, every model."""
    found = series(port, "sentinel_worker_analyzer_tokens_total{")
    return int(
        sum(v for labels, v in found if 'kind="input"' in labels or 'kind="output"' in labels)
    )


def in_flight(stub: ModelApiServer, budget: int) -> dict[str, Any]:
    """From the stub's record: when its bills reached ``budget``, the tokens of the calls
    in flight then (that answer's included), and the calls received later than that."""
    answered = sorted(
        (r for r in stub.seen() if r.get("status") == 200), key=lambda r: r["answered_at"]
    )
    total, crossing = 0, None
    for request in answered:
        total += request["billed"]
        if total >= budget:
            crossing = request
            break
    if crossing is None:
        return {"ran_out": False, "in_flight_calls": 0, "in_flight_tokens": 0, "later_calls": 0}
    at = crossing["answered_at"]
    flying = [r for r in answered if r["answered_at"] >= at and r["at"] <= at + SETTLE_GAP_S]
    return {
        "ran_out": True,
        "in_flight_calls": len(flying),
        "in_flight_tokens": sum(r["billed"] for r in flying),
        "later_calls": sum(1 for r in stub.seen() if r["at"] > at + SETTLE_GAP_S),
    }


def run(url: str, home: Path, stub: ModelApiServer, budget: int) -> dict[str, Any]:
    stub.cut_every, stub.latency_s = CUT_EVERY, LATENCY_S
    env = child_env(
        url,
        home,
        analyzer_api="openai",
        analyzer_model="gpt-4o-mini",
        analyzer_url=stub.url,
        analyzer_max_output_tokens=MAX_TOKENS,
        analyzer_id=ANALYZER_ID,
        analyzer_daily_tokens=budget,
    )
    messages = 2 * budget // 300  # a verdict bills ~300 tokens: twice what the budget pays
    started_at, args = time.monotonic(), ["--concurrency", str(CONCURRENCY)]
    envs = [env] * WORKERS
    with started(url, home, "daily", envs, list(transactions(messages)), args=args) as workers:
        client, keys = workers.client, workers.keys
        deadline = time.monotonic() + 300
        while client.xlen(keys.results) < messages and time.monotonic() < deadline:
            time.sleep(0.1)
        elapsed = time.monotonic() - started_at
        holds = [h for h in read_holds(client, [ANALYZER_ID]) if h.analyzer_id == ANALYZER_ID]
        scraped = sum(scraped_tokens(port) for port in workers.ports)
        results = workers.results()
        workers.stop()
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    counter = int(client.get(budget_key(ANALYZER_ID, f"day:{day}")) or 0)
    in_results = sum(
        int(f.get("input_tokens", 0)) + int(f.get("output_tokens", 0)) for f in results
    )
    held, count = holds[0] if holds else None, drivers(results)
    return {
        "budget": budget,
        "messages": messages,
        "calls": len(stub.seen()),
        "cut": stub.cut,
        "billed": stub.billed_tokens,
        "daily_counter": counter,
        "metrics": scraped,
        "result_entries": in_results,
        "overshoot": stub.billed_tokens - budget,
        **in_flight(stub, budget),
        "verdicts": count["analyzer"],
        "fallbacks": count["fallback"],
        "hold": None if held is None else f"{held.cause}: {held.reason}",
        "elapsed_s": round(elapsed, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(NAME, __doc__)
    args = parser.parse_args(argv)
    budget = SIZES["quick" if args.quick else "full"]
    with redis_server() as server, scratch_dir("bench-daily-") as tmp, serving_model_api() as stub:
        info = machine_info(raw_client(server.url))
        got = run(server.url, tmp, stub, budget)
    print(f"  {got}", flush=True)
    held = got["hold"] is not None and "daily_tokens" in got["hold"]
    goals = [
        Goal("billed - daily counter", abs(got["billed"] - got["daily_counter"]), 0, True, ""),
        Goal("billed - analyzer_tokens_total", abs(got["billed"] - got["metrics"]), 0, True, ""),
        Goal("billed - result entries", abs(got["billed"] - got["result_entries"]), 0, True, ""),
        Goal("overshoot - in flight", got["overshoot"] - got["in_flight_tokens"], 0, True, ""),
        Goal("calls sent after it ran out", got["later_calls"], 0, True, ""),
        Goal("fleet held (daily_tokens)", 1 if held else 0, 1, unit=""),
    ]
    figures = {**got, "max_tokens": MAX_TOKENS, "cut_every": CUT_EVERY, "goals": {}}
    return judged(NAME, figures, goals, info)


if __name__ == "__main__":
    raise SystemExit(main())
