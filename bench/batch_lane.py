"""Batch lane: a backfill through the providers' batch APIs beside a live stream in real time.

Per API (``openai``, ``anthropic``), two arms against one redis-server of the bench's (or
``REDIS_URL``) and the harness's batch API server (both providers' batch APIs and their
real-time calls, each real-time call answered after ``REALTIME_S``; the two lanes served
from processes of their own, the batch API's at the lowest CPU priority, as a hosted
provider's work is not done on its callers' cores: :func:`provider_apart`): ``live`` (a live
stream fed at a steady rate through two ``python -m workers.watch_transactions``) and
``backfill`` (the same, with ``PARTITIONS`` past days of transactions put first into the
stream's batch lane: the live stream's wire fields, XADDed to ``batch_stream_key`` as the
publish path writes them). Halfway through the feed worker 0 is SIGKILLed (in both arms,
so the live figures compare like with like: in ``backfill`` while its batches are at the
provider) and a new worker started. A batch ends after ``POLLS_TO_END`` polls, at poll
timings of a fraction of a second; at the production defaults (first poll after
``analyzer_batch_poll_s``, doubling to ``analyzer_batch_poll_max_s``) that many polls span
:func:`simulated_s`. Every ``ERRORED_EVERY``-th and ``EXPIRED_EVERY``-th request of a batch
comes back ``errored``/``expired`` (decided by the rules: ``SENTINEL_ANALYZER_WHEN_DOWN``).

Printed, not asserted: messages decided once, lost (no verdict) and twice (result entries
per txn id); HTTP requests to the provider per 1,000 messages per lane; tokens per lane and
their cost (the cost module's :class:`Prices` at the lane's price, and at the real-time
price); the live stream's drain rate and p95 latency (result entry time minus its source
entry's) in ``backfill`` as a ratio of ``live`` (target: within 10%), and the p95 of its
calls alone (the results' ``latency_ms``: the provider's answer, apart from the worker's
own); when the batch verdicts were written
and the live messages slower than twice the median, by 5 s of the feed they were sent in.
"""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import redis

from bench import timing
from bench.fleet import TRANSACTION
from bench.timing import Goal, id_ms
from sentinel_platform.domains.reporting.cost import TOKEN_FIELDS, cost, prices_from
from sentinel_platform.schemas import Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.keys import batch_stream_key, batches_key, transaction_keys
from sentinel_platform_tests.harness.batch_api_process import ServerProxy, provider_apart
from sentinel_platform_tests.harness.processes import (
    MODEL_NAMES,
    Fleet,
    WorkerProcess,
    model_api_worker,
)
from sentinel_platform_tests.harness.waits import WaitTimeout, wait_until

NAME = "batch_lane"
APIS, PARTITIONS, WORKERS, SEED = ("openai", "anthropic"), 5, 2, 54
#: Transactions per partition, live messages per second, seconds the live stream is fed.
SIZES = {"quick": (2_000, 10.0, 20.0), "full": (20_000, 10.0, 60.0)}
POLLS_TO_END, ERRORED_EVERY, EXPIRED_EVERY, REALTIME_S = 12, 50, 40, 0.05
LANE_TIMINGS = {"analyzer_batch_poll_s": 0.2, "analyzer_batch_poll_max_s": 1.0,
                "analyzer_batch_gather_s": 0.5,
                "analyzer_batch_lane": "on"}  # the stub serves the batch API  # fmt: skip
#: USD per million input, output tokens: the providers' list prices of the harness's models.
PRICES = {"openai": (0.15, 0.60), "anthropic": (0.80, 4.00)}
KEY, GOAL_RATIO = "sk-bench-batch-lane-0123456789", 0.10


def simulated_s(polls: int, first_s: float = 60.0, most_s: float = 600.0) -> float:
    """How long ``polls`` polls of a batch span at the production poll timings (defaults)."""
    return sum(min(first_s * 2**k, most_s) for k in range(polls))


def backfill(per_partition: int) -> list[dict[str, str]]:
    """``PARTITIONS`` past days of transactions in the wire format (seeded amounts)."""
    rng = random.Random(SEED)
    return [
        Transaction(**{**TRANSACTION, "id": f"b{p}-{n}", "amount": round(rng.uniform(1, 5e3), 2),
                       "timestamp": f"2026-11-{20 + p}T12:00:00Z"}).to_fields()
        for p in range(PARTITIONS) for n in range(per_partition)
    ]  # fmt: skip


