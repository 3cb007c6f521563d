"""Token budget: three real workers against an OpenAI-like server's tokens-per-minute limit.

Every run is real: three ``python -m workers.watch_transactions`` processes on defaults
(``SENTINEL_ANALYZER_API=openai``, ``SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS`` =
``MAX_TOKENS`` = 400 sent as ``max_tokens``) against the harness's Chat Completions
server (:class:`~sentinel_platform_tests.harness.model_api_server.ModelApiServer`) and a
redis-server started by the bench (or ``REDIS_URL``). The server charges each call, at
admission, its prompt's tokens (its messages' characters / 4) plus its ``max_tokens``, as
OpenAI does, from a bucket of one minute's budget refilled continuously, and answers
OpenAI's 429 (``rate_limit_exceeded``, no ``Retry-After``) to a call the bucket cannot
pay for. It announces 600 requests a minute beside the tokens (not enforced: at these
sizes the token budget binds first).

Arms (goals printed with PASS/MISS):

* ``announced``: 60,000 tokens/min announced with ``x-ratelimit-*`` on every answer, no
  setting: tokens admitted per minute (as the server charges them) >= 0.9x the budget,
  429s <= 1% of calls, 0 rules fallbacks.
* ``configured``: no headers, ``SENTINEL_ANALYZER_TOKENS_PER_MINUTE`` = the budget:
  >= 0.85x, 429s <= 2%, 0 fallbacks.

The rate is measured over a window after the first minute (the bucket starts full, so
the first minute would flatter any client); ``--quick`` scales the budget down by 4 and
shortens the window.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.cells import spawn, transactions
from bench.timing import (
    Goal,
    base_parser,
    emit_json,
    machine_info,
    print_goals,
    raw_client,
    redis_server,
    scratch_dir,
)
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.model_api_server import ModelApiServer, serving_model_api
from sentinel_platform_tests.harness.processes import Fleet, child_env, wait_leases

NAME = "token_budget"
MAX_TOKENS = 400
WORKERS = 3
WARM_S = 60.0


def run_arm(
    url: str, home: Path, stub: ModelApiServer, *, announced: bool, tpm: int, window_s: float
) -> dict[str, Any]:
    """One arm: the figures of its window, as the server counted them."""
    client = raw_client(url)
    client.flushdb()
    stub.tokens_per_minute, stub.bucket_s, stub.announce = tpm, 60.0, announced
    stub.requests_per_minute = 600
    stub._level, stub.charges, stub.rate_limited, stub.admitted_tokens = None, [], 0, 0
    keys = transaction_keys(load_settings(redis_url=url, home=home))
    values: dict[str, Any] = {
        "analyzer_api": "openai",
        "analyzer_model": "gpt-4o-mini",
        "analyzer_url": stub.url,
        "analyzer_max_output_tokens": MAX_TOKENS,
        "analyzer_id": f"bench-{'announced' if announced else 'configured'}",
    }
    if not announced:
        values["analyzer_tokens_per_minute"] = tpm
    env = child_env(url, home, **values)
    calls_needed = int(tpm / 600 * (WARM_S + window_s) * 1.5) + 50  # never runs dry
    for fields in transactions(calls_needed):
        client.xadd(keys.stream, fields)  # type: ignore[arg-type]
    with Fleet(home) as fleet:
        procs = [spawn(fleet, f"tokens-{i}", env, []) for i in range(WORKERS)]
        wait_leases(client, keys, procs)
        deadline = time.monotonic() + 30
        while not stub.charges and time.monotonic() < deadline:
            time.sleep(0.05)
        start = (stub.charges[0][0] if stub.charges else time.monotonic()) + WARM_S
        time.sleep(max(0.0, start + window_s - time.monotonic()))
        charges = [c for c in list(stub.charges) if start <= c[0] < start + window_s]
        verdicts = [f for _, f in client.xrange(keys.results)]
        for proc in procs:
            proc.stop(timeout_s=10)
    admitted = sum(cost for _, cost, ok in charges if ok)
    refused = sum(1 for _, _, ok in charges if not ok)
    return {
        "tokens_per_min": round(admitted / window_s * 60),
        "budget": tpm,
        "ratio": round(admitted / window_s * 60 / tpm, 3),
        "calls": len(charges),
        "rate_limited": refused,
        "rate_limited_share": round(refused / max(1, len(charges)), 4),
        "fallbacks": sum(1 for f in verdicts if f.get("driver_used") == "fallback"),
        "verdicts": len(verdicts),
    }


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(NAME, __doc__)
    args = parser.parse_args(argv)
    tpm = 15_000 if args.quick else 60_000
    window_s = 30.0 if args.quick else 120.0
    figures: dict[str, Any] = {"max_tokens": MAX_TOKENS, "window_s": window_s}
    goals: list[Goal] = []
    with redis_server() as server, scratch_dir("bench-tokens-") as tmp, serving_model_api() as stub:
        info = machine_info(raw_client(server.url))
        for arm, announced, share, limit in (
            ("announced", True, 0.9, 0.01),
            ("configured", False, 0.85, 0.02),
        ):
            got = run_arm(server.url, tmp, stub, announced=announced, tpm=tpm, window_s=window_s)
            figures[arm] = got
            print(f"  {arm:<10} {got}", flush=True)
            goals += [
                Goal(f"{arm}: tokens/min admitted / budget", got["ratio"], share),
                Goal(f"{arm}: 429s / calls", got["rate_limited_share"], limit, at_most=True),
                Goal(f"{arm}: rules fallbacks", got["fallbacks"], 0, at_most=True, unit=""),
            ]
    figures["goals"] = print_goals(goals)
    emit_json(NAME, {**figures, "machine": info})
    return 0 if all(v == "PASS" for v in figures["goals"].values()) else 1


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
