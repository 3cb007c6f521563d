"""Quota exhausted mid-run: three real workers whose OpenAI-like API spends its quota.

Three ``python -m workers.watch_transactions`` (``SENTINEL_ANALYZER_API=openai``), a
redis-server of the bench's (or ``REDIS_URL``) and the harness's Chat Completions server:
a call takes ``--latency`` (0.5 s, a hosted model's order) until ``SWITCH`` calls, then
each is refused at once with OpenAI's 429 ``insufficient_quota``. Each worker has its own
key, so the server tells their calls apart (the fleet's hold is per analyzer, not key).

Arms ``rules`` (the default ``SENTINEL_ANALYZER_WHEN_DOWN``) and ``wait``. Goals: a
worker's calls after it knew of the exhaustion (``calls_after_known``: arrived after its
``analyzer_exhausted`` ERROR line) <= 1; from the fleet's first ``insufficient_quota``
answer, within 5 s a worker's ``sentinel_worker_analyzer_exhausted`` gauge at 1 (what the
rule ``SentinelAnalyzerExhausted`` reads, without ``for``; Prometheus itself is not run)
and the first ``analyzer_exhausted`` ERROR line, one such line per worker; 0 messages lost
(a verdict, or pending or unread), 0 decided twice, 0 against the policy (``wait``: a
rules fallback; either: a dead letter). ``hold_s``: the hold as ``sentinel status`` reads
it. Printed, not judged: the calls per worker after the fleet's first refusal
(``calls_after``) and after the server answered that worker's first (``calls_after_own``).
Both also hold the calls a worker sent in the same instant as the refused one, before any
answer could reach it: bounded by its in-flight limit, refused free (a spent quota bills
nothing), and only avoidable by sending one call alone after every wave of answers, which
would cost every wave in normal running its parallelism.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import timing
from bench.fleet import drivers, started, transactions
from bench.timing import Goal
from sentinel_platform.streams.operators.analyzer_holds import read_holds
from sentinel_platform_tests.harness.model_api_server import ModelApiServer, serving_model_api
from sentinel_platform_tests.harness.processes import child_env
from sentinel_platform_tests.harness.streams import group_drained, undecided

NAME = "quota_exhausted"
WORKERS, GOAL_CALLS, GOAL_ALERT_S, KEY = 3, 1, 5.0, "Bearer sk-bench-"
SIZES = {"quick": (60, 400, 8.0), "full": (300, 2000, 20.0)}  # switch, messages, watched s


def calls_after(requests: Sequence[Mapping[str, Any]]) -> tuple[float | None, dict[str, int]]:
    """When the fleet's first 429 was answered, and the calls of each key (every key that
    called) that arrived after it."""
    first = min(_first_refusals(requests).values(), default=None)
    calls = _calls(requests)
    return first, calls_after_known(requests, dict.fromkeys({c[0] for c in calls}, first))


def calls_after_own(requests: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The calls of each key that arrived after the server answered *that key's* first 429.
    The fleet-wide count of :func:`calls_after` also holds the calls a worker sent before
    any refusal reached it."""
    return calls_after_known(requests, _first_refusals(requests))


def calls_after_known(requests: Sequence[Mapping[str, Any]],
                      known: Mapping[str, float | None]) -> dict[str, int]:  # fmt: skip
    """The calls of each key that arrived after its moment in ``known`` (for a worker: the
    ``ts`` of its ``analyzer_exhausted`` ERROR line, logged once it held every later call);
    a key without one counts none. Conservative: a call sent just before and read late by
    the server counts."""
    calls = _calls(requests)
    later = Counter(k for k, at, _, _ in calls if (t := known.get(k)) is not None and at > t)
    return {k: later[k] for k in sorted({c[0] for c in calls})}