def xadd_all(client: redis.Redis, stream: str, entries: Sequence[Mapping[str, str]]) -> None:
    for start in range(0, len(entries), 5_000):
        pipe = client.pipeline(transaction=False)
        for fields in entries[start : start + 5_000]:
            pipe.xadd(stream, cast(Any, dict(fields)))
        pipe.execute()


def lane_worker(fleet: Fleet, settings: Settings, stub: ServerProxy, api: str,
                name: str) -> WorkerProcess:  # fmt: skip
    url = f"{stub.url}/v1" if api == "openai" else stub.url
    return model_api_worker(fleet, settings, name, api=api, analyzer_url=url,
                            analyzer_api_key=KEY, analyzer_when_down="rules",
                            **LANE_TIMINGS)  # fmt: skip


def settled(client: redis.Redis, settings: Settings, total: int) -> bool:
    """Every message has a result entry (or more), nothing pending, no batch out."""
    keys = transaction_keys(settings)
    pending = [
        client.xpending(s, keys.group)["pending"] for s in (keys.stream, batch_stream_key(keys))
    ]
    out = client.zcard(batches_key(keys))
    return client.xlen(keys.results) >= total and not any(pending) and not out


def tokens_by_lane(results: Sequence[Mapping[str, str]], settings: Settings) -> dict[str, Any]:
    """Per lane: tokens, their cost at the lane's price and at the real-time price."""
    prices, out = prices_from(settings), {}
    for lane in ("realtime", "batch"):
        rows = [r for r in results if r.get("lane", "realtime") == lane]
        tok = [sum(int(r.get(f) or 0) for r in rows) for f in TOKEN_FIELDS]
        lane_prices = prices.of_lane(lane) if prices else None
        out[lane] = {"input": tok[0], "output": tok[1],
                     "cost_usd": cost(tok[0], tok[1], tok[2], lane_prices),
                     "realtime_cost_usd": cost(tok[0], tok[1], tok[2], prices)}  # fmt: skip
    return out


def run_arm(url: str, home: Path, api: str, mode: str, with_backfill: bool) -> dict[str, Any]:
    per, rate, feed_s = SIZES[mode]
    inp, outp = PRICES[api]
    settings = timing.bench_settings(url, home, analyzer_api=api, analyzer_model=MODEL_NAMES[api],
                                     analyzer_url="http://127.0.0.1:9", analyzer_api_key=KEY,
                                     analyzer_price_input_per_mtok=inp,
                                     analyzer_price_output_per_mtok=outp)  # fmt: skip
    keys, client = transaction_keys(settings), timing.raw_client(url)
    client.flushdb()
    past = backfill(per) if with_backfill else []
    live_n, sent = int(rate * feed_s), {}
    got: dict[str, Any] = {"error": None}
    provider = provider_apart(REALTIME_S, polls_to_end=POLLS_TO_END,
                              errored_every=ERRORED_EVERY, expired_every=EXPIRED_EVERY)  # fmt: skip
    with provider as (stub, batches), Fleet(home) as fleet:
        procs = [lane_worker(fleet, settings, stub, api, f"{api}-{i}") for i in range(WORKERS)]
        for proc in procs:
            proc.wait_ready(client, timeout_s=90)
        begun = time.monotonic()
        xadd_all(client, batch_stream_key(keys), past)
        got["publish_s"] = round(time.monotonic() - begun, 2)
        start = time.monotonic()
        for n in range(live_n):
            time.sleep(max(0.0, start + n / rate - time.monotonic()))
            if n == live_n // 2:
                got["batches_out_at_kill"] = client.zcard(batches_key(keys))
                procs[0].kill()
                procs.append(lane_worker(fleet, settings, stub, api, f"{api}-{WORKERS}"))
            fields = Transaction(**{**TRANSACTION, "id": f"live-{n}"}).to_fields()
            sent[f"live-{n}"] = id_ms(cast(str, client.xadd(keys.stream, cast(Any, fields))))
        try:
            wait_until(lambda: settled(client, settings, live_n + len(past)),
                       timeout_s=120 + len(past) / 100, what="every message decided")  # fmt: skip
        except WaitTimeout as exc:
            got["error"] = str(exc)
        got["wall_s"] = round(time.monotonic() - begun, 1)
        for proc in procs:
            proc.stop(timeout_s=10)
        at_batches, realtime_calls = batches.counts(), stub.counts()["realtime_calls"]
    provider_http, submissions = at_batches["requests"], at_batches["submissions"]
    entries = cast(list[tuple[str, dict[str, str]]], client.xrange(keys.results))
    results = [fields for _, fields in entries]
    counts = Counter(r["txn_id"] for r in results)
    ids = [*sent, *(f"b{p}-{n}" for p in range(PARTITIONS) for n in range(per) if past)]
    lat = [id_ms(i) - sent[f["txn_id"]] for i, f in entries if f["txn_id"] in sent]
    last = max((id_ms(i) for i, f in entries if f["txn_id"] in sent), default=None)
    drain = ratio_or_none(len(lat), None if last is None else (last - min(sent.values())) / 1e3)
    batch = [r for r in results if r.get("lane") == "batch"]
    t0, slow = min(sent.values()), 2 * statistics.median(lat or [0.0])
    batch_at = [round((id_ms(i) - t0) / 1e3, 1) for i, f in entries if f.get("lane") == "batch"]
    slow_at = Counter(int((sent[f["txn_id"]] - t0) / 5e3) * 5 for i, f in entries
                      if f["txn_id"] in sent and id_ms(i) - sent[f["txn_id"]] > slow)  # fmt: skip
    return {
        **got, "messages": len(ids), "lost": sum(1 for i in ids if not counts[i]),
        "twice": sum(1 for n in counts.values() if n > 1),
        "batch_drivers": dict(Counter(r["driver_used"] for r in batch)),
        "batch_submissions": submissions,
        "provider_http_per_1000": (timing.ratio(provider_http * 1000, len(past), 1)
                                   if past else None),
        "realtime_http_per_1000": timing.ratio(realtime_calls * 1000, len(sent), 1),
        "live_drain_per_s": drain, "live_latency_ms": timing.distribution(lat or [0.0], 1),
        "live_call_ms": timing.distribution([float(f.get("latency_ms") or 0) for f in results
                                             if f["txn_id"] in sent] or [0.0], 1),
        "tokens": tokens_by_lane(results, settings),
        "batch_verdicts_at_s": batch_at and [batch_at[0], batch_at[-1]],
        "slow_live_by_5s": dict(sorted(slow_at.items())),
    }  # fmt: skip


