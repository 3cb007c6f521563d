"""Token budget: three real workers against OpenAI-like and Anthropic-like announced limits.

Every run is real: for each arm, three ``python -m workers.watch_transactions`` processes
on defaults (``SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS`` = ``MAX_TOKENS`` = 400 sent as
``max_tokens``) against the harness's model API server
(:class:`~sentinel_platform_tests.harness.model_api_server.ModelApiServer`) and a
redis-server of its own (the arms run side by side; one after another on ``REDIS_URL``'s
server). The server keeps a token bucket of
one minute's budget refilled continuously and answers a call the bucket cannot pay for
with the dialect's 429:

* ``openai``: Chat Completions, each call charged its prompt's tokens (its messages'
  characters / 4) plus its ``max_tokens`` at admission, as OpenAI does; ``x-ratelimit-*``
  on every answer (resets as durations), 429 ``rate_limit_exceeded`` with no
  ``Retry-After``;
* ``anthropic``: Messages, each call charged its input tokens, as Anthropic's input-token
  limit does; ``anthropic-ratelimit-*`` on every answer (input tokens, resets as RFC 3339
  times), 429 ``rate_limit_error`` with ``retry-after``;
* ``configured`` (full runs only): Chat Completions with no headers,
  ``SENTINEL_ANALYZER_TOKENS_PER_MINUTE`` = the budget.

Each starts with the bucket **empty** (the minute's budget spent elsewhere, as on a shared
key) and **full**. Over a window from the first call the server admits at most what the
bucket held at the start plus the refill, so the figure is tokens admitted / (that
start + budget per second x window) (Anthropic: input tokens against its input-token
budget). Goals (PASS/MISS): >= 0.9x, 429s <= 1% of calls, 0 rules fallbacks. The 429s
of the first wave (the calls sent before any answer announced anything) are printed
apart. ``--quick`` shortens the window to 40 s (about a minute in all).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from bench.fleet import drivers, started, transactions
from bench.timing import (
    Goal,
    base_parser,
    judged,
    machine_info,
    raw_client,
    redis_server,
    scratch_dir,
)
from sentinel_platform_tests.harness.model_api_server import ModelApiServer, serving_model_api
from sentinel_platform_tests.harness.processes import child_env

NAME = "token_budget"
MAX_TOKENS = 400
WORKERS = 3
TOKENS_PER_MINUTE = 60_000
#: The fewest tokens a call is charged (its prompt alone): enough messages never run dry.
MIN_CALL_TOKENS = 300
#: Calls in this long after the first are the first wave (sent before any answer).
FIRST_WAVE_S = 0.5
MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-3-5-haiku-latest"}


@contextlib.contextmanager
def arm(
    name: str, api: str, stub: ModelApiServer, *, empty: bool, announced: bool, window_s: float
) -> Iterator[Callable[[], dict[str, Any]]]:
    """Start one arm (its redis-server, stub budget and three workers); yields a function
    that, once the window is over, returns the arm's figures as the server counted them."""
    with redis_server() as server, scratch_dir(f"bench-tokens-{name}-") as home:
        stub.tokens_per_minute, stub.bucket_s, stub.announce = TOKENS_PER_MINUTE, 60.0, announced
        stub.starts_empty, stub.requests_per_minute = empty, 600
        values: dict[str, Any] = {
            "analyzer_api": api,
            "analyzer_model": MODELS[api],
            "analyzer_url": stub.url,
            "analyzer_max_output_tokens": MAX_TOKENS,
            "analyzer_id": f"bench-{name}",
        }
        if not announced:
            values["analyzer_tokens_per_minute"] = TOKENS_PER_MINUTE
        start_tokens = 0 if empty else TOKENS_PER_MINUTE
        allowed = start_tokens + TOKENS_PER_MINUTE / 60 * (window_s + 30)
        messages = list(transactions(int(allowed / MIN_CALL_TOKENS) + 50))
        envs = [child_env(server.url, home, **values)] * WORKERS
        with started(server.url, home, name, envs, messages) as workers:
            yield lambda: figures(stub, workers.results(), start_tokens, window_s)
            workers.stop()


def figures(
    stub: ModelApiServer, results: list[dict[str, str]], start_tokens: int, window_s: float
) -> dict[str, Any]:
    """The arm's window from its first call, as the server counted it."""
    charges = list(stub.charges)
    first = charges[0][0] if charges else time.monotonic()
    window = [c for c in charges if first <= c[0] < first + window_s]
    admitted = sum(cost for _, cost, ok in window if ok)
    refused = sum(1 for _, _, ok in window if not ok)
    allowed = start_tokens + TOKENS_PER_MINUTE / 60 * window_s
    wave = sum(1 for t, _, ok in window if not ok and t < first + FIRST_WAVE_S)
    return {
        "tokens_per_min": round(admitted / window_s * 60),
        "allowed_per_min": round(allowed / window_s * 60),
        "ratio": round(admitted / allowed, 3),
        "calls": len(window),
        "rate_limited": refused,
        "rate_limited_share": round(refused / max(1, len(window)), 4),
        "first_wave_429s": wave,
        "rate_limited_share_after_first_wave": round(
            (refused - wave) / max(1, len(window) - wave), 4
        ),
        "fallbacks": drivers(results)["fallback"],
        "verdicts": len(results),
    }


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(NAME, __doc__)
    args = parser.parse_args(argv)
    window_s = 40.0 if args.quick else 120.0
    arms = [
        (f"{api}-{start}", api, start == "empty", True)
        for api in ("openai", "anthropic")
        for start in ("empty", "full")
    ]
    if not args.quick:
        arms += [("configured-empty", "openai", True, False)]
    results: dict[str, Any] = {
        "max_tokens": MAX_TOKENS,
        "window_s": window_s,
        "tokens_per_minute": TOKENS_PER_MINUTE,
    }
    goals: list[Goal] = []
    with redis_server() as info_server:
        info = machine_info(raw_client(info_server.url))
    # side by side, each on a redis-server of its own; on REDIS_URL's one after another
    batches = [arms] if not os.environ.get("REDIS_URL") else [[one] for one in arms]
    for batch in batches:
        with contextlib.ExitStack() as stack:
            measures = {}
            for name, api, empty, announced in batch:
                stub = stack.enter_context(serving_model_api())
                measures[name] = stack.enter_context(
                    arm(name, api, stub, empty=empty, announced=announced, window_s=window_s)
                )
            time.sleep(window_s + 5)  # every arm's window, from its first call
            for name, measure in measures.items():
                got = measure()
                results[name] = got
                print(f"  {name:<17} {got}", flush=True)
                goals += [
                    Goal(f"{name}: tokens admitted / allowed", got["ratio"], 0.9),
                    Goal(f"{name}: 429s / calls", got["rate_limited_share"], 0.01, at_most=True),
                    Goal(f"{name}: rules fallbacks", got["fallbacks"], 0, at_most=True, unit=""),
                ]
    return judged(NAME, results, goals, info)


if __name__ == "__main__":
    raise SystemExit(main())