def _first_refusals(requests: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """When the server answered each key's first 429."""
    first: dict[str, float] = {}
    for key, _, answered, status in _calls(requests):
        if status == 429 and answered:
            first[key] = min(first.get(key, answered), answered)
    return first


def _calls(requests: Sequence[Mapping[str, Any]]) -> list[tuple[str, float, float | None, Any]]:
    """(key, arrived, answered, status) of every call the server saw."""
    return [(e["headers"].get("authorization", "").removeprefix(KEY), e["at"],
             e.get("answered_at"), e.get("status")) for e in requests]  # fmt: skip


def account(ids: Sequence[str], verdicts: Sequence[Mapping[str, str]], waiting: set[str],
            when_down: str, dead_letters: int) -> dict[str, int]:  # fmt: skip
    """Messages lost (no verdict, not pending nor unread), decided twice, and against the
    policy (``wait``: a rules fallback; either: a dead letter)."""
    decided, by = Counter(v["txn_id"] for v in verdicts), drivers(verdicts)
    return {
        "lost": sum(1 for i in ids if i not in decided and i not in waiting),
        "twice": sum(1 for n in decided.values() if n > 1),
        "off_policy": dead_letters + (by["fallback"] if when_down == "wait" else 0),
        "ai": by["analyzer"],
        "fallbacks": by["fallback"],
        "waiting": len(waiting - set(decided)),
    }


def judge(arm: str, got: Mapping[str, Any]) -> list[Goal]:
    """The arm's goals from its figures (one not measured is None: a MISS)."""
    most = {k: max(got[k].values() if isinstance(got[k], dict) else got[k], default=None)
            for k in ("calls_after_known", "error_lines")}  # fmt: skip
    return [
        Goal(f"{arm}: calls per worker after it knew of the insufficient_quota",
             most["calls_after_known"], GOAL_CALLS, at_most=True, unit=""),
        Goal(f"{arm}: exhausted gauge (the alert's series) after it", got["gauge_s"],
             GOAL_ALERT_S, at_most=True, unit=" s"),
        Goal(f"{arm}: first analyzer_exhausted ERROR line after it", got["log_s"],
             GOAL_ALERT_S, at_most=True, unit=" s"),
        Goal(f"{arm}: analyzer_exhausted lines per worker", most["error_lines"], 1,
             at_most=True, unit=""),
        *(Goal(f"{arm}: messages {what}", got[key], 0, at_most=True, unit="")
          for key, what in (("lost", "lost"), ("twice", "decided twice"),
                            ("off_policy", "decided against the policy"))),
    ]  # fmt: skip


def since(first: float | None, moment: float | None) -> float | None:
    return None if first is None or moment is None else round(moment - first, 3)


def log_time(ts: str) -> float:
    """A log line's ``ts`` (``2026-11-27T08:50:01.123Z``) in seconds since the epoch."""
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def run_arm(url: str, home: Path, stub: ModelApiServer, when_down: str, mode: str,
            latency_s: float) -> dict[str, Any]:  # fmt: skip
    """Workers on a parked stream released at once (all busy at the switch), watched to
    ``watch_s`` after the first refusal (``rules``: and until drained), stopped; Redis read."""
    switch, count, watch_s = SIZES[mode]
    stub.requests, stub.served, stub.quota_after, stub.latency_s = [], 0, switch, latency_s
    messages = list(transactions(count))
    values = {"analyzer_api": "openai", "analyzer_model": "gpt-4o-mini",
              "analyzer_url": stub.url, "analyzer_when_down": when_down}  # fmt: skip
    envs = [child_env(url, home, analyzer_api_key=f"sk-bench-worker-{i}", **values)
            for i in range(WORKERS)]  # fmt: skip
    gauge_at, hold_at = None, None
    with started(url, home, f"quota-{when_down}", envs, messages, parked=True) as workers:
        client, keys, procs = workers.client, workers.keys, workers.procs
        workers.release(messages)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            first, _ = calls_after(stub.seen())
            if gauge_at is None and 1 in workers.metric("sentinel_worker_analyzer_exhausted"):
                gauge_at = time.time()
            if hold_at is None and any(h.seconds_left is None for h in read_holds(client)):
                hold_at = time.time()
            over = first is not None and time.time() > first + watch_s
            if over and (when_down == "wait" or group_drained(client, keys.stream, keys.group)):
                break
            time.sleep(0.05)
        workers.stop(timeout_s=15)
    first, per_worker = calls_after(stub.seen())
    told = [p.events("analyzer_exhausted") for p in procs]
    known = {f"worker-{i}": min((log_time(e["ts"]) for e in t), default=None)
             for i, t in enumerate(told)}  # fmt: skip
    got: dict[str, Any] = {
        "calls": len(stub.seen()), "calls_after": per_worker,
        "calls_after_own": calls_after_own(stub.seen()),
        "calls_after_known": calls_after_known(stub.seen(), known),
        "error_lines": list(map(len, told)),
        "gauge_s": since(first, gauge_at), "hold_s": since(first, hold_at),
        "log_s": since(first, min((log_time(e["ts"]) for t in told for e in t), default=None)),
    }  # fmt: skip
    ids = {entry_id: json.loads(f["data"])["id"] for entry_id, f in client.xrange(keys.stream)}
    waiting = {ids[i] for i in undecided(client, keys, count)}
    verdicts, dead = [f for _, f in client.xrange(keys.results)], int(client.xlen(keys.dlq))
    return {**got, **account(list(ids.values()), verdicts, waiting, when_down, dead)}


def main(argv: list[str] | None = None) -> int:
    parser = timing.base_parser(NAME, __doc__)
    parser.add_argument("--when-down", default="rules,wait", help="arms: rules,wait")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds an admitted call takes")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    figures: dict[str, Any] = {"switch_after": SIZES[mode][0], "messages": SIZES[mode][1],
                               "latency_s": args.latency}  # fmt: skip
    goals: list[Goal] = []
    with timing.redis_server() as server, timing.scratch_dir("bench-quota-") as tmp, \
            serving_model_api() as stub:  # fmt: skip
        info = timing.machine_info(timing.raw_client(server.url))
        for arm in args.when_down.split(","):
            figures[arm] = got = run_arm(server.url, tmp, stub, arm, mode, args.latency)
            print(f"  {arm:<5} {got}", flush=True)
            goals += judge(arm, got)
    return timing.judged(NAME, figures, goals, info)


if __name__ == "__main__":
    raise SystemExit(main())