def ratio_or_none(count: int, seconds: float | None) -> float | None:
    return None if not seconds else round(count / seconds, 2)


def judge(api: str, live: Mapping[str, Any], back: Mapping[str, Any]) -> list[Goal]:
    drain = timing.ratio(back["live_drain_per_s"], live["live_drain_per_s"])
    p95 = timing.ratio(back["live_latency_ms"]["p95"], live["live_latency_ms"]["p95"])
    return [
        Goal(f"{api}: backfill messages lost", back["lost"], 0, at_most=True, unit=""),
        Goal(f"{api}: backfill messages decided twice", back["twice"], 0, at_most=True, unit=""),
        Goal(f"{api}: live drain rate with/without backfill", drain, 1 - GOAL_RATIO),
        Goal(f"{api}: live p95 latency with/without backfill", p95, 1 + GOAL_RATIO, at_most=True),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = timing.base_parser(NAME, __doc__)
    parser.add_argument("--api", default=",".join(APIS), help="openai,anthropic")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    per, rate, feed_s = SIZES[mode]
    figures: dict[str, Any] = {
        "partitions": PARTITIONS, "per_partition": per, "live_per_s": rate, "feed_s": feed_s,
        "polls_to_end": POLLS_TO_END, "simulated_batch_s": simulated_s(POLLS_TO_END),
        "errored_every": ERRORED_EVERY, "expired_every": EXPIRED_EVERY, "realtime_s": REALTIME_S,
    }  # fmt: skip
    goals: list[Goal] = []
    with timing.redis_server() as server, timing.scratch_dir("bench-batch-") as tmp:
        info = timing.machine_info(timing.raw_client(server.url))
        for api in args.api.split(","):
            arms = {arm: run_arm(server.url, tmp, api, mode, arm == "backfill")
                    for arm in ("live", "backfill")}  # fmt: skip
            for arm, got in arms.items():
                print(f"  {api:<9} {arm:<8} {got}", flush=True)
            figures[api] = arms
            goals += judge(api, arms["live"], arms["backfill"])
    return timing.judged(NAME, figures, goals, info)


if __name__ == "__main__":
    raise SystemExit(main())
